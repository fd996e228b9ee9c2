"""ModelSpec -> EncoderDecoder, and the closed forms `show` reports without building it."""

import torch
from torch import nn

from blocks import AddNorm, EncoderDecoder, InputEmbedding, OutputProjection, ScaledEmbedding
from blocks import TransformerLayer, TransformerStack
from builder.registry import entry
from schemas.feed_forward import FeedForwardSpec
from schemas.model import ModelSpec
from schemas.stacks import StackSpec

PAD_ID = 0  # the tokenizer reserves id 0 for padding


def build_model(spec: ModelSpec, *, device: torch.device | str | None = None) -> EncoderDecoder:
    """Build on `device` ("meta" builds a big model instantly, with no memory)."""
    with torch.device(device or "cpu"):
        model = _build(spec)
        if str(device) != "meta":
            init_weights(model)
    return model


def _build(spec: ModelSpec) -> EncoderDecoder:
    d, emb = spec.d_model, spec.embedding
    src_table = nn.Embedding(emb.vocab_size, d, padding_idx=PAD_ID)
    tgt_table = src_table if emb.share == "all" else nn.Embedding(emb.vocab_size, d, padding_idx=PAD_ID)
    tied = tgt_table.weight if emb.share != "none" else None
    return EncoderDecoder(
        src_embed=_input(spec, src_table),
        tgt_embed=_input(spec, tgt_table),
        encoder=_stack(spec.encoder, d),
        decoder=_stack(spec.decoder, d),
        generator=OutputProjection(d_model=d, vocab_size=emb.vocab_size, bias=emb.output_bias, tied_weight=tied),
        pad_id=PAD_ID,
    )


def _input(spec: ModelSpec, table: nn.Embedding) -> InputEmbedding:
    return InputEmbedding(
        token=ScaledEmbedding(table=table, scale=spec.embedding.scale),
        positional=entry(spec.positional).build(spec.positional, spec.d_model),
        dropout=spec.dropout,
    )


def _stack(spec: StackSpec, d_model: int) -> TransformerStack:
    norm = spec.add_norm
    layers = [
        TransformerLayer(
            sublayers=[
                AddNorm(
                    sublayer=entry(sub).build(sub, d_model), d_model=d_model, dropout=norm.dropout,
                    eps=norm.eps, norm_first=norm.placement == "pre",
                )
                for sub in layer
            ]
        )
        for layer in spec.layers
    ]
    final = nn.LayerNorm(d_model, eps=norm.eps) if spec.has_final_norm else None
    return TransformerStack(layers=layers, final_norm=final)


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


# ---- closed forms ---------------------------------------------------------------------------


def param_table(spec: ModelSpec) -> list[tuple[str, int, int]]:
    """(block, parameters of one, how many) for every distinct block; the counts add up to
    `count_params(spec)`."""
    d, emb = spec.d_model, spec.embedding
    matrix = emb.vocab_size * d
    rows: list[tuple[str, int, int]] = []
    if emb.share == "all":
        rows.append(("embedding (source = target = output)", matrix, 1))
    elif emb.share == "target_output":
        rows += [("embedding.source", matrix, 1), ("embedding (target = output)", matrix, 1)]
    else:
        rows += [("embedding.source", matrix, 1), ("embedding.target", matrix, 1), ("output projection", matrix, 1)]
    if emb.output_bias:
        rows.append(("output projection bias", emb.vocab_size, 1))
    pos = entry(spec.positional).params(spec.positional, d)
    if pos:
        rows.append((f"positional ({spec.positional.type}, per side)", pos, 2))
    for name, stack in (("encoder", spec.encoder), ("decoder", spec.decoder)):
        rows += _stack_rows(name, stack, d)
    return rows


def _stack_rows(name: str, stack: StackSpec, d_model: int) -> list[tuple[str, int, int]]:
    rows = []
    repeats = stack.num_layers - len(stack.overrides)
    groups = [("layer", stack.layer, repeats)] + [(f"overrides.{i}", l, 1) for i, l in sorted(stack.overrides.items())]
    for where, layer, times in groups:
        if times == 0:
            continue
        for j, sub in enumerate(layer):
            rows.append((f"{name}.{where}[{j}] {sub.type}", entry(sub).params(sub, d_model), times))
        rows.append((f"{name}.{where} add & norm (LayerNorm x{len(layer)})", 2 * d_model * len(layer), times))
    if stack.has_final_norm:
        rows.append((f"{name} final LayerNorm", 2 * d_model, 1))
    return rows


def count_params(spec: ModelSpec) -> int:
    """Exactly `sum(p.numel() for p in build_model(spec).parameters())`, with no model built."""
    return sum(each * times for _, each, times in param_table(spec))


def flops_per_token(spec: ModelSpec, length: int) -> float:
    """Forward FLOPs (2 per multiply-add) per target token of a pair whose source and target both
    have `length` tokens: the encoder's work per source token, the decoder's and the output
    projection's per target token. Training costs about three times this."""
    d = spec.d_model
    total = 2.0 * d * spec.embedding.vocab_size  # pre-softmax projection
    for stack in (spec.encoder, spec.decoder):
        for layer in stack.layers:
            total += sum(entry(sub).flops(sub, d, length) for sub in layer)
    return total


def memory_estimate(spec: ModelSpec, tokens_per_batch: int, length: int) -> dict[str, int]:
    """Bytes for fp32 training with Adam: weights, gradients, the two Adam moments, and an
    estimate of the activations kept for backward for a batch of `tokens_per_batch` tokens per
    side (fused attention: no L x L score matrices kept)."""
    params = count_params(spec)
    d = spec.d_model
    per_token = 0
    for stack in (spec.encoder, spec.decoder):
        for layer in stack.layers:
            for sub in layer:
                # the sub-layer's own intermediates, then its input, dropout, residual and norm
                inner = 2 * sub.d_ff if isinstance(sub, FeedForwardSpec) else sub.h * 2 * (sub.d_k + sub.d_v)
                per_token += inner + 4 * d
    per_token += 3 * spec.embedding.vocab_size  # logits, log-softmax and its gradient (target side)
    activations = 4 * tokens_per_batch * per_token
    return {
        "weights": 4 * params,
        "gradients": 4 * params,
        "optimizer": 8 * params,
        "activations": activations,
        "total": 16 * params + activations,
    }
