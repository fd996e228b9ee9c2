"""What TensorBoard shows at each validation besides loss: BLEU, samples, attention maps."""

from typing import Any

import lightning as L
import torch
from matplotlib.figure import Figure

from aiayn.blocks import LayerContext, Sublayer, TransformerGraph
from aiayn.builder.data.spec import split_texts
from aiayn.builder.data.tokenizer import Tokenizer
from aiayn.builder.decode.metrics import Scoring, score
from aiayn.builder.decode.translate import (
    evaluating,
    output_start,
    padded,
    token_rules,
    translate_ids,
    translate_texts,
    with_source_eos,
)
from aiayn.builder.train.attributes import datamodule_of
from aiayn.builder.train.board import BLEU, Board, bleu_tag
from aiayn.builder.train.task import as_task


class ValidationTranslations(L.Callback):
    """On rank 0 after each validation: beam-search the validation subset, log sacreBLEU, a few
    translation samples as text, and every k-th time the attention maps of a probe sentence."""

    def __init__(self) -> None:
        self.validations = 0
        self.last: dict[str, Any] = {}
        self.sources: list[str] = []
        self.refs: list[str] = []
        self.n_split = 0

    @property
    def bleu_tag(self) -> str:
        return bleu_tag(len(self.sources), self.n_split)

    @property
    def label(self) -> str:
        """valid, 300 sentences / valid, first 100 of 300 sentences"""
        n = len(self.sources)
        return f"valid, {n} sentences" if n >= self.n_split else f"valid, first {n} of {self.n_split} sentences"

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        task = as_task(pl_module)
        sources, refs, _ = split_texts(task.spec, "valid")
        self.n_split = len(sources)
        first = task.spec.train.validation.bleu_max_sentences
        self.sources, self.refs = sources[:first], refs[:first]
        if isinstance(trainer.logger, Board):
            trainer.logger.start_session(task.spec, self.n_split)
            trainer.logger.log_model(task.spec, trainer.global_step)

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        task = as_task(pl_module)
        spec, data = task.spec, datamodule_of(trainer)
        settings = spec.train.validation
        self.validations += 1
        if not settings.bleu:
            return
        sources, refs = self.sources, self.refs
        hyps = translate_texts(task.model, data.src_tokenizer, data.tgt_tokenizer, sources, spec.decode)
        self.last = score(hyps, refs, Scoring.of(spec.data))
        task.log(self.bleu_tag, self.last["bleu"], rank_zero_only=True)
        task.log("valid/chrF" + self.bleu_tag.removeprefix(BLEU), self.last["chrf"], rank_zero_only=True)
        experiment = getattr(trainer.logger, "experiment", None)
        if experiment is None:
            return
        if settings.num_samples:
            rows = [f"| {s} | {r} | {h} |" for s, r, h in list(zip(sources, refs, hyps))[: settings.num_samples]]
            table = "| source | reference | translation |\n|---|---|---|\n" + "\n".join(rows)
            experiment.add_text("valid/samples", table, trainer.global_step)
        if self.maps_due(settings):
            probe = settings.probe_sentence or sources[0]
            for tag, figure in attention_figures(task.model, data.src_tokenizer, data.tgt_tokenizer, probe, spec.decode).items():
                experiment.add_figure(tag, figure, trainer.global_step)

    def maps_due(self, settings: Any) -> bool:
        """Whether this validation draws attention maps: the first, then every attention_maps_every-th."""
        every = settings.attention_maps_every
        return bool(every) and (self.validations - 1) % every == 0


class ValidationSamples(ValidationTranslations):
    """A language model's validation: on rank 0, a few continuations of the starts of validation
    sentences (their first three words, greedy) as text, where a translation model's samples go."""

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        task = as_task(pl_module)
        settings, data = task.spec.train.validation, datamodule_of(trainer)
        self.validations += 1
        experiment = getattr(trainer.logger, "experiment", None)
        if experiment is None:
            return
        text = self.sources  # a language model's split: its side's sentences, as both (split_texts)
        if self.maps_due(settings):
            probe = settings.probe_sentence or text[0]
            for tag, figure in text_attention_figures(task.model, data.tgt_tokenizer, probe).items():
                experiment.add_figure(tag, figure, trainer.global_step)
        if not settings.num_samples:
            return
        from aiayn.builder.decode.generate import generate_ids
        from aiayn.builder.decode.strategy import Greedy

        starts = [" ".join(line.split()[:3]) for line in text[: settings.num_samples]]
        prompts = data.tgt_tokenizer.encode_batch(starts)
        with evaluating(task.model):
            found = generate_ids(task.model, prompts, max_new_tokens=40, eos_id=data.tgt_tokenizer.eos_id, strategy=Greedy())
        texts = [data.tgt_tokenizer.decode([*p, *c]) for p, c in zip(prompts, found)]
        rows = [f"| {s} | {t} |" for s, t in zip(starts, texts)]
        experiment.add_text(
            "valid/samples", "| prompt | continuation (greedy) |\n|---|---|\n" + "\n".join(rows), trainer.global_step
        )


