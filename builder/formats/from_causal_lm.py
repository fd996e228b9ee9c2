"""Hugging Face `transformers` -> aiayn: a local GPT-2 (GPT2LMHeadModel) or Llama
(LlamaForCausalLM) folder read as a trained aiayn language model, the inverse of
formats/to_causal_lm.py, so that every verb that reads a trained model reads it (`aiayn show`,
`generate`, `score --text`, `evaluate --ref`, `serve`) and `init_from: FOLDER` starts a run from it:
fine-tuned as it is, or a variant warm-started from its tensors.

GPT-2's settings become learned positions, pre-norm LayerNorm with a final one, biased projections,
its activation (gelu_new is GELU's tanh form), the embedding unscaled and tied to the output (or
not: tie_word_embeddings false); Llama's become no absolute positions, rotary on every dim (its
rope_theta), pre-norm RMSNorm with a final one, SwiGLU, its K/V heads, its biases. What aiayn cannot
express is refused by name, with its value: rope scaling, a head_dim other than hidden_size /
heads, an activation aiayn has not, GPT-2's unscaled or layer-scaled attention, cross-attention.

The tokenizer is the folder's tokenizer.json. aiayn's ids are fixed (<pad> 0, <s> 1, </s> 2, <unk>
3, then the rest): the folder's pad, bos and eos (config.json) and its tokenizer's unknown token
are moved there, their rows with them, and the tokenizer renumbered alike (the specials take
aiayn's names). A special the folder lacks gets a row of its own that the output never predicts
(a bias of -1e4 on it: exp(-1e4) is 0 in float32, so every probability is the folder's): GPT-2
small's one special, <|endoftext|>, is its bos and its eos, and it has no pad and no unknown
token, so aiayn's </s> is <|endoftext|>, aiayn's <s> reads its row and is never predicted, and
<pad> and <unk> are new rows; a Llama folder without a pad gets a <pad> row. Such a model has an
output bias, which GPT-2's and Llama's configs cannot hold: it reads, fine-tunes, scores and
serves, and its export back is refused by name. Spare rows (a vocabulary padded to a round
size) stay, as special tokens that decoding skips.

This module is imported only when such a folder is read, and needs `transformers`.
"""

import json
import re
from pathlib import Path
from typing import Any, NamedTuple

import torch
from pydantic import ValidationError
from tokenizers import Tokenizer as HFTokenizer

from aiayn.builder.data.bpe import FastTokenizer
from aiayn.builder.data.tokenizer import BOS, EOS, PAD, UNK
from aiayn.builder.errors import UserError, resolved
from aiayn.builder.formats.from_marian import load_checked_weights
from aiayn.builder.formats.marian_config import json_object
from aiayn.builder.model.build import build_model
from aiayn.builder.model.for_inference import ForInference
from aiayn.builder.registry import Registry
from aiayn.builder.run.inherit import first_line
from aiayn.builder.run.validation import format_validation_error
from aiayn.schemas.experiment import ExperimentSpec

FAMILIES = {"gpt2": ("GPT-2", "GPT2Config", "GPT2LMHeadModel"), "llama": ("Llama", "LlamaConfig", "LlamaForCausalLM")}
NEVER = -1e4  # the output bias of a row the folder lacks: exp(-1e4) is 0 in float32, and a finite value keeps a loss finite
GPT2_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}


def load_causal_lm(folder: str | Path, registry: Registry) -> ForInference:
    """The GPT-2 or Llama model in `folder` as aiayn's model, experiment and tokenizer."""
    folder = Path(folder)
    kind = json_object(folder / "config.json", "a Hugging Face model folder's config.json is a JSON object").get("model_type")
    name, config_name, model_name = FAMILIES[str(kind)]
    try:
        import transformers
    except ImportError:
        raise UserError(
            f"{folder} is a Hugging Face {name} model; reading it needs transformers: pip install 'aiayn[export]'"
        ) from None
    transformers.utils.logging.disable_progress_bar()
    try:
        config = getattr(transformers, config_name).from_pretrained(folder)
    except Exception as e:  # transformers' and huggingface_hub's checks raise many kinds
        raise UserError(f"{folder}: transformers cannot read its config.json ({first_line(e)})") from None
    model_section = gpt2_model(config, folder) if kind == "gpt2" else llama_model(config, folder)
    check_sizes(folder, config, model_section)  # before the tokenizer's rows and the model are made of them
    vocabulary = causal_tokenizer(folder, config)
    model_section["embedding"].update(vocab_size=len(vocabulary.order), output_bias=bool(vocabulary.masked))
    data: dict[str, Any] = {"type": "files", "dir": str(folder), "side": "en"}
    if kind == "gpt2":  # sentences no longer than its positions leave room for <s>
        data["max_len"] = min(256, config.n_positions - 1)
    experiment = {
        "name": re.sub(r"[^A-Za-z0-9._\-]+", "-", resolved(folder).name) or str(kind),
        "description": f"the Hugging Face {name} model in {folder}",
        "model": model_section,
        "data": data,
    }
    try:
        spec = ExperimentSpec.model_validate(experiment, context=registry.context)
    except ValidationError as e:  # a value transformers takes that no model is (n_embd 0, a dropout of 1.5, ...)
        line = format_validation_error(e, registry=registry)[0]
        raise UserError(f"{folder / 'config.json'} describes no model aiayn can build: {line}") from None
    hf = load_checked_weights(folder, getattr(transformers, model_name), f"a {name} folder")
    model = build_model(spec.model)
    (copy_gpt2 if kind == "gpt2" else copy_llama)(model, hf, vocabulary)
    tokenizer = vocabulary.tokenizer
    return ForInference(model.eval(), spec, tokenizer, tokenizer, folder, f"a Hugging Face {name} model", None)


