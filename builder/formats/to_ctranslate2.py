"""aiayn -> CTranslate2, through its Python converter API (a `Converter` whose `_load` returns a
filled `TransformerSpec`), as its own fairseq and OpenNMT-py converters do.

What maps: post-norm (`pre_norm=False`) or pre-norm with or without a final norm, LayerNorm or
RMSNorm (`rms_norm`); ReLU, GELU (erf) and SiLU, gated or not (`ffn_glu`: SwiGLU, GEGLU, ReGLU);
grouped-query attention (`num_heads_kv`, one per stack); rotary embeddings (`rotary_dim`,
transformers' non-interleaved pairs, `rotary_base`; without absolute positions, as CTranslate2
adds none beside them); no absolute positions (a table of zeros where the spec wants one); d_k = d_v != d_model / h through `head_dim`; biases or none; shared, tied or
separate embeddings (separate vocabularies too); embeddings scaled by sqrt(d_model) or not. Positions
are given as the model's own table (`position_encodings.encodings`): interleaved or concatenated
sinusoids (`position_rows` rows; CTranslate2's built-in sinusoids use tensor2tensor's frequencies,
not the paper's) or the learned table. The source gets no BOS/EOS and the decoder starts from <s>,
as aiayn frames them. This module is imported only when `ctranslate2` is installed.
"""

from pathlib import Path

import numpy as np
import torch
from ctranslate2.converters.converter import Converter
from ctranslate2.specs import common_spec, transformer_spec

from aiayn.blocks import EncoderDecoder
from aiayn.builder.data.spm import SentencePieceTokenizer
from aiayn.builder.data.tokenizer import BOS, EOS, UNK, Tokenizer
from aiayn.builder.errors import UserError
from aiayn.builder.formats.limits import stack_spec_heads
from aiayn.builder.model.for_inference import ForInference
from aiayn.builder.model.weights import (
    Attention,
    FeedForward,
    Linear,
    Norm,
    Stack,
    transformer_weights,
)
from aiayn.schemas.model import ModelSpec
from aiayn.schemas.stacks import StackSpec

ACTIVATIONS = {
    "relu": common_spec.Activation.RELU, "gelu": common_spec.Activation.GELU, "gelu_tanh": common_spec.Activation.GELUTanh,
    "silu": common_spec.Activation.SWISH,
}  # fmt: skip


class AiaynConverter(Converter):
    """CTranslate2's converter for a model loaded by `load_for_inference`."""

    def __init__(self, loaded: ForInference, position_rows: int) -> None:
        self._loaded, self._rows = loaded, position_rows

    def _load(self) -> transformer_spec.TransformerSpec:
        spec, model = self._loaded.spec.model, self._loaded.model
        assert isinstance(model, EncoderDecoder) and spec.encoder is not None  # check_ctranslate2 refused a decoder-only model
        weights = transformer_weights(model, self._rows)
        ct2 = transformer_spec.TransformerSpec(_encoder_spec(spec, weights.encoder), _decoder_spec(spec, weights.decoder))
        _linear(ct2.decoder.projection, weights.output)
        ct2.config.layer_norm_epsilon = getattr(spec.encoder.add_norm.norm, "eps")  # LayerNorm's or RMSNorm's (check_ctranslate2)
        ct2.config.decoder_start_token = BOS  # aiayn's decoder starts from <s>; the source has </s> only with model.source_eos
        ct2.config.bos_token, ct2.config.eos_token, ct2.config.unk_token = BOS, EOS, UNK
        ct2.config.add_source_bos, ct2.config.add_source_eos = False, spec.source_eos
        ct2.register_source_vocabulary(vocabulary(self._loaded.src_tokenizer, spec.embedding.vocab_size))
        ct2.register_target_vocabulary(vocabulary(self._loaded.tgt_tokenizer, spec.embedding.vocab_size))
        return ct2


def write(loaded: ForInference, folder: Path, *, position_rows: int, quantization: str | None) -> None:
    """The CTranslate2 model (model.bin, config.json, vocabularies) in `folder` (which it replaces), and
    aiayn's tokenizer file(s) beside it."""
    try:
        AiaynConverter(loaded, position_rows).convert(str(folder), quantization=quantization, force=True)
    except ValueError as e:  # the spec's own validation, or a quantization it does not take
        raise UserError(f"CTranslate2 refused the converted model: {e}") from None
    if loaded.src_tokenizer is loaded.tgt_tokenizer:
        loaded.src_tokenizer.save(folder / "tokenizer.json")
    else:
        loaded.src_tokenizer.save(folder / "tokenizer.src.json")
        loaded.tgt_tokenizer.save(folder / "tokenizer.tgt.json")
    if isinstance(loaded.src_tokenizer, SentencePieceTokenizer) and isinstance(loaded.tgt_tokenizer, SentencePieceTokenizer):
        # the models themselves, for `sentencepiece` users: ids are the pieces' places in the vocabularies
        for name, tokenizer in (("source.spm", loaded.src_tokenizer), ("target.spm", loaded.tgt_tokenizer)):
            (folder / name).write_bytes(tokenizer.model)


