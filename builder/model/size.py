"""Sizes without a model in memory: parameters counted on modules built on the meta device (one
module per distinct layer, times how many there are: instant for any num_layers), and FLOPs and
training memory in closed form through the registry."""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn

from aiayn.blocks import AddNorm
from aiayn.builder.errors import BlockError, UserError
from aiayn.builder.graph import graph_of
from aiayn.builder.model.build import Side, build_model, embeddings, final_norm, layer, position_bias, stack_context
from aiayn.builder.model.freeze import frozen_parameters
from aiayn.builder.model.parts import registry_of
from aiayn.schemas.model import ModelSpec
from aiayn.schemas.stacks import StackSpec

Row = tuple[str, int, int]  # (block, parameters of one, how many)


def param_table(spec: ModelSpec) -> list[Row]:
    """(block, parameters of one, how many) for every distinct block; the counts add up to the
    built model's `sum(p.numel() for p in model.parameters())`."""
    rows = _embedding_rows(spec)
    for name, stack in spec.stacks.items():
        rows += _stack_rows(name, stack, spec.d_model)  # type: ignore[arg-type]
    with _on_meta():
        extra = graph_of(spec).extra_parameters(spec)
    return rows + [(label, _numel(module), 1) for label, module in extra]


def count_params(spec: ModelSpec) -> int:
    """Exactly `sum(p.numel() for p in build_model(spec).parameters())`."""
    return sum(each * times for _, each, times in param_table(spec))


def frozen_count(spec: ModelSpec, patterns: Sequence[str]) -> int:
    """The parameters train.freeze's `patterns` freeze (the whole model built on the meta device)."""
    with _on_meta():
        model = build_model(spec, device="meta")
    return sum(p.numel() for p in frozen_parameters(model, patterns))


