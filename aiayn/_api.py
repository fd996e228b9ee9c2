"""The public functions that read an experiment: builder/run/config.py's, with the registry made
for the caller where none is given (aiayn's own blocks and the installed plugins)."""

import typing
from pathlib import Path

from aiayn.builder.plugins import default_registry
from aiayn.builder.registry import Registry
from aiayn.builder.run import config
from aiayn.schemas.experiment import ExperimentSpec


def load_experiment(
    path: str | Path, overrides: typing.Sequence[str] = (), *, registry: Registry | None = None
) -> ExperimentSpec:
    """The experiment YAML at `path` with `overrides` (KEY=VALUE strings, as `aiayn validate`
    takes them), resolved and validated: an ExperimentSpec, or a UserError listing every error
    by its YAML path. `registry`: the registrations its types are read with (default:
    `load_registry()`, aiayn's own blocks and the installed plugins)."""
    return config.load_experiment(
        path, overrides, registry=registry if registry is not None else default_registry(), source="in overrides"
    )