def _refuse(folder: Path, field: str, value: Any, why: str) -> UserError:
    return UserError(f"{folder / 'config.json'}: {field} {value!r}: {why}")


def _count(value: Any) -> bool:
    """A whole number of one or more (a head count, a layer count)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def check_sizes(folder: Path, config: Any, model_section: dict[str, Any]) -> None:
    """config.json's layers and vocabulary rows against the tensors its safetensors files hold (their headers
    only): a count that is not the weights' is refused before anything is built of it (a billion layers, ten
    billion rows)."""
    shapes: dict[str, list[int]] = {}
    for path in sorted(folder.glob("*.safetensors")):
        try:
            with path.open("rb") as f:
                size = int.from_bytes(f.read(8), "little")
                header = json.loads(f.read(size)) if 0 < size <= 100_000_000 else {}
        except (OSError, ValueError):
            return  # the weights' own reading names what is wrong with the file
        shapes.update({k: v.get("shape", []) for k, v in header.items() if isinstance(v, dict)})
    if not shapes:
        return  # pytorch_model.bin: the weights' reading compares them
    layers = {int(m.group(1)) for k in shapes if (m := re.search(r"\.(?:h|layers)\.(\d+)\.", k))}
    stored = max(layers) + 1 if layers else 0
    asked = model_section["decoder"]["num_layers"]
    name = "n_layer" if "n_layer" in config.to_dict() else "num_hidden_layers"
    if asked != stored:
        raise _refuse(folder, name, asked, f"the weights hold {stored} layers")
    rows = next((shape[0] for k, shape in shapes.items() if k.endswith(("wte.weight", "embed_tokens.weight")) and shape), None)
    if rows is not None and config.vocab_size != rows:
        raise _refuse(folder, "vocab_size", config.vocab_size, f"the weights' embedding has {rows} rows")


def gpt2_model(config: Any, folder: Path) -> dict[str, Any]:
    """The model section of a GPT2Config, or a refusal naming the field aiayn cannot express."""
    refusals = [
        ("activation_function", config.activation_function, config.activation_function not in GPT2_ACTIVATIONS,
         f"aiayn has {', '.join(sorted(GPT2_ACTIVATIONS))}"),
        ("scale_attn_weights", config.scale_attn_weights, not config.scale_attn_weights, "aiayn divides the scores by sqrt(d_k)"),
        ("scale_attn_by_inverse_layer_idx", config.scale_attn_by_inverse_layer_idx, config.scale_attn_by_inverse_layer_idx,
         "aiayn's attention scales every layer alike"),
        ("add_cross_attention", config.add_cross_attention, config.add_cross_attention, "a language model attends to itself alone"),
        ("n_head", config.n_head, not _count(config.n_head) or config.n_embd % config.n_head != 0,
         f"a count of heads that divides n_embd ({config.n_embd})"),
    ]  # fmt: skip
    for field, value, bad, why in refusals:
        if bad:
            raise _refuse(folder, field, value, why)
    d_k = config.n_embd // config.n_head
    norm = {"type": "layer_norm", "eps": config.layer_norm_epsilon}
    attention = {"type": "causal_self_attention", "h": config.n_head, "d_k": d_k, "d_v": d_k, "attn_dropout": config.attn_pdrop}
    ffn = {
        "type": "feed_forward",
        "d_ff": config.n_inner or 4 * config.n_embd,
        "activation": GPT2_ACTIVATIONS[config.activation_function],
    }
    return {
        "d_model": config.n_embd,
        "dropout": config.embd_pdrop,
        "embedding": {"share": "target_output" if config.tie_word_embeddings else "none", "scale": False},
        "positional": {"type": "learned", "max_len": config.n_positions},
        "decoder": {
            "num_layers": config.n_layer,
            "add_norm": {"placement": "pre", "dropout": config.resid_pdrop, "norm": norm},
            "layer": [attention, ffn],
        },
    }


def llama_model(config: Any, folder: Path) -> dict[str, Any]:
    """The model section of a LlamaConfig, or a refusal naming the field aiayn cannot express."""
    rope = dict(getattr(config, "rope_parameters", None) or {})
    heads, d = config.num_attention_heads, config.hidden_size
    if not _count(heads) or not _count(d) or d % heads:
        raise _refuse(folder, "num_attention_heads", heads, f"a count of heads that divides hidden_size ({d})")
    theta = rope.get("rope_theta", 10000.0)
    if not isinstance(theta, (int, float)) or isinstance(theta, bool) or not 0 < theta < float("inf"):
        raise _refuse(folder, "rope_parameters.rope_theta", theta, "the rotary base is a number above 0")
    head_dim = getattr(config, "head_dim", None) or d // heads
    refusals = [
        ("hidden_act", config.hidden_act, config.hidden_act != "silu", "aiayn's Llama feed-forward is SwiGLU (silu)"),
        ("rope_parameters.rope_type (rope_scaling)", rope.get("rope_type"), rope.get("rope_type", "default") != "default",
         "aiayn's rotary has no scaling (rope_type default only); fine-tune at the context the model was trained for"),
        ("head_dim", head_dim, head_dim * heads != d, f"aiayn's heads split hidden_size ({d}) in {heads}: head_dim {d // heads}"),
        ("num_attention_heads", heads, d % heads != 0, f"it does not divide hidden_size ({d})"),
    ]  # fmt: skip
    for field, value, bad, why in refusals:
        if bad:
            raise _refuse(folder, field, value, why)
    kv = config.num_key_value_heads or heads
    attention = {
        "type": "causal_self_attention",
        "h": heads,
        "d_k": d // heads,
        "d_v": d // heads,
        "bias": bool(config.attention_bias),
        "rotary": {"base": float(rope.get("rope_theta", 10000.0))},
        "attn_dropout": float(config.attention_dropout),
    }
    if kv != heads:
        attention["kv_heads"] = kv
    ffn = {"type": "gated_feed_forward", "d_ff": config.intermediate_size, "activation": "silu", "bias": bool(config.mlp_bias)}
    norm = {"type": "rms_norm", "eps": config.rms_norm_eps}
    return {
        "d_model": d,
        "dropout": 0.0,
        "embedding": {"share": "target_output" if config.tie_word_embeddings else "none", "scale": False},
        "positional": "none",
        "decoder": {
            "num_layers": config.num_hidden_layers,
            "add_norm": {"placement": "pre", "dropout": 0.0, "norm": norm},
            "layer": [attention, ffn],
        },
    }


class Vocabulary(NamedTuple):
    """The folder's vocabulary in aiayn's ids: `order[i]`, the folder's row of aiayn's id i (None: a
    row the folder lacks, zeros); `masked`, aiayn's ids the folder has no token for (or a second
    copy of one), which the output never predicts (a bias of -1e4)."""

    tokenizer: FastTokenizer
    order: list[int | None]
    masked: list[int]


def causal_tokenizer(folder: Path, config: Any) -> Vocabulary:
    """The folder's tokenizer.json renumbered to aiayn's ids, as `Vocabulary` says."""
    path = folder / "tokenizer.json"
    if path.is_symlink():
        resolved(path)  # a link that leads back to itself is named as one
    if not path.is_file():
        extra = " (tokenizer.model alone is the slow tokenizer's: save the fast one, AutoTokenizer(...).save_pretrained)"
        raise UserError(f"{folder} has no tokenizer.json{extra if (folder / 'tokenizer.model').is_file() else ''}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        hf = HFTokenizer.from_str(json.dumps(data))
    except Exception as e:  # the Rust side raises a bare Exception on a bad file
        raise UserError(f"{path} is not a valid tokenizer file ({first_line(e) or type(e).__name__})") from None
    size = hf.get_vocab_size(with_added_tokens=True)
    if size > config.vocab_size:
        raise UserError(
            f"{path} has {size} tokens, more than config.json's vocab_size ({config.vocab_size}) gives the model rows for: "
            "the two files belong to different models"
        )
    order, masked = _specials(folder, config, _unknown(data, hf))
    used = {t for i, t in enumerate(order) if t is not None and i not in masked}
    order += [i for i in range(config.vocab_size) if i not in used]
    return Vocabulary(
        FastTokenizer(HFTokenizer.from_str(json.dumps(_renumbered(data, order, masked, hf))), source=str(path)), order, masked
    )


def _unknown(data: dict[str, Any], hf: HFTokenizer) -> int | None:
    """The id of the tokenizer's unknown token, where it has one (a byte-level BPE has none)."""
    model = data.get("model") or {}
    token = model.get("unk_token") if model.get("unk_id") is None else hf.id_to_token(model["unk_id"])
    return hf.token_to_id(token) if token else hf.token_to_id(UNK)


