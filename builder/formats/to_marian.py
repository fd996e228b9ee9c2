"""aiayn -> Hugging Face `transformers`: a MarianMTModel, its config, generation config and tokenizer.

Marian is the paper's post-norm Transformer with sinusoids of the paper's frequencies in the
concatenated layout (sines, then cosines), which it recomputes on load. An interleaved model is
exported exactly by permuting the d_model axis of the whole residual stream (weights.permuted):
the sinusoid table then becomes Marian's. What Marian cannot hold is refused, naming the field:
pre-norm, a final LayerNorm, learned positions, d_k or d_v other than d_model / h, separate
vocabularies (one tokenizer file). Attention and FFN without biases get zero biases (exact).

Marian's LayerNorm epsilon is fixed at 1e-5 (aiayn's default is 1e-6), so logits agree closely,
not bit for bit. The tokenizer is a PreTrainedTokenizerFast over aiayn's own tokenizer.json (BPE: MarianTokenizer
needs SentencePiece models, which a `tokenizers` BPE cannot be turned into), or, for SentencePiece
tokenizers, MarianTokenizer's own files (source.spm, target.spm, vocab.json), as opus-mt ships them.
This module is imported only when `transformers` is installed.
"""

import json
from pathlib import Path

import torch
from tokenizers import Tokenizer as HFTokenizer
from tokenizers.processors import TemplateProcessing
from transformers import GenerationConfig, MarianConfig, MarianMTModel, MarianTokenizer, PreTrainedTokenizerFast
from transformers.utils import logging as hf_logging

from aiayn.blocks import EncoderDecoder
from aiayn.builder.data.bpe import FastTokenizer
from aiayn.builder.data.spm import SentencePieceTokenizer
from aiayn.builder.data.tokenizer import BOS, EOS, PAD, UNK, Tokenizer
from aiayn.builder.errors import UserError
from aiayn.builder.formats.limits import MARIAN, stack_spec_heads
from aiayn.builder.model.for_inference import ForInference
from aiayn.builder.model.weights import (
    Attention,
    FeedForward,
    Layer,
    Linear,
    Norm,
    TransformerWeights,
    interleaved_to_concatenated,
    permuted,
    transformer_weights,
)
from aiayn.schemas.attention import AttentionSpec
from aiayn.schemas.feed_forward import FeedForwardSpec
from aiayn.schemas.model import ModelSpec
from aiayn.schemas.positional import SinusoidalSpec


def marian_config(spec: ModelSpec, position_rows: int) -> MarianConfig:
    """The MarianConfig of `spec` (one limits.check_marian passed: the paper's blocks, in its
    layout); `position_rows` bounds input and output positions."""
    enc, dec = spec.encoder, spec.stack("decoder")
    assert enc is not None  # check_marian refused a decoder-only model
    attention, enc_ffn, dec_ffn = enc.layer[0], enc.layer[1], dec.layer[2]
    assert isinstance(attention, AttentionSpec) and isinstance(enc_ffn, FeedForwardSpec) and isinstance(dec_ffn, FeedForwardSpec)
    return MarianConfig(
        vocab_size=spec.embedding.vocab_size,
        decoder_vocab_size=spec.embedding.vocab_size,
        d_model=spec.d_model,
        encoder_layers=enc.num_layers,
        decoder_layers=dec.num_layers,
        encoder_attention_heads=stack_spec_heads(enc)[0],
        decoder_attention_heads=stack_spec_heads(dec)[0],
        encoder_ffn_dim=enc_ffn.d_ff,
        decoder_ffn_dim=dec_ffn.d_ff,
        activation_function="gelu_new" if enc_ffn.activation == "gelu_tanh" else enc_ffn.activation,
        max_position_embeddings=position_rows,
        scale_embedding=spec.embedding.scale,
        dropout=enc.add_norm.dropout,
        attention_dropout=attention.attn_dropout,
        activation_dropout=enc_ffn.activation_dropout,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
        forced_eos_token_id=None,
        share_encoder_decoder_embeddings=spec.embedding.share == "all",
        tie_word_embeddings=spec.embedding.share != "none",
    )


