"""A block built from its spec through its registration (`build`), and what a builder receives
besides the spec (`BuildContext`, `StackPlan`). Registering is `registry.add(SpecClass, slot=...,
build=..., flops=..., activations=...)` (builder/registry.py's RegistryBuilder).

The slot (schemas/slots.py) is where a YAML file may use the spec: `sublayer` (an entry of a
layer), `norm` (add & norm's normaliser and the final norm), `positional` (added to each side's
embeddings), `stack_bias` (a score bias a stack shares among its self-attentions), `score` (an
attention's step from scores to weights). Registering
extends the unions the YAML is validated against, `aiayn schema` and the "did you mean" lists;
`build(spec, ctx)` then turns a validated spec into its module. aiayn's own blocks register here
(builtin.py) from the entry point group `aiayn.blocks`, exactly as a plugin's do.

Parameter counts are not written here: size.py counts the parameters of modules built on the
meta device, so they cannot drift from what `build` makes. FLOPs and the activation memory a
block keeps for backward cannot be read off a module, so a sub-layer's registration states them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from torch import nn

from aiayn.blocks import Rotary, ScoreStep, Sublayer
from aiayn.builder.errors import BlockError, UserError
from aiayn.builder.registry import Registration, Registry, registry_of
from aiayn.schemas._base import Spec
from aiayn.schemas.attention import RotarySpec
from aiayn.schemas.score import ScoreSpec
from aiayn.schemas.slots import PluginError


@dataclass(frozen=True)
class StackPlan:
    """What the blocks of one stack share, worked out once from its spec before any is built:
    `heads`, h of its self-attentions (a bias the stack shares among them has one row per head),
    and the tables its attentions share, one per distinct setting. A table holds no parameters
    (a parameter several layers share would be counted once per layer: that is a stack_bias).

    :param heads: h of the stack's self-attentions (None: it has none)
    :param rotary: the stack's rotary tables by (d_k, dims, base)"""

    heads: int | None = None
    rotary: Mapping[tuple[int, int, float], Rotary] = field(default_factory=dict)  # (d_k, dims, base) -> table

    def rotary_table(self, d_k: int, spec: RotarySpec) -> Rotary:
        """The stack's rotary table for heads of d_k rotated as `spec` says (a new one where the plan
        has none: an attention built outside a stack)."""
        key = (d_k, spec.dims(d_k), spec.base)
        table = self.rotary.get(key)
        return Rotary(d_k=d_k, dims=key[1], base=spec.base) if table is None else table


@dataclass(frozen=True)
class BuildContext:
    """What `build` receives besides its spec.

    :param d_model: the model's width
    :param stack: "encoder" or "decoder" (None: a part of the whole model, as its positions)
    :param layer: the index of the layer in its stack (layers alike are built once to be counted,
        so a part's parameters must not depend on it)
    :param plan: what the stack's parts share (a StackPlan)
    :param registry: the registrations that build the parts"""

    d_model: int
    stack: Literal["encoder", "decoder"] | None = None  # None: a block of the whole model (positions)
    # the index of the layer in its stack (sub-layers and their norms); layers alike are built once
    # to be counted, at the first index, so a block's parameters must not depend on it
    layer: int | None = None
    plan: StackPlan = field(default_factory=StackPlan)  # what the stack's blocks share
    registry: Registry = field(default_factory=Registry)  # the registrations that build the blocks

    @property
    def heads(self) -> int | None:
        """h of the stack's self-attentions (for a bias the stack shares among them)."""
        return self.plan.heads


Build = Callable[[Any, BuildContext], nn.Module]
__all__ = ["BuildContext", "Registration", "Registry", "StackPlan", "build", "registry_of"]


def build(spec: Spec, ctx: BuildContext) -> nn.Module:
    """The module of `spec`, built by its registration in `ctx.registry`."""
    entry = ctx.registry.registration(spec)
    try:
        module = entry.build(spec, ctx)
    except (UserError, PluginError):  # a part's registration that broke its contract says so itself
        raise
    except Exception as e:  # the spec validated, so the block must build: a bug, said in one line
        where = f"the {ctx.stack} " + (f"layer {ctx.layer}" if ctx.layer is not None else "stack") if ctx.stack else "the model"
        owner = (
            "aiayn"
            if getattr(entry.build, "__module__", "").startswith("aiayn.")
            else f"the plugin that registers {entry.type!r}"
        )
        raise BlockError(
            f"bug: the {entry.type!r} block ({where}) failed to build from settings that validated: {type(e).__name__}: {e}; "
            f"please report it to {owner} with the experiment"
        ) from e
    if entry.slot == "sublayer" and not isinstance(module, Sublayer):
        raise PluginError(
            f"the builder of {entry.type!r} returned a {type(module).__name__}; a sub-layer's block must subclass "
            "aiayn.Sublayer (forward(x, ctx))"
        )
    if entry.slot == "score" and not isinstance(module, ScoreStep):
        raise PluginError(
            f"the builder of the score step {entry.type!r} returned a {type(module).__name__}; a score step must subclass "
            "aiayn.ScoreStep (normalize(scores, allowed))"
        )
    return module


def described_switches(spec: Spec, registry: Registry) -> dict[str, Any]:
    """`spec.switches`, where a part it holds fills a slot of its own (an attention's score step),
    the part named by its registration's label, so that two settings of one type read apart
    ("sparsemax (T=0.5)" beside "sparsemax (T=2)")."""
    found = dict(getattr(spec, "switches", {}))
    score = getattr(spec, "score", None)
    if "score" in found and isinstance(score, ScoreSpec):
        found["score"] = registry.registration(score).label(score)
    return found