def _specials(folder: Path, config: Any, unk: int | None) -> tuple[list[int | None], list[int]]:
    """The folder's rows of aiayn's <pad>, <s>, </s> and <unk>, and those of them it lacks (masked):
    no pad (or a pad that is another special), bos the same token as eos (GPT-2's <|endoftext|>: aiayn's
    <s> reads its row and is never predicted), no unknown token."""
    for field in ("bos_token_id", "eos_token_id"):
        value = getattr(config, field)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < config.vocab_size:
            raise UserError(
                f"{folder / 'config.json'}: {field} {value!r}: aiayn needs one id of its vocabulary (0 to {config.vocab_size - 1})"
            )
    bos, eos, pad = config.bos_token_id, config.eos_token_id, config.pad_token_id
    real_pad = pad if isinstance(pad, int) and 0 <= pad < config.vocab_size and pad not in (bos, eos, unk) else None
    real_unk = unk if unk is not None and unk not in (bos, eos) else None
    order: list[int | None] = [real_pad, bos, eos, real_unk]
    masked = [i for i, missing in ((0, real_pad is None), (1, bos == eos), (3, real_unk is None)) if missing]
    return order, masked


def _renumbered(data: dict[str, Any], order: list[int | None], masked: list[int], hf: HFTokenizer) -> dict[str, Any]:
    """tokenizer.json with aiayn's ids (token order[i] gets id i) and aiayn's names for the specials."""
    new_id = {theirs: ours for ours, theirs in enumerate(order) if theirs is not None and ours not in masked}
    tokens = [PAD, BOS, EOS, UNK] + [hf.id_to_token(theirs) or f"<row {theirs}>" for theirs in order[4:] if theirs is not None]
    model = data["model"]
    if isinstance(model.get("vocab"), dict):  # BPE, WordLevel, WordPiece: token -> id
        model["vocab"] = {token: i for i, token in enumerate(tokens)}
        if model.get("unk_token") is not None:
            model["unk_token"] = UNK
    elif isinstance(model.get("vocab"), list):  # Unigram: [token, score] by id
        scores = [score for _, score in model["vocab"]]
        model["vocab"] = [[token, scores[t] if t is not None and t < len(scores) else 0.0] for token, t in zip(tokens, order)]
        if model.get("unk_id") is not None:
            model["unk_id"] = 3
    else:
        raise UserError(f"tokenizer.json's model ({model.get('type')}) has no vocabulary aiayn can renumber")
    special = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
    kept = [
        {**t, "id": new_id[t["id"]], "content": tokens[new_id[t["id"]]]}
        for t in data.get("added_tokens", [])
        if t["id"] in new_id
    ]
    # aiayn's specials, and a row the tokenizer has no token for (a vocabulary padded to a round size): special tokens, which decoding skips
    extra = [{"id": i, "content": token, **special} for i, token in enumerate(tokens) if i < 4 or token.startswith("<row ")]
    taken = {t["id"] for t in kept}
    data["added_tokens"] = sorted(kept + [t for t in extra if t["id"] not in taken], key=lambda t: t["id"])
    data["post_processor"] = None  # aiayn puts <s> before the text itself
    return data


