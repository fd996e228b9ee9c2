"""A decoder-only language model -> Hugging Face `transformers` (GPT2LMHeadModel or
LlamaForCausalLM, as its settings are GPT-2's or Llama's) or CTranslate2 (through that folder and
CTranslate2's own converter): folders that `AutoTokenizer` and `AutoModelForCausalLM` load and
that generate as `aiayn generate` does.

GPT-2's family: learned positions, pre-norm LayerNorm with a final one, self-attention and a
feed-forward network (GELU's tanh approximation, GELU or ReLU) with biases, d_k = d_v = d_model / h,
the embedding not scaled (tied to the output, or not). Llama's: no absolute positions, rotary on every
dim of the self-attention (any number of K/V heads), pre-norm RMSNorm with a final one, SwiGLU, no
embedding scale. Anything else is refused, naming the field. The tokenizer goes as tokenizer.json,
putting <s> before the text as aiayn's generation does: aiayn's BPE as it is, a SentencePiece model
(unigram or BPE, aiayn's own ids) rebuilt from its pieces and normalisation rules by transformers'
SpmConverter, so that it encodes as SentencePiece does.
"""

from pathlib import Path
from typing import Any, cast

import torch
from tokenizers import Tokenizer as HFTokenizer
from tokenizers.processors import TemplateProcessing

from aiayn.builder.data.bpe import FastTokenizer
from aiayn.builder.data.spm import SentencePieceTokenizer
from aiayn.builder.data.tokenizer import BOS, EOS, PAD, UNK, Tokenizer
from aiayn.builder.errors import UserError
from aiayn.builder.formats.from_causal_lm import copy_gpt2_layers
from aiayn.builder.model.for_inference import ForInference
from aiayn.schemas.model import ModelSpec

HF = "Hugging Face transformers"
GPT2_ACTIVATIONS = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu"}


def family(spec: ModelSpec, target: str = HF) -> str:
    """ "gpt2" or "llama": the family whose settings the decoder-only model has, or a UserError naming the first field neither holds."""
    stack = spec.stack("decoder")
    alike = "GPT-2's and Llama's layers are all alike: self-attention, then a feed-forward network"
    refusals = [
        (bool(stack.overrides), f"model.decoder.overrides (layers {sorted(stack.overrides)}): {alike}"),
        (len(stack.layer) != 2, f"model.decoder.layer ({', '.join(s.type for s in stack.layer)}): {alike}"),
        (stack.position_bias is not None, f"model.decoder.position_bias ({getattr(stack.position_bias, 'type', None)}): GPT-2 "
         "and Llama add no bias to the attention scores (ALiBi's, T5's)"),
        (stack.add_norm.placement != "pre", f"model.decoder.add_norm.placement ({stack.add_norm.placement}): GPT-2 and Llama "
         "are pre-norm"),
        (not stack.has_final_norm, "model.decoder.final_norm (none): GPT-2 and Llama end the stack with a norm"),
        (spec.embedding.scale, "model.embedding.scale (true): GPT-2's and Llama's embeddings are not scaled by sqrt(d_model)"),
        (spec.embedding.output_bias, "model.embedding.output_bias (true): GPT-2's and Llama's output projections have no bias"),
    ]  # fmt: skip
    for bad, why in refusals:
        if bad:
            raise UserError(f"cannot export to {target}: {why}")
    attention, ffn = stack.layer
    if attention.type != "causal_self_attention" or getattr(attention, "switches", {}).keys() - {"kv_heads", "rotary"}:
        raise UserError(
            f"cannot export to {target}: model.decoder.layer[0] ({attention.type}, {dict(attention.switches)}) is neither GPT-2's nor Llama's attention"
        )
    if spec.positional.type == "learned" and spec.positional.export_as is None:
        raise UserError(
            f"cannot export to {target}: model.positional.first ({getattr(spec.positional, 'first')}): GPT-2's positions start at row 0"
        )
    if spec.positional.type == "learned":
        return _gpt2(spec, attention, ffn, target)
    if spec.positional.type == "none":
        return _llama(spec, attention, ffn, target)
    raise UserError(
        f"cannot export to {target}: model.positional ({spec.positional.type}): GPT-2's are learned, Llama's none (rotary)"
    )


