"""ModelSpec -> EncoderDecoder, wired from blocks through the registry.

The pieces (`embeddings`, `layer`, `final_norm`) are built by the same functions whether for
training or, on the meta device, for counting parameters (size.py), so a count can never drift
from the model.
"""

import torch
from torch import nn

from aiayn.blocks import (
    AddNorm,
    EncoderDecoder,
    InputEmbedding,
    OutputProjection,
    ScaledEmbedding,
    TransformerLayer,
    TransformerStack,
)
from aiayn.builder.model.registry import entry
from aiayn.schemas.add_norm import AddNormSpec
from aiayn.schemas.model import ModelSpec
from aiayn.schemas.stacks import LayerSpec, StackSpec

PAD_ID = 0  # the tokenizer reserves id 0 for padding


def build_model(spec: ModelSpec, *, device: torch.device | str | None = None) -> EncoderDecoder:
    """Build on `device` ("meta" builds a big model instantly, with no memory)."""
    with torch.device(device or "cpu"):
        src_embed, tgt_embed, generator = embeddings(spec)
        model = EncoderDecoder(
            src_embed=src_embed,
            tgt_embed=tgt_embed,
            encoder=_stack(spec.encoder, spec.d_model),
            decoder=_stack(spec.decoder, spec.d_model),
            generator=generator,
            pad_id=PAD_ID,
        )
        if str(device) != "meta":
            init_weights(model)
    return model


def embeddings(spec: ModelSpec) -> tuple[InputEmbedding, InputEmbedding, OutputProjection]:
    """(source input, target input, pre-softmax projection), sharing tables as `embedding.share` says."""
    d, emb = spec.d_model, spec.embedding
    src_table = nn.Embedding(emb.vocab_size, d, padding_idx=PAD_ID)
    tgt_table = src_table if emb.share == "all" else nn.Embedding(emb.vocab_size, d, padding_idx=PAD_ID)
    tied = tgt_table.weight if emb.share != "none" else None
    generator = OutputProjection(d_model=d, vocab_size=emb.vocab_size, bias=emb.output_bias, tied_weight=tied)
    return _input(spec, src_table), _input(spec, tgt_table), generator


def _input(spec: ModelSpec, table: nn.Embedding) -> InputEmbedding:
    return InputEmbedding(
        token=ScaledEmbedding(table=table, scale=spec.embedding.scale),
        positional=entry(spec.positional).build(spec.positional, spec.d_model),
        dropout=spec.dropout,
    )


def layer(spec: LayerSpec, norm: AddNormSpec, d_model: int) -> TransformerLayer:
    """One layer: each sub-layer of `spec` wrapped in add & norm."""
    return TransformerLayer(
        sublayers=[
            AddNorm(
                sublayer=entry(sub).build(sub, d_model), d_model=d_model, dropout=norm.dropout,
                eps=norm.eps, norm_first=norm.placement == "pre",
            )
            for sub in spec
        ]
    )


def final_norm(spec: StackSpec, d_model: int) -> nn.LayerNorm | None:
    return nn.LayerNorm(d_model, eps=spec.add_norm.eps) if spec.has_final_norm else None


def _stack(spec: StackSpec, d_model: int) -> TransformerStack:
    layers = [layer(sublayers, spec.add_norm, d_model) for sublayers in spec.layers]
    return TransformerStack(layers=layers, final_norm=final_norm(spec, d_model))


def init_weights(model: nn.Module) -> None:
    """Xavier-uniform matrices, zero biases, N(0, d_model^-0.5) embeddings (as fairseq and
    tensor2tensor; the paper does not say). Shared tables are initialised once."""
    seen: set[int] = set()
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding) and id(module.weight) not in seen:
            seen.add(id(module.weight))
            nn.init.normal_(module.weight, mean=0.0, std=module.embedding_dim**-0.5)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