def _rows(weight: torch.Tensor, order: list[int | None]) -> torch.Tensor:
    """The rows of `weight` in aiayn's order; zeros where the folder has none."""
    out = weight.new_zeros(len(order), weight.shape[1])
    kept = [i for i, t in enumerate(order) if t is not None]
    out[kept] = weight[[order[i] for i in kept]]
    return out


@torch.no_grad()
def copy_output(model: Any, hf: Any, vocabulary: Vocabulary) -> None:
    """The untied output's rows, and the bias that keeps the output off the rows the folder lacks."""
    if not hf.config.tie_word_embeddings:
        model.generator.weight.copy_(_rows(hf.lm_head.weight, vocabulary.order))
    if vocabulary.masked:
        bias = torch.zeros(len(vocabulary.order))
        bias[vocabulary.masked] = NEVER
        model.generator.bias.copy_(bias)


# (aiayn's tensor in a decoder layer, GPT-2's in a block, transposed: GPT-2's Conv1D keeps (in, out)):
# the import reads them one way, the export (formats/to_causal_lm.py) the other
GPT2_LAYER = (
    ("sublayers.0.norm.weight", "ln_1.weight", False), ("sublayers.0.norm.bias", "ln_1.bias", False),
    ("sublayers.0.sublayer.w_qkv.weight", "attn.c_attn.weight", True), ("sublayers.0.sublayer.w_qkv.bias", "attn.c_attn.bias", False),
    ("sublayers.0.sublayer.w_o.weight", "attn.c_proj.weight", True), ("sublayers.0.sublayer.w_o.bias", "attn.c_proj.bias", False),
    ("sublayers.1.norm.weight", "ln_2.weight", False), ("sublayers.1.norm.bias", "ln_2.bias", False),
    ("sublayers.1.sublayer.w_1.weight", "mlp.c_fc.weight", True), ("sublayers.1.sublayer.w_1.bias", "mlp.c_fc.bias", False),
    ("sublayers.1.sublayer.w_2.weight", "mlp.c_proj.weight", True), ("sublayers.1.sublayer.w_2.bias", "mlp.c_proj.bias", False),
)  # fmt: skip


