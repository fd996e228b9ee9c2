"""Hugging Face `transformers` -> aiayn: a local MarianMTModel folder read as a trained aiayn model.

The inverse of to_marian.py. A Marian folder (config.json with model_type "marian", its weights,
and its tokenizer: opus-mt's source.spm, target.spm and vocab.json, or a `tokenizers` tokenizer.json;
marian_vocab.py reads either) becomes a ForInference, so that everything that reads a trained
model reads it: `aiayn translate DIR`, `aiayn evaluate DIR --src ... --ref ...`, `aiayn export`,
and `init_from: DIR` in an experiment (whose model must then be the one `marian_experiment`
writes). Marian is the paper's post-norm Transformer with concatenated sinusoids, LayerNorm eps
1e-5 and biases everywhere; what aiayn cannot hold is refused by name: separate source and target
vocabularies (target_vocab.json), an activation aiayn has not.

Token ids: aiayn's are fixed (<pad> 0, <s> 1, </s> 2, <unk> 3, then the rest); Marian's come from
its config (eos 0 and pad last in opus-mt, and the decoder starts from <pad>). The embedding rows,
the output projection's and its bias are permuted to aiayn's order, and aiayn's <s> (the decoder's
first input) gets the row of Marian's decoder start: one row more than Marian has when that is
its <pad>, and then aiayn's <pad> (a copy of that row, never a target) gets an output bias of
-1e4, so that the softmax counts Marian's pad once: log-probabilities equal Marian's. The
tokenizers' vocabulary is renumbered alike. The decode section is what the folder's generation
settings ask of generate() (marian_generation.py: beams, length limit, forbidden tokens, </s> at
the limit, renormalised scores), each applied or refused by name. Marian's tokenizer ends each source
with </s>; the model gets model.source_eos (for a tokenizer.json: where its post-processor does).

This module is imported only when a Marian folder is read, and needs `transformers`.
"""

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from aiayn.blocks import EncoderDecoder
from aiayn.builder.errors import UserError, resolved
from aiayn.builder.formats.marian_config import json_object, read_config
from aiayn.builder.formats.marian_generation import check_generation_file, marian_decode
from aiayn.builder.formats.marian_vocab import marian_tokenizers
from aiayn.builder.model.build import build_model
from aiayn.builder.model.for_inference import ForInference
from aiayn.builder.model.weights import (
    Attention,
    FeedForward,
    Layer,
    Linear,
    Norm,
    Stack,
    TransformerWeights,
    load_transformer_weights,
)
from aiayn.builder.registry import Registry
from aiayn.builder.run.inherit import first_line
from aiayn.schemas.experiment import ExperimentSpec

# the output bias of aiayn's <pad> where its row is a copy of <s>'s (Marian's pad, the decoder's
# start): exp(-1e4) is 0 in float32, and a finite value keeps a fine-tune's label-smoothed loss finite
NO_PROBABILITY = -1e4
ACTIVATIONS = {
    "relu": "relu",
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "swish": "silu",
    "silu": "silu",
}  # transformers' -> aiayn's