def _gpt2(spec: ModelSpec, attention: Any, ffn: Any, target: str) -> str:
    wrong = [
        (ffn.type != "feed_forward" or ffn.activation not in GPT2_ACTIVATIONS, "model.decoder.layer[1]: a feed-forward network of GELU (tanh), GELU or ReLU"),
        (spec.stack("decoder").add_norm.norm.type != "layer_norm", "model.decoder.add_norm.norm: LayerNorm"),
        (not (attention.bias and ffn.bias), "biases in every projection"),
        (attention.kv_heads not in (None, attention.h) or attention.h * attention.d_k != spec.d_model or attention.d_v != attention.d_k,
         "d_k = d_v = d_model / h and as many K/V heads as query heads"),
    ]  # fmt: skip
    for bad, needed in wrong:
        if bad:
            raise UserError(f"cannot export to {target} as GPT-2: it needs {needed}")
    return "gpt2"


def _llama(spec: ModelSpec, attention: Any, ffn: Any, target: str) -> str:
    rotary = attention.rotary
    wrong = [
        (rotary is None or rotary.fraction != 1.0, "rotary on every dim of the self-attention"),
        (ffn.type != "gated_feed_forward" or ffn.activation != "silu", "model.decoder.layer[1]: SwiGLU (gated_feed_forward, silu)"),
        (spec.stack("decoder").add_norm.norm.type != "rms_norm", "model.decoder.add_norm.norm: RMSNorm"),
        (attention.h * attention.d_k != spec.d_model or attention.d_v != attention.d_k, "d_k = d_v = d_model / h"),
    ]  # fmt: skip
    for bad, needed in wrong:
        if bad:
            raise UserError(f"cannot export to {target} as Llama: it needs {needed}")
    return "llama"


def write_ctranslate2(loaded: ForInference, folder: Path, quantization: str | None = None, **_: Any) -> None:
    """A CTranslate2 Generator: the Hugging Face folder of `write`, converted by CTranslate2's own
    TransformersConverter (GPT-2 and Llama are its models), with the tokenizer beside it."""
    import tempfile

    from ctranslate2.converters import TransformersConverter

    with tempfile.TemporaryDirectory() as staging:
        write(loaded, Path(staging))
        rows, hf = loaded.spec.model.embedding.vocab_size, tokenizer(loaded.tgt_tokenizer)
        hf.add_tokens([f"<unused{i}>" for i in range(len(hf), rows)])  # CTranslate2 wants a token for every row
        hf.save_pretrained(staging)
        TransformersConverter(staging).convert(str(folder), quantization=quantization, force=True)
        tokenizer(loaded.tgt_tokenizer).save_pretrained(folder)


def write(loaded: ForInference, folder: Path, **_: Any) -> None:
    """config.json, the weights, generation_config.json and the tokenizer in `folder`."""
    import transformers

    spec = loaded.spec.model
    hf = _gpt2_model(spec, loaded.model) if family(spec) == "gpt2" else _llama_model(spec, loaded.model)
    hf.generation_config = transformers.GenerationConfig(bos_token_id=1, eos_token_id=2, pad_token_id=0)
    transformers.utils.logging.disable_progress_bar()
    tokenizer(loaded.tgt_tokenizer).save_pretrained(folder)
    hf.save_pretrained(folder)


def tokenizer(ours: Tokenizer) -> Any:
    """The run's tokenizer as transformers sees it: <s> before the text, as aiayn generates."""
    from transformers import PreTrainedTokenizerFast

    hf = _tokenizer_json(ours)
    hf.post_processor = TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, Tokenizer.bos_id)])
    return PreTrainedTokenizerFast(
        tokenizer_object=hf, bos_token=BOS, eos_token=EOS, unk_token=UNK, pad_token=PAD, clean_up_tokenization_spaces=False
    )


def _tokenizer_json(ours: Tokenizer) -> HFTokenizer:
    """A `tokenizers` Tokenizer that numbers as `ours` does, or a UserError naming why none can."""
    if isinstance(ours, FastTokenizer):
        return HFTokenizer.from_str(ours.hf.to_str())  # a copy: the run's own tokenizer stays as it is
    if not isinstance(ours, SentencePieceTokenizer):
        raise UserError(f"cannot export to {HF}: a {ours.name} tokenizer has no tokenizer.json form")
    if ours.vocab is not None or ours.language_codes:
        raise UserError(
            f"cannot export to {HF}: this run's SentencePiece tokenizer numbers its pieces by a vocabulary of its own "
            "(a model from elsewhere, or opus-mt's), and tokenizer.json can hold only the model's own ids"
        )
    from sentencepiece import sentencepiece_model_pb2
    from transformers.convert_slow_tokenizer import SpmConverter

    proto = sentencepiece_model_pb2.ModelProto()  # type: ignore[attr-defined]
    proto.ParseFromString(ours.model)
    pieces = list(proto.pieces)
    unigram = proto.trainer_spec.model_type == proto.trainer_spec.UNIGRAM
    vocab: Any = [(p.piece, p.score) for p in pieces] if unigram else {p.piece: i for i, p in enumerate(pieces)}
    return SpmConverter.build_tokenizer_from_spm_proto(proto, vocab)