def generation_config(loaded: ForInference, position_rows: int) -> GenerationConfig:
    """aiayn's decode settings as far as `generate` has them: beam, alpha as |Y|^alpha (HF's only
    form; aiayn's default is GNMT's), early_stopping, </s> forced at the limit, <pad> and the
    suppressed tokens never generated, renormalised logits, and the length limit where it does
    not grow with the input (max_len_a 0; else the position table's rows). A greedy run (beam 1)
    gets no beam settings: transformers refuses them with one beam."""
    decode = loaded.spec.decode
    beams = {"length_penalty": decode.alpha, "early_stopping": decode.early_stopping} if decode.beam > 1 else {}
    ids = {token: i for i, token in enumerate(loaded.tgt_tokenizer.tokens())}
    suppressed = [0, *(ids[piece] for piece in decode.suppress if ids.get(piece, 0) != 0)]
    max_length = decode.max_len_b + 1 if decode.max_len_a == 0 else position_rows  # generate() counts the decoder's start
    return GenerationConfig(
        decoder_start_token_id=1,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        forced_eos_token_id=2 if decode.forced_eos else None,
        num_beams=decode.beam,
        suppress_tokens=suppressed,
        renormalize_logits=decode.renormalize,
        max_length=max_length,
        **beams,
    )


def write(loaded: ForInference, folder: Path, *, position_rows: int) -> None:
    """config.json, model.safetensors, generation_config.json and the tokenizer files in `folder`."""
    spec = loaded.spec.model
    assert isinstance(loaded.model, EncoderDecoder)  # check_marian refused a decoder-only model
    weights = transformer_weights(loaded.model, position_rows)
    if isinstance(spec.positional, SinusoidalSpec) and spec.positional.layout == "interleaved":
        weights = permuted(weights, interleaved_to_concatenated(spec.d_model))
    hf = MarianMTModel(marian_config(spec, position_rows)).eval()
    fill(hf, weights, output_bias=spec.embedding.output_bias)
    hf.generation_config = generation_config(loaded, position_rows)
    hf_logging.disable_progress_bar()  # the CLI prints one line per export
    if isinstance(loaded.src_tokenizer, FastTokenizer):
        hf_tokenizer(loaded.src_tokenizer, position_rows, source_eos=spec.source_eos).save_pretrained(folder)
    else:
        marian_tokenizer(loaded, folder, position_rows).save_pretrained(folder)
    hf.save_pretrained(folder)


def marian_tokenizer(loaded: ForInference, folder: Path, max_length: int) -> MarianTokenizer:
    """SentencePiece tokenizers as opus-mt ships them: source.spm, target.spm and one vocab.json
    (aiayn's ids), read by MarianTokenizer, which ends every source with </s>."""
    src, tgt = loaded.src_tokenizer, loaded.tgt_tokenizer
    if not (isinstance(src, SentencePieceTokenizer) and isinstance(tgt, SentencePieceTokenizer) and src.same_ids(tgt)):
        raise UserError(f"cannot export to {MARIAN}: MarianTokenizer needs two SentencePiece models over one vocabulary")
    if not loaded.spec.model.source_eos:
        raise UserError(
            f"cannot export to {MARIAN}: MarianTokenizer ends every source with </s>, and this model reads sources "
            "without it (model.source_eos: false); train with model.source_eos: true, or export --to ctranslate2"
        )
    vocab: dict[str, int] = {}
    for i, piece in enumerate(src.tokens()):
        vocab.setdefault(piece, i)
    files = {
        "source.spm": src.model,
        "target.spm": tgt.model,
        "vocab.json": json.dumps(vocab, ensure_ascii=False).encode("utf-8"),
    }
    for name, data in files.items():  # MarianTokenizer reads its files from disk; save_pretrained writes them again
        (folder / name).write_bytes(data)
    return MarianTokenizer(
        source_spm=str(folder / "source.spm"),
        target_spm=str(folder / "target.spm"),
        vocab=str(folder / "vocab.json"),
        bos_token=BOS,
        model_max_length=max_length,
        clean_up_tokenization_spaces=False,
    )