def load_marian(folder: str | Path, registry: Registry) -> ForInference:
    """The Marian model in `folder` as aiayn's model, experiment and tokenizer."""
    folder = Path(folder)
    try:
        from transformers import MarianConfig, MarianMTModel
        from transformers.utils import logging as hf_logging
    except ImportError:
        raise UserError(
            f"{folder} is a Hugging Face Marian model; reading it needs transformers: pip install 'aiayn[export]'"
        ) from None
    hf_logging.disable_progress_bar()  # one line per command, as the export's
    read_config(folder)  # every value aiayn reads, checked by name before transformers sees it
    try:
        config = MarianConfig.from_pretrained(folder)
    except Exception as e:  # transformers' and huggingface_hub's checks raise many kinds
        raise UserError(f"{folder}: transformers cannot read its config.json ({first_line(e)})") from None
    src_tokenizer, tgt_tokenizer, order, source_eos = marian_tokenizers(folder, config)
    experiment = marian_experiment(
        config, folder, vocab_size=len(order), source_eos=source_eos
    )  # refusals before the weights load
    hf = load_checked_weights(folder, MarianMTModel, "a Marian folder")
    experiment["decode"] = marian_decode(hf.generation_config, config, folder, tgt_tokenizer.tokens(), order)
    spec = ExperimentSpec.model_validate(experiment, context=registry.context)
    model = build_model(spec.model)
    assert isinstance(model, EncoderDecoder)
    load_transformer_weights(model, marian_weights(hf, order))
    what = "a Hugging Face Marian model"
    return ForInference(model.eval(), spec, src_tokenizer, tgt_tokenizer, folder, what, None)


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' own logging at errors only, for the call within (its load report is a warning)."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def load_checked_weights(folder: Path, model_class: Any, what: str) -> Any:
    """The folder's model of `model_class` (MarianMTModel, GPT2LMHeadModel, ...; `what` names the
    folder's kind in messages); weights that are damaged, or of another model (a tensor missing or
    of another shape, which transformers would fill at random), are refused by file."""
    files = [f.name for f in sorted(folder.glob("*.safetensors")) + sorted(folder.glob("pytorch_model*.bin"))]
    if not files:
        raise UserError(f"{folder} has no weights: {what} holds model.safetensors (or pytorch_model.bin) beside config.json")
    where = f"{folder}/{files[0]}" if len(files) == 1 else f"{folder}: its weights ({', '.join(files)})"
    check_generation_file(folder)
    _check_json_object(folder / "generation_config.json")  # transformers reads it with the weights
    _generation_settings(folder)  # and its errors are the file's, not the weights'
    try:
        with quiet_transformers():  # its load report of missing or mismatched tensors: aiayn's one line says them
            hf, info = model_class.from_pretrained(
                folder, output_loading_info=True, ignore_mismatched_sizes=True
            )  # listed, then refused
    except Exception as e:  # safetensors, torch.load and transformers each raise their own
        reason = first_line(e) if len(first_line(e)) <= 120 else first_line(e)[:117] + "..."
        raise UserError(f"{where}: transformers cannot load the weights ({reason}); is the file whole? copy it again") from None
    wrong = [f"{k} missing" for k in sorted(info.get("missing_keys", ()))]
    for item in sorted(info.get("mismatched_keys", ()), key=str):  # (name, the file's shape, config.json's)
        wrong.append(
            f"{item[0]} {tuple(item[1])} for {tuple(item[2])}"
            if isinstance(item, tuple) and len(item) == 3
            else f"{item} of another shape"
        )
    if wrong:
        shown = ", ".join(wrong[:3]) + (f" and {len(wrong) - 3} more" if len(wrong) > 3 else "")
        raise UserError(f"{where}: the weights do not fit config.json ({shown}); they belong to another model")
    return hf.eval()


def _generation_settings(folder: Path) -> None:
    """transformers' reading of the folder's generation_config.json, where there is one: what it
    refuses is named as the file's, before the weights are read with it."""
    if not (folder / "generation_config.json").is_file():
        return
    from transformers import GenerationConfig

    try:
        GenerationConfig.from_pretrained(folder)
    except Exception as e:  # transformers' checks of the settings raise several kinds
        raise UserError(
            f"{folder / 'generation_config.json'}: transformers cannot read it ({first_line(e)}); mend it, or delete it"
        ) from None


def _check_json_object(path: Path) -> None:
    """An optional JSON file of the folder, where present, is an object."""
    if path.is_file():
        json_object(path, "mend it, or delete it (aiayn decodes with its own settings)")


