"""The first steps of a run compute finite numbers, or a message says which block does not.

A setting can validate and still make the model compute NaN or inf: a score step's bias or a
soft-cap at the edge of what the maths can bear, a learning rate that throws the weights off in
one update. The first two training steps of a session (before the first update, and after it)
read their loss back once; where it is not finite, the batch runs again with a hook on every
sub-layer, and the message names the first whose output is not finite by its YAML path, with the
settings it departs from its defaults by. Training stops there (exit 2), before a checkpoint.
"""

from typing import Any

import torch
from torch import Tensor, nn

from aiayn.schemas.experiment import ExperimentSpec
from aiayn.schemas.stacks import StackSpec

CHECKED_STEPS = 2  # the loss of the first step (the weights as initialised or loaded) and of the second (after one update)


def sublayer_path(spec: ExperimentSpec, name: str) -> str | None:
    """The YAML path of the sub-layer module `name` (`encoder.layers.3.sublayers.1.sublayer`:
    model.encoder.layer[1], or model.encoder.overrides.3[1] where layer 3 is overridden), or None."""
    parts = name.split(".")
    if len(parts) != 6 or parts[1] != "layers" or parts[3] != "sublayers" or parts[5] != "sublayer":
        return None
    stack: StackSpec | None = getattr(spec.model, parts[0], None)
    if stack is None:
        return None
    layer, sub = int(parts[2]), int(parts[4])
    return f"model.{parts[0]}.{f'overrides.{layer}' if layer in stack.overrides else 'layer'}[{sub}]"


def sublayer_spec(spec: ExperimentSpec, name: str) -> Any:
    """The spec of the sub-layer module `name`."""
    parts = name.split(".")
    return getattr(spec.model, parts[0]).layers[int(parts[2])][int(parts[4])]


def non_finite_message(spec: ExperimentSpec, step: int, loss: float, model: nn.Module, culprit: str | None) -> str:
    """What the message says: the first sub-layer whose output is not finite and its settings, or
    the weights an update made non-finite, or that the loss itself overflowed."""
    head = f"the loss of training step {step + 1} is {loss}"
    lr = f"train.lr_schedule.factor ({spec.train.lr_schedule.factor:g})"
    bad = sum(int(not bool(torch.isfinite(p).all())) for p in model.parameters())
    if bad and step:
        return f"{head}: the update before it made {bad} weight tensors non-finite; lower {lr}, or check train.optimizer"
    if bad:
        return f"{head}: {bad} of the weight tensors it starts from are not finite; start from another model (init_from)"
    if culprit is None:
        return f"{head}, though every sub-layer's output is finite: the output projection or the loss overflowed; lower {lr}"
    sub = sublayer_spec(spec, culprit)
    changed = {
        k: getattr(sub, k) for k, f in type(sub).model_fields.items() if not f.is_required() and getattr(sub, k) != f.default
    }
    settings = f" with {', '.join(f'{k} {v}' for k, v in changed.items())}" if changed else ""
    where = f"{sublayer_path(spec, culprit)} ({sub.type}{settings}; layer {culprit.split('.')[2]} of the {culprit.split('.')[0]})"
    if step:
        return f"{head}: after {step} update{'s' if step > 1 else ''}, {where} computes non-finite values; lower {lr}, or change its settings"
    return f"{head}: {where} computes non-finite values; change its settings"


def first_non_finite(model: nn.Module, run: Any) -> str | None:
    """The name of the first sub-layer (in the order they run) whose output in `run()` is not finite."""
    found: list[str] = []
    handles = []
    for name, module in model.named_modules():
        if name.endswith(".sublayer"):

            def hook(_: nn.Module, __: Any, out: Any, name: str = name) -> None:
                if not found and isinstance(out, Tensor) and not bool(torch.isfinite(out).all()):
                    found.append(name)

            handles.append(module.register_forward_hook(hook))
    try:
        with torch.no_grad():
            run()
    finally:
        for handle in handles:
            handle.remove()
    return found[0] if found else None
