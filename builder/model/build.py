"""ModelSpec -> its graph's model (builder/graphs/), wired from blocks through the registry.

The pieces (`embeddings`, `layer`, `final_norm`, `position_bias`) are built by the same functions
whether for training or, on the meta device, for counting parameters (size.py), so a count can
never drift from the model.
"""

from os import PathLike
from typing import Literal, cast

import torch
from torch import nn

from aiayn.blocks import (
    AddNorm,
    InputEmbedding,
    OutputProjection,
    Rotary,
    ScaledEmbedding,
    TransformerGraph,
    TransformerLayer,
    TransformerStack,
)
from aiayn.builder.errors import UserError, described
from aiayn.builder.graph import graph_of
from aiayn.builder.model.parts import BuildContext, StackPlan, build, registry_of
from aiayn.schemas.attention import AttentionSpec
from aiayn.schemas.experiment import ExperimentSpec
from aiayn.schemas.model import ModelSpec
from aiayn.schemas.stacks import LayerSpec, StackSpec

PAD_ID = 0  # the tokenizer reserves id 0 for padding
BOS_ID = 1  # id 1 for <s>
EOS_ID = 2  # and id 2 for </s>
Side = Literal["encoder", "decoder"]


def build_model(spec: ModelSpec | ExperimentSpec, *, device: torch.device | str | None = None) -> TransformerGraph:
    """The model of an experiment, initialised, as its graph (`model.graph`, builder/graphs/) wires it:
    an EncoderDecoder, or a DecoderOnly of the same decoder stack.

    :param spec: an ExperimentSpec (`aiayn.load_experiment`), or its model section
    :param device: where its parameters are made ("meta" builds a big model instantly, with no memory)
    :returns: the model (an nn.Module), in training mode"""
    if isinstance(spec, ExperimentSpec):
        spec = spec.model
    if not isinstance(spec, ModelSpec):
        hint = "; aiayn.load_experiment(path) reads one" if isinstance(spec, (str, PathLike)) else ""
        raise UserError(f"spec: expected an ExperimentSpec or its model section, got {described(spec)}{hint}")
    with torch.device(device or "cpu"):
        model = graph_of(spec).build(spec)
        if str(device) != "meta":
            init_weights(model)
    return model


def embeddings(spec: ModelSpec) -> tuple[dict[str, InputEmbedding], OutputProjection]:
    """({side: its input embedding}, pre-softmax projection) for the sides the graph reads (source
    and target, or the target alone), sharing tables as `embedding.share` says: a graph of one input
    has one table, tied to the projection unless share: none."""
    d, emb = spec.d_model, spec.embedding
    tgt_table = nn.Embedding(emb.vocab_size, d, padding_idx=PAD_ID)
    tables = {"target": tgt_table}
    if "source" in graph_of(spec).sides:
        tables = {"source": tgt_table if emb.share == "all" else nn.Embedding(emb.vocab_size, d, padding_idx=PAD_ID), **tables}
    tied = cast(nn.Parameter, tgt_table.weight) if emb.share != "none" else None
    generator = OutputProjection(d_model=d, vocab_size=emb.vocab_size, bias=emb.output_bias, tied_weight=tied)
    return {side: _input(spec, table) for side, table in tables.items()}, generator


def _input(spec: ModelSpec, table: nn.Embedding) -> InputEmbedding:
    ctx, emb = BuildContext(d_model=spec.d_model, registry=registry_of(spec)), spec.embedding
    return InputEmbedding(
        token=ScaledEmbedding(table=table, scale=emb.scale),
        positional=build(spec.positional, ctx),
        dropout=spec.dropout,
        segment=nn.Embedding(emb.segments, spec.d_model) if emb.segments else None,
        norm=None if emb.norm is None else build(emb.norm, ctx),
    )


def layer(spec: LayerSpec, stack: StackSpec, ctx: BuildContext) -> TransformerLayer:
    """One layer: each sub-layer of `spec` wrapped in the stack's add & norm."""
    norm = stack.add_norm
    return TransformerLayer(
        sublayers=[
            AddNorm(
                sublayer=build(sub, ctx), norm=build(norm.norm, ctx), dropout=norm.dropout, norm_first=norm.placement == "pre"
            )
            for sub in spec
        ]
    )


def final_norm(spec: StackSpec, ctx: BuildContext) -> nn.Module | None:
    return build(spec.add_norm.norm, ctx) if spec.has_final_norm else None


def position_bias(spec: StackSpec, ctx: BuildContext) -> nn.Module | None:
    return build(spec.position_bias, ctx) if spec.position_bias is not None else None


def stack_plan(spec: StackSpec) -> StackPlan:
    """What the blocks of the stack share: h of its self-attentions, one rotary table per distinct
    setting of its attentions."""
    located = [s for _, s in spec.located()]
    heads = next((s.table3["h"] for s in located if not s.reads_memory and "h" in s.table3), None)
    rotary: dict[tuple[int, int, float], Rotary] = {}
    for s in located:
        if isinstance(s, AttentionSpec) and s.rotary is not None:
            key = (s.d_k, s.rotary.dims(s.d_k), s.rotary.base)
            rotary.setdefault(key, Rotary(d_k=s.d_k, dims=key[1], base=s.rotary.base))
    return StackPlan(heads=heads, rotary=rotary)


def stack_context(
    spec: StackSpec, d_model: int, side: Side, *, layer: int | None = None, plan: StackPlan | None = None
) -> BuildContext:
    """The context of the blocks of a stack (of its `layer`-th layer; the stack's own: None)."""
    return BuildContext(d_model, side, layer, stack_plan(spec) if plan is None else plan, registry_of(spec))


def stack(spec: StackSpec, d_model: int, side: Side) -> TransformerStack:
    """A stack of the model: its layers, final norm and shared bias."""
    plan = stack_plan(spec)
    layers = [layer(subs, spec, stack_context(spec, d_model, side, layer=i, plan=plan)) for i, subs in enumerate(spec.layers)]
    ctx = stack_context(spec, d_model, side, plan=plan)
    return TransformerStack(layers=layers, final_norm=final_norm(spec, ctx), position_bias=position_bias(spec, ctx))


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