def attention_figures(
    model: TransformerGraph, src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer, sentence: str, decode: Any
) -> dict[str, Figure]:
    """One figure per sub-layer with attention maps (a panel per head) for the model's own
    translation of `sentence`, teacher-forced to read out the weights. Tags name the stack, the
    layer and the block's `map_name`: valid/attention/decoder.layer0.cross. A decoder-only model's
    maps are of its one sequence, `<s> x <sep>` and its translation."""
    src_ids = src_tokenizer.encode(sentence)
    start = output_start(model, tgt_tokenizer)
    [hyp] = translate_ids(
        model, [src_ids], decode, bos_id=start, eos_id=tgt_tokenizer.eos_id, rules=token_rules(decode, tgt_tokenizer)
    )
    src_ids = list(with_source_eos(model, [src_ids])[0])  # the maps show what the encoder read
    return _figures(model, src_tokenizer, tgt_tokenizer, src_ids, [start, *hyp])


def text_attention_figures(model: TransformerGraph, tokenizer: Tokenizer, text: str) -> dict[str, Figure]:
    """A language model's maps of `<s> text`, one figure per sub-layer with attention maps."""
    return _figures(model, tokenizer, tokenizer, [], [tokenizer.bos_id, *tokenizer.encode(text)])


def _figures(
    model: TransformerGraph, src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer, src_ids: list[int], tgt_in: list[int]
) -> dict[str, Figure]:
    src_tokens = [src_tokenizer.id_to_token(i) for i in src_ids]
    tgt_tokens = [tgt_tokenizer.id_to_token(i) for i in tgt_in]
    figures = {}
    for (stack, i, name), (w, reads_memory) in attention_weights(model, src_ids, tgt_in).items():
        queries = src_tokens if stack == "encoder" else model.decoder_queries(src_tokens, tgt_tokens)
        keys = src_tokens if stack == "encoder" or reads_memory else queries
        figures[f"valid/attention/{stack}.layer{i}.{name}"] = _heads_figure(w[0].float().cpu(), queries, keys)
    return figures


def attention_weights(
    model: TransformerGraph, src_ids: list[int], tgt_in: list[int]
) -> dict[tuple[str, int, str], tuple[torch.Tensor, bool]]:
    """{(stack, layer index, map name): (weights (1, heads, T, S), whether its keys are the
    source)} of one teacher-forced pass, for every sub-layer that has attention maps."""
    device = next(model.parameters()).device
    found: dict[tuple[str, int, str], tuple[torch.Tensor, bool]] = {}

    def recorder(key: tuple[str, int, str]) -> Any:
        def hook(module: Sublayer, args: tuple[torch.Tensor, LayerContext], output: Any) -> None:
            found[key] = module.attention_weights(*args), module.reads_memory

        return hook

    handles = [
        addnorm.sublayer.register_forward_hook(recorder((name, i, addnorm.sublayer.map_name)))
        for name, stack in model.stacks().items()
        for i, layer in enumerate(stack.layers)
        for addnorm in layer.sublayers  # type: ignore[union-attr]
        if getattr(addnorm.sublayer, "attention_maps", False)
    ]
    try:
        with evaluating(model):
            model(padded([src_ids], model.pad_id).to(device), padded([tgt_in], model.pad_id).to(device))
    finally:
        for handle in handles:
            handle.remove()
    return found


def _heads_figure(weights: torch.Tensor, queries: list[str], keys: list[str]) -> Figure:
    """Panels of (queries x keys) weights, a panel per head, four to a row; the query tokens
    label the first panel of a row. A fixed layout: matplotlib's constrained layout took over
    half of a validation of the demo (1.2 s a figure on one core, against 0.45 s)."""
    h = weights.size(0)
    cols = min(h, 4)
    rows = (h + cols - 1) // cols
    figure = Figure(figsize=(3.2 * cols + 0.6, 3.2 * rows))
    axes = figure.subplots(rows, cols, squeeze=False)
    for head, ax in enumerate(axes.flat):
        if head >= h:
            ax.axis("off")
            continue
        image = ax.imshow(weights[head].numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
        ax.set_title(f"head {head}", fontsize=8)
        ax.set_xticks(range(len(keys)), keys, rotation=90, fontsize=6)
        ax.set_yticks(range(len(queries)), queries if head % cols == 0 else [], fontsize=6)
    figure.subplots_adjust(
        left=0.7 / figure.get_figwidth(), right=0.9, bottom=0.7 / figure.get_figheight(), top=0.92, wspace=0.12, hspace=0.35
    )
    figure.colorbar(image, ax=axes, shrink=0.8, label="attention weight")
    return figure
