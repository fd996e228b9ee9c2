"""What TensorBoard shows at each validation besides loss: BLEU, samples, attention maps."""

from typing import Any

import lightning as L
import matplotlib

matplotlib.use("Agg")  # no display on training machines
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from blocks import MultiHeadAttention  # noqa: E402
from builder.datasets import split_texts  # noqa: E402
from builder.evaluate import score, translate_texts  # noqa: E402
from builder.translate import source_tensor, translate_ids  # noqa: E402


class ValidationTranslations(L.Callback):
    """On rank 0 after each validation: beam-search the validation subset, log sacreBLEU, a few
    translation samples as text, and every k-th time the attention maps of a probe sentence."""

    def __init__(self) -> None:
        self.validations = 0
        self.last: dict[str, Any] = {}

    def on_validation_epoch_end(self, trainer: L.Trainer, task: L.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        spec, data = task.spec, trainer.datamodule
        settings = spec.train.validation
        self.validations += 1
        if not settings.bleu:
            return
        sources, refs = split_texts(data, "valid", settings.bleu_max_sentences)
        hyps = translate_texts(task.model, data.src_tokenizer, sources, task.spec.decode, tgt_tokenizer=data.tgt_tokenizer)
        self.last = score(hyps, refs)
        task.log("val/bleu", self.last["bleu"], rank_zero_only=True)
        task.log("val/chrf", self.last["chrf"], rank_zero_only=True)
        task.log("hp/bleu", self.last["bleu"], rank_zero_only=True)
        experiment = _tensorboard(trainer)
        if experiment is None:
            return
        if settings.num_samples:
            rows = [f"| {s} | {r} | {h} |" for s, r, h in list(zip(sources, refs, hyps))[: settings.num_samples]]
            table = "| source | reference | translation |\n|---|---|---|\n" + "\n".join(rows)
            experiment.add_text("val/samples", table, trainer.global_step)
        every = settings.attention_maps_every
        if every and (self.validations - 1) % every == 0:
            probe = settings.probe_sentence or sources[0]
            for tag, figure in attention_figures(task, data.src_tokenizer, data.tgt_tokenizer, probe).items():
                experiment.add_figure(tag, figure, trainer.global_step)


@torch.no_grad()
def attention_figures(task: L.LightningModule, tokenizer: Any, tgt_tokenizer: Any, sentence: str) -> dict[str, Any]:
    """One figure per attention sub-layer (a panel per head) for the model's own translation of
    `sentence`, teacher-forced to read out the weights."""
    model = task.model
    src_ids = tokenizer.encode(sentence)
    [hyp] = translate_ids(model, [src_ids], task.spec.decode, bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id)
    tgt_in = [tokenizer.bos_id] + hyp
    device = next(model.parameters()).device
    modules = {name: m for name, m in model.named_modules() if isinstance(m, MultiHeadAttention)}
    for m in modules.values():
        m.record_weights = True
    try:
        model(source_tensor([src_ids], model.pad_id).to(device), source_tensor([tgt_in], model.pad_id).to(device))
    finally:
        for m in modules.values():
            m.record_weights = False
    src_tokens = [tokenizer.hf.id_to_token(i) for i in src_ids]
    tgt_tokens = [tgt_tokenizer.hf.id_to_token(i) for i in tgt_in]
    figures = {}
    for name, m in modules.items():
        weights = m.last_weights[0].float().cpu()  # (h, T, S)
        m.last_weights = None
        keys = tgt_tokens if m.kind != "cross" and name.startswith("decoder") else src_tokens
        queries = src_tokens if name.startswith("encoder") else tgt_tokens
        figures[f"attention/{_short(name)}"] = _heads_figure(weights, queries, keys)
    return figures


def _short(name: str) -> str:
    # encoder.layers.0.sublayers.0.sublayer -> encoder.layer0.sublayer0
    return name.replace("layers.", "layer").replace("sublayers.", "sublayer").removesuffix(".sublayer")


def _heads_figure(weights: torch.Tensor, queries: list[str], keys: list[str]) -> Any:
    h = weights.size(0)
    cols = min(h, 4)
    rows = (h + cols - 1) // cols
    figure, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.2 * rows), squeeze=False)
    for head, ax in enumerate(axes.flat):
        if head >= h:
            ax.axis("off")
            continue
        ax.imshow(weights[head].numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
        ax.set_title(f"head {head}", fontsize=8)
        ax.set_xticks(range(len(keys)), keys, rotation=90, fontsize=6)
        ax.set_yticks(range(len(queries)), queries, fontsize=6)
    figure.tight_layout()
    return figure


def _tensorboard(trainer: L.Trainer) -> Any:
    logger = trainer.logger
    return getattr(logger, "experiment", None) if logger is not None else None