@torch.no_grad()
def _gpt2_model(spec: ModelSpec, model: Any) -> Any:
    import transformers

    attention, ffn = (cast(Any, sub) for sub in spec.stack("decoder").layer)  # family() checked their types
    config = transformers.GPT2Config(
        vocab_size=spec.embedding.vocab_size,
        n_positions=int(spec.positional.max_positions or 0),
        n_embd=spec.d_model,
        n_layer=spec.stack("decoder").num_layers,
        n_head=attention.h,
        n_inner=ffn.d_ff,
        activation_function=GPT2_ACTIVATIONS[ffn.activation],
        layer_norm_epsilon=getattr(spec.stack("decoder").add_norm.norm, "eps"),
        resid_pdrop=spec.stack("decoder").add_norm.dropout,  # the dropouts as trained (they act in training alone)
        embd_pdrop=spec.dropout,
        attn_pdrop=attention.attn_dropout,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=spec.embedding.share != "none",
    )
    hf = transformers.GPT2LMHeadModel(config).eval()
    t = hf.transformer
    t.wte.weight.copy_(model.tgt_embed.token.table.weight)
    t.wpe.weight.copy_(model.tgt_embed.positional.table.weight)
    copy_gpt2_layers(model, t, into_ours=False)
    if spec.embedding.share == "none":
        hf.lm_head.weight.copy_(model.generator.weight)
    return hf


@torch.no_grad()
def _llama_model(spec: ModelSpec, model: Any) -> Any:
    import transformers

    attention, ffn = (cast(Any, sub) for sub in spec.stack("decoder").layer)  # family() checked their types
    config = transformers.LlamaConfig(
        vocab_size=spec.embedding.vocab_size,
        hidden_size=spec.d_model,
        intermediate_size=ffn.d_ff,
        num_hidden_layers=spec.stack("decoder").num_layers,
        num_attention_heads=attention.h,
        num_key_value_heads=attention.kv_heads or attention.h,
        rms_norm_eps=getattr(spec.stack("decoder").add_norm.norm, "eps"),
        rope_parameters={"rope_type": "default", "rope_theta": attention.rotary.base},
        attention_bias=attention.bias,
        attention_dropout=attention.attn_dropout,  # as trained; LlamaConfig has no residual or embedding dropout
        mlp_bias=ffn.bias,
        tie_word_embeddings=spec.embedding.share != "none",
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        max_position_embeddings=4096,
    )
    hf = transformers.LlamaForCausalLM(config).eval()
    hf.model.embed_tokens.weight.copy_(model.tgt_embed.token.table.weight)
    for ours, theirs in zip(model.decoder.layers, hf.model.layers):
        a, f = ours.sublayers
        theirs.input_layernorm.weight.copy_(a.norm.weight)
        q, k, v = _qkv(a.sublayer)
        for proj, (weight, bias) in zip((theirs.self_attn.q_proj, theirs.self_attn.k_proj, theirs.self_attn.v_proj), (q, k, v)):
            proj.weight.copy_(weight)
            if bias is not None:
                proj.bias.copy_(bias)
        theirs.self_attn.o_proj.weight.copy_(a.sublayer.w_o.weight)
        if a.sublayer.w_o.bias is not None:
            theirs.self_attn.o_proj.bias.copy_(a.sublayer.w_o.bias)
        theirs.post_attention_layernorm.weight.copy_(f.norm.weight)
        gate, up = f.sublayer.w_1.weight.chunk(2)
        theirs.mlp.gate_proj.weight.copy_(gate), theirs.mlp.up_proj.weight.copy_(up)
        theirs.mlp.down_proj.weight.copy_(f.sublayer.w_2.weight)
        if f.sublayer.w_1.bias is not None:  # mlp_bias
            gate_bias, up_bias = f.sublayer.w_1.bias.chunk(2)
            theirs.mlp.gate_proj.bias.copy_(gate_bias), theirs.mlp.up_proj.bias.copy_(up_bias)
            theirs.mlp.down_proj.bias.copy_(f.sublayer.w_2.bias)
    hf.model.norm.weight.copy_(model.decoder.final_norm.weight)
    if spec.embedding.share == "none":
        hf.lm_head.weight.copy_(model.generator.weight)
    return hf


def _qkv(attention: Any) -> list[tuple[Any, Any]]:
    """(weight, bias) of W^Q, W^K and W^V of aiayn's fused self-attention."""
    projections = attention.projections()
    return [projections["q"], projections["k"], projections["v"]]