def _numel(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@contextmanager
def _on_meta() -> Iterator[None]:
    too_big = "model: some weight would have more elements than PyTorch can count (2^63); use smaller dims"
    try:
        with torch.device("meta"):
            yield
    except (RuntimeError, OverflowError, TypeError):  # a size beyond int64 (TypeError from torch)
        raise UserError(too_big) from None
    except BlockError as e:  # the same, met inside a block's builder (and not a block's own bug)
        if (
            isinstance(e.__cause__, OverflowError) or "overflow" in str(e.__cause__).lower()
        ):  # "Storage size calculation overflowed"
            raise UserError(too_big) from None
        raise


def embedding_groups(spec: ModelSpec) -> tuple[list[tuple[tuple[str, ...], int]], int]:
    """([(the sides that hold one matrix: source, target, output, or "output bias"; its size)],
    the positional parameters of one side)."""
    with _on_meta():
        inputs, output = embeddings(spec)
    holders: dict[int, tuple[nn.Parameter, list[str]]] = {}
    for side, module in (*((side, one.token) for side, one in inputs.items()), ("output", output)):
        for p in module.parameters():
            holders.setdefault(id(p), (p, []))[1].append("output bias" if p is output.bias else side)
    return [(tuple(sides), p.numel()) for p, sides in holders.values()], _numel(inputs["target"].positional)


def _input_extras(spec: ModelSpec) -> list[tuple[str, int]]:
    """(label, parameters of one side) of an input's segment table and norm, where it has them."""
    with _on_meta():
        inputs, _ = embeddings(spec)
    one, rows = inputs["target"], []
    if one.segment is not None:
        rows.append((f"segment embedding ({spec.embedding.segments} segments)", _numel(one.segment)))
    if one.norm is not None and spec.embedding.norm is not None:
        rows.append(
            (
                f"embedding norm ({registry_of(spec).registration(spec.embedding.norm).label(spec.embedding.norm)})",
                _numel(one.norm),
            )
        )
    return rows


def _embedding_rows(spec: ModelSpec) -> list[Row]:
    groups, positions = embedding_groups(spec)
    rows = []
    for sides, count in groups:
        if sides == ("output bias",):
            label = "output projection bias"
        elif len(sides) > 1:
            label = f"embedding ({' = '.join(sides)})"
        else:
            label = {"source": "embedding.source", "target": "embedding.target", "output": "output projection"}[sides[0]]
        rows.append((label, count, 1))
    n_sides = len(spec.stacks)
    per_side = ", per side" if n_sides > 1 else ""
    rows += [(f"{label[:-1]}{per_side})", count, n_sides) for label, count in _input_extras(spec)]
    if positions:
        rows.append(
            (
                f"positional ({registry_of(spec).registration(spec.positional).label(spec.positional)}{per_side})",
                positions,
                n_sides,
            )
        )
    return rows


def layer_sizes(stack: StackSpec, d_model: int, side: Side, index: int) -> tuple[list[int], list[int]]:
    """(parameters of each sub-layer, of each sub-layer's norm) of layer `index` of the stack."""
    with _on_meta():
        built = layer(stack.overrides.get(index, stack.layer), stack, stack_context(stack, d_model, side, layer=index))
    blocks = [block for block in built.sublayers if isinstance(block, AddNorm)]
    return [_numel(block.sublayer) for block in blocks], [_numel(block.norm) for block in blocks]


def stack_extras(stack: StackSpec, d_model: int, side: Side) -> tuple[int | None, int | None]:
    """(parameters of the final norm, of the position bias), None for what the stack has not."""
    with _on_meta():
        ctx = stack_context(stack, d_model, side)
        norm, bias = final_norm(stack, ctx), position_bias(stack, ctx)
    return (None if norm is None else _numel(norm)), (None if bias is None else _numel(bias))


def _stack_rows(name: Side, stack: StackSpec, d_model: int) -> list[Row]:
    rows = []
    norm_label = registry_of(stack).registration(stack.add_norm.norm).label(stack.add_norm.norm)
    for where, sublayers, times, first in stack.groups:
        params, norms = layer_sizes(stack, d_model, name, first)
        for j, (sub, count) in enumerate(zip(sublayers, params)):
            rows.append((f"{name}.{where}[{j}] {registry_of(stack).registration(sub).label(sub)}", count, times))
        rows.append((f"{name}.{where} add & norm ({norm_label} x{len(sublayers)})", sum(norms), times))
    norm, bias = stack_extras(stack, d_model, name)
    if norm is not None:
        rows.append((f"{name} final {norm_label}", norm, 1))
    if bias is not None and stack.position_bias is not None:
        rows.append(
            (f"{name} position bias ({registry_of(stack).registration(stack.position_bias).label(stack.position_bias)})", bias, 1)
        )
    return rows


def flops_per_token(spec: ModelSpec, length: int) -> float:
    """Forward FLOPs (2 per multiply-add) per target token of a pair whose source and target both
    have `length` tokens: the encoder's work per source token, the decoder's and the output
    projection's per target token (a decoder-only model's per token of a sequence of `length`).
    Training costs about three times this."""
    d = spec.d_model
    total = 2.0 * d * spec.embedding.vocab_size  # pre-softmax projection
    for stack in spec.stacks.values():
        for _, sublayers, times, _ in stack.groups:
            total += times * sum(registry_of(stack).registration(sub).flops(sub, d, length) for sub in sublayers)
        if stack.position_bias is not None:
            total += registry_of(stack).registration(stack.position_bias).flops(stack.position_bias, d, length)
    return total


def memory_estimate(spec: ModelSpec, tokens_per_batch: int) -> dict[str, int]:
    """Bytes for fp32 training with Adam: weights, gradients, the two Adam moments, and an
    estimate of the activations kept for backward for a batch of `tokens_per_batch` tokens per
    side (fused attention: no L x L score matrices kept)."""
    params = count_params(spec)
    per_token = 3 * spec.embedding.vocab_size  # logits, log-softmax and its gradient (target side)
    for stack in spec.stacks.values():
        for _, sublayers, times, _ in stack.groups:
            per_token += times * sum(registry_of(stack).registration(sub).activations(sub, spec.d_model) for sub in sublayers)
    activations = 4 * tokens_per_batch * per_token
    return {
        "weights": 4 * params,
        "gradients": 4 * params,
        "optimizer": 8 * params,
        "activations": activations,
        "total": 16 * params + activations,
    }


def decode_memory(spec: ModelSpec, rows: int, positions: int) -> int:
    """Bytes a decoding of `rows` rows (sources times their beam or samples) of up to `positions`
    positions each (the source and the output) holds at most, in fp32: keys and values of
    d_model each a position for every sub-layer of every stack (an upper bound: a feed-forward
    caches none, a self-attention only the output's positions), and each row's logits, their
    log-softmax and the candidates ranked from them (3 x vocab)."""
    sublayers = sum(times * len(subs) for stack in spec.stacks.values() for _, subs, times, _ in stack.groups)
    per_row = positions * sublayers * 2 * spec.d_model + 3 * spec.embedding.vocab_size
    return 4 * rows * per_row


LARGEST = 2**50  # bytes: 1 PiB, beyond the memory of any one training job there is


def check_size(spec: ModelSpec) -> None:
    """Refuse a model no machine could train (weights, gradients and Adam: 16 bytes a
    parameter, over LARGEST), naming its largest block."""
    table = param_table(spec)
    total = sum(each * times for _, each, times in table)
    if 16 * total <= LARGEST:
        return
    block, each, times = max(table, key=lambda row: row[1] * row[2])
    raise UserError(
        f"model: {total:.3g} parameters need {16 * total / 2**50:.3g} PiB to train (weights, gradients and Adam), more than "
        f"any machine holds (aiayn's bound: 1 PiB); the largest block is {block} ({each * times:.3g}): use smaller dims"
    )