@torch.no_grad()
def copy_gpt2_layers(ours: Any, theirs: Any, *, into_ours: bool) -> None:
    """GPT2_LAYER's tensors from GPT-2's blocks into aiayn's decoder layers (`into_ours`), or back;
    the final LayerNorm too."""
    for layer, block in zip(ours.decoder.layers, theirs.h, strict=True):
        for mine, gpt2, transposed in GPT2_LAYER:
            a, b = layer.get_parameter(mine), block.get_parameter(gpt2)
            source, target = (b, a) if into_ours else (a, b)
            target.copy_(source.T if transposed else source)
    for name in ("weight", "bias"):
        a, b = getattr(ours.decoder.final_norm, name), getattr(theirs.ln_f, name)
        (a if into_ours else b).copy_(b if into_ours else a)


@torch.no_grad()
def copy_gpt2(model: Any, hf: Any, vocabulary: Vocabulary) -> None:
    """A GPT2LMHeadModel's tensors into aiayn's decoder-only model, rows in aiayn's token order."""
    t = hf.transformer
    model.tgt_embed.token.table.weight.copy_(_rows(t.wte.weight, vocabulary.order))
    model.tgt_embed.positional.table.weight.copy_(t.wpe.weight)
    copy_gpt2_layers(model, t, into_ours=True)
    copy_output(model, hf, vocabulary)


@torch.no_grad()
def copy_llama(model: Any, hf: Any, vocabulary: Vocabulary) -> None:
    """A LlamaForCausalLM's tensors into aiayn's decoder-only model, rows in aiayn's token order."""
    model.tgt_embed.token.table.weight.copy_(_rows(hf.model.embed_tokens.weight, vocabulary.order))
    for ours, theirs in zip(model.decoder.layers, hf.model.layers, strict=True):
        a, f = ours.sublayers
        a.norm.weight.copy_(theirs.input_layernorm.weight)
        views = a.sublayer.projections()
        for name, proj in (
            ("q", theirs.self_attn.q_proj),
            ("k", theirs.self_attn.k_proj),
            ("v", theirs.self_attn.v_proj),
            ("o", theirs.self_attn.o_proj),
        ):
            weight, bias = views[name]
            weight.copy_(proj.weight)
            if bias is not None:
                bias.copy_(proj.bias)
        f.norm.weight.copy_(theirs.post_attention_layernorm.weight)
        f.sublayer.w_1.weight.copy_(torch.cat([theirs.mlp.gate_proj.weight, theirs.mlp.up_proj.weight]))
        f.sublayer.w_2.weight.copy_(theirs.mlp.down_proj.weight)
        if f.sublayer.w_1.bias is not None:
            f.sublayer.w_1.bias.copy_(torch.cat([theirs.mlp.gate_proj.bias, theirs.mlp.up_proj.bias]))
            f.sublayer.w_2.bias.copy_(theirs.mlp.down_proj.bias)
    model.decoder.final_norm.weight.copy_(hf.model.norm.weight)
    copy_output(model, hf, vocabulary)