def marian_experiment(config: Any, folder: Path, *, vocab_size: int, source_eos: bool) -> dict[str, Any]:
    """The aiayn experiment of a MarianConfig: the paper's blocks with Marian's sizes."""
    if config.decoder_vocab_size not in (None, config.vocab_size):
        raise UserError(
            f"{folder}: separate source and target vocabularies (vocab_size {config.vocab_size}, decoder_vocab_size "
            f"{config.decoder_vocab_size}); aiayn reads Marian models with one vocabulary"
        )
    activation = ACTIVATIONS.get(config.activation_function)
    if activation is None:
        raise UserError(
            f"{folder}: activation_function {config.activation_function!r}; aiayn has {', '.join(sorted(ACTIVATIONS))}"
        )
    d = config.d_model

    def stack(side: str, layers: int, heads: int, d_ff: int, kinds: list[str]) -> dict[str, Any]:
        if d % heads:
            raise UserError(f"{folder}: {side}_attention_heads ({heads}) does not divide d_model ({d})")
        attention = {"h": heads, "d_k": d // heads, "d_v": d // heads, "attn_dropout": config.attention_dropout}
        ffn = {"type": "feed_forward", "d_ff": d_ff, "activation": activation, "activation_dropout": config.activation_dropout}
        norm = {"placement": "post", "dropout": config.dropout, "norm": {"type": "layer_norm", "eps": 1e-5}}
        return {"num_layers": layers, "add_norm": norm, "layer": [*({"type": k, **attention} for k in kinds), ffn]}

    share = "all" if config.share_encoder_decoder_embeddings else "target_output" if config.tie_word_embeddings else "none"
    embedding = {
        "vocab_size": vocab_size,
        "shared_vocab": True,
        "share": share,
        "scale": bool(config.scale_embedding),
        "output_bias": True,
    }
    encoder = stack("encoder", config.encoder_layers, config.encoder_attention_heads, config.encoder_ffn_dim, ["self_attention"])
    kinds = ["causal_self_attention", "cross_attention"]
    decoder = stack("decoder", config.decoder_layers, config.decoder_attention_heads, config.decoder_ffn_dim, kinds)
    model = {
        "d_model": d,
        "dropout": config.dropout,
        "embedding": embedding,
        "positional": {"type": "sinusoidal", "layout": "concatenated"},
        "encoder": encoder,
        "decoder": decoder,
        "source_eos": source_eos,
    }
    return {
        "name": re.sub(r"[^A-Za-z0-9._\-]+", "-", resolved(folder).name) or "marian",
        "description": f"the Hugging Face Marian model in {folder}",
        "model": model,
        "data": {"type": "files", "dir": str(folder)},
    }


def marian_weights(hf: Any, order: list[int]) -> TransformerWeights:
    """The MarianMTModel's tensors in aiayn's layout and token order."""
    rows = torch.tensor(order)
    state = {k: v.detach().to(torch.float32) for k, v in hf.state_dict().items()}
    bias = state["final_logits_bias"][0][rows].clone()
    if order[0] == order[1]:  # <pad> and <s> both Marian's pad: the softmax must count it once
        bias[0] = NO_PROBABILITY

    def linear(prefix: str) -> Linear:
        return Linear(state[f"{prefix}.weight"], state[f"{prefix}.bias"])

    def norm(prefix: str) -> Norm:
        return Norm(state[f"{prefix}.weight"], state[f"{prefix}.bias"])

    def attention(prefix: str, norm_prefix: str) -> Attention:
        q, k, v, o = (linear(f"{prefix}.{p}_proj") for p in ("q", "k", "v", "out"))
        return Attention(q=q, k=k, v=v, o=o, norm=norm(norm_prefix))

    def stack(side: str, count: int) -> Stack:
        layers = []
        for i in range(count):
            p = f"model.{side}.layers.{i}"
            cross = attention(f"{p}.encoder_attn", f"{p}.encoder_attn_layer_norm") if side == "decoder" else None
            ffn = FeedForward(linear(f"{p}.fc1"), linear(f"{p}.fc2"), norm(f"{p}.final_layer_norm"))
            layers.append(Layer(attention(f"{p}.self_attn", f"{p}.self_attn_layer_norm"), cross, ffn))
        embedding = state[f"model.{side}.embed_tokens.weight"][rows]
        return Stack(embedding=embedding, positions=state[f"model.{side}.embed_positions.weight"], layers=layers, final_norm=None)

    config = hf.config
    return TransformerWeights(
        stack("encoder", config.encoder_layers),
        stack("decoder", config.decoder_layers),
        Linear(state["lm_head.weight"][rows], bias),
    )