def vocabulary(tokenizer: Tokenizer, size: int) -> list[str]:
    """The tokens in id order, padded with never-seen placeholders up to the embedding's `size` rows
    (so the softmax is over the same rows as aiayn's)."""
    tokens = tokenizer.tokens()
    return tokens + [f"<aiayn-unused-{i}>" for i in range(len(tokens), size)]


def _stack_options(stack_spec: StackSpec, stack: Stack, d_model: int) -> tuple[int, int, dict]:
    """(layers, heads, keyword options) of CTranslate2's encoder or decoder spec for one of our stacks
    (limits.py let through one kv_heads and one rotary per stack)."""
    h, d_k = stack_spec_heads(stack_spec)
    *attention, ffn = stack_spec.layer
    kv, rotary = attention[0].kv_heads, attention[0].rotary  # type: ignore[attr-defined]
    options = dict(
        pre_norm=stack_spec.add_norm.placement == "pre",
        no_final_norm=stack.final_norm is None,
        activation=ACTIVATIONS[ffn.activation],  # type: ignore[attr-defined]
        head_dim=None if h * d_k == d_model else d_k,
        ffn_glu=ffn.export_as == "gated_feed_forward",
        rms_norm=stack_spec.add_norm.norm.export_as == "rms_norm",
        num_heads_kv=None if kv in (None, h) else kv,
    )
    if rotary is not None:  # transformers' rotate_half: the pairs are (i, i + dims/2), not interleaved
        options.update(rotary_dim=rotary.dims(d_k), rotary_interleave=False, rotary_base=rotary.base)
    return stack_spec.num_layers, h, options


def _encoder_spec(spec: ModelSpec, stack: Stack) -> transformer_spec.TransformerEncoderSpec:
    assert spec.encoder is not None
    num_layers, h, options = _stack_options(spec.encoder, stack, spec.d_model)
    enc = transformer_spec.TransformerEncoderSpec(num_layers, h, **options)
    _inputs(enc, spec, stack, enc.embeddings[0])
    for layer_spec, layer in zip(enc.layer, stack.layers):
        _attention(layer_spec.self_attention, layer.self_attention, fused="qkv")
        _ffn(layer_spec.ffn, layer.ffn)
    return enc


def _decoder_spec(spec: ModelSpec, stack: Stack) -> transformer_spec.TransformerDecoderSpec:
    num_layers, h, options = _stack_options(spec.stack("decoder"), stack, spec.d_model)
    dec = transformer_spec.TransformerDecoderSpec(num_layers, h, **options)
    _inputs(dec, spec, stack, dec.embeddings)
    for layer_spec, layer in zip(dec.layer, stack.layers):
        _attention(layer_spec.self_attention, layer.self_attention, fused="qkv")
        assert layer.cross_attention is not None  # a decoder layer's
        _attention(layer_spec.attention, layer.cross_attention, fused="kv")
        _ffn(layer_spec.ffn, layer.ffn)
    return dec


def _inputs(side, spec: ModelSpec, stack: Stack, embeddings: common_spec.EmbeddingsSpec) -> None:
    embeddings.weight = _np(stack.embedding)
    side.scale_embeddings = spec.embedding.scale
    if hasattr(side, "position_encodings"):  # a decoder with rotary has none (limits.py: positional none)
        side.position_encodings.encodings = _np(stack.positions)
    if stack.final_norm is not None:
        _norm(side.layer_norm, stack.final_norm)


def _attention(spec, attention: Attention, *, fused: str) -> None:
    """Self-attention: linear[0] is [Q; K; V]; cross-attention: linear[0] is Q, linear[1] [K; V]."""
    if fused == "qkv":
        _linear(spec.linear[0], _cat(attention.q, attention.k, attention.v))
    else:
        _linear(spec.linear[0], attention.q)
        _linear(spec.linear[1], _cat(attention.k, attention.v))
    _linear(spec.linear[-1], attention.o)
    _norm(spec.layer_norm, attention.norm)


def _ffn(spec, ffn: FeedForward) -> None:
    _linear(spec.linear_0, ffn.w_1)  # activated
    if ffn.w_up is not None:
        _linear(spec.linear_0_noact, ffn.w_up)
    _linear(spec.linear_1, ffn.w_2)
    _norm(spec.layer_norm, ffn.norm)


def _cat(*parts: Linear) -> Linear:
    biases = [p.bias for p in parts if p.bias is not None]
    bias = torch.cat(biases) if len(biases) == len(parts) else None
    return Linear(torch.cat([p.weight for p in parts]), bias)


def _linear(spec: common_spec.LinearSpec, lin: Linear) -> None:
    spec.weight = _np(lin.weight)
    if lin.bias is not None:
        spec.bias = _np(lin.bias)


def _norm(spec: common_spec.LayerNormSpec, norm: Norm) -> None:
    spec.gamma = _np(norm.gamma)
    if norm.beta is not None:  # an RMSNorm has none
        spec.beta = _np(norm.beta)


def _np(x: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(x.numpy())