def hf_tokenizer(tokenizer: FastTokenizer, max_length: int, *, source_eos: bool = False) -> PreTrainedTokenizerFast:
    """aiayn's tokenizer as transformers sees it: the source gets no specials (aiayn adds none),
    or </s> at its end where the model reads it there (model.source_eos; MarianTokenizer's way)."""
    hf = tokenizer.hf
    if source_eos:
        hf = HFTokenizer.from_str(hf.to_str())  # a copy: the run's own tokenizer stays as it is
        hf.post_processor = TemplateProcessing(single=f"$A {EOS}", special_tokens=[(EOS, Tokenizer.eos_id)])
    return PreTrainedTokenizerFast(
        tokenizer_object=hf,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        pad_token=PAD,
        clean_up_tokenization_spaces=False,
        model_max_length=max_length,
    )


@torch.no_grad()
def fill(hf: MarianMTModel, weights: TransformerWeights, *, output_bias: bool) -> None:
    """Copy `weights` into a MarianMTModel built from `marian_config` (tied tables are one tensor)."""
    model = hf.model
    model.encoder.embed_tokens.weight.copy_(weights.encoder.embedding)
    model.decoder.embed_tokens.weight.copy_(weights.decoder.embedding)
    hf.lm_head.weight.copy_(weights.output.weight)
    if output_bias and weights.output.bias is not None:
        hf.final_logits_bias.copy_(weights.output.bias[None])
    for ours, theirs in zip(weights.encoder.layers, model.encoder.layers):
        _layer(ours, theirs, encoder=True)
    for ours, theirs in zip(weights.decoder.layers, model.decoder.layers):
        _layer(ours, theirs, encoder=False)
    for side, stack in (("encoder", weights.encoder), ("decoder", weights.decoder)):
        table = getattr(model, side).embed_positions.weight
        if not torch.allclose(table, stack.positions, atol=1e-6, rtol=0):
            raise AssertionError(f"the {side}'s sinusoids differ from Marian's after the permutation")  # our bug, not the user's


def _layer(ours: Layer, theirs, *, encoder: bool) -> None:
    _attention(ours.self_attention, theirs.self_attn, theirs.self_attn_layer_norm)
    if not encoder:
        assert ours.cross_attention is not None  # a decoder layer's
        _attention(ours.cross_attention, theirs.encoder_attn, theirs.encoder_attn_layer_norm)
    _ffn(ours.ffn, theirs)


def _attention(ours: Attention, theirs, norm) -> None:
    for lin, proj in ((ours.q, theirs.q_proj), (ours.k, theirs.k_proj), (ours.v, theirs.v_proj), (ours.o, theirs.out_proj)):
        _linear(lin, proj)
    _norm(ours.norm, norm)


def _ffn(ours: FeedForward, theirs) -> None:
    _linear(ours.w_1, theirs.fc1)
    _linear(ours.w_2, theirs.fc2)
    _norm(ours.norm, theirs.final_layer_norm)


def _linear(ours: Linear, theirs: torch.nn.Linear) -> None:
    theirs.weight.copy_(ours.weight)
    theirs.bias.copy_(ours.bias if ours.bias is not None else torch.zeros_like(theirs.bias))


def _norm(ours: Norm, theirs: torch.nn.LayerNorm) -> None:
    theirs.weight.copy_(ours.gamma)
    theirs.bias.copy_(ours.beta if ours.beta is not None else torch.zeros_like(theirs.bias))
