"""train.freeze: parameters that do not train, named by patterns (fnmatch) of their names in the
model's state_dict. A tied table is one parameter under two names: either name freezes it."""

from collections.abc import Sequence
from fnmatch import fnmatchcase

from torch import nn

from aiayn.builder.errors import UserError


def frozen_parameters(model: nn.Module, patterns: Sequence[str]) -> list[nn.Parameter]:
    """The parameters whose names match one of `patterns` (each once); a pattern that matches
    none is refused, naming a few names it could have meant, and so is freezing them all."""
    named = list(model.named_parameters(remove_duplicate=False))
    for pattern in patterns:
        if not any(fnmatchcase(name, pattern) for name, _ in named):
            tops = sorted({name.split(".")[0] + ".*" for name, _ in named})
            raise UserError(
                f"train.freeze: {pattern!r} matches no parameter of the model; parameter names are as its state_dict "
                f"has them (e.g. {named[0][0]}), and {', '.join(tops)} match whole parts"
            )
    found: dict[int, nn.Parameter] = {}
    for name, param in named:
        if any(fnmatchcase(name, pattern) for pattern in patterns):
            found.setdefault(id(param), param)
    if found and len(found) == len({id(p) for _, p in named}):
        raise UserError(f"train.freeze {list(patterns)} freezes every parameter of the model: nothing would train; freeze fewer")
    return list(found.values())


def freeze(model: nn.Module, patterns: Sequence[str]) -> int:
    """Turns off the gradients of the parameters `patterns` match; returns how many values that holds."""
    params = frozen_parameters(model, patterns)
    for param in params:
        param.requires_grad_(False)
    return sum(p.numel() for p in params)
