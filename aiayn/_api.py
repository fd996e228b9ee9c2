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
    """The experiment YAML at `path` with `overrides`, resolved and validated.

    :param path: an experiment file (its `extends` chain is followed)
    :param overrides: KEY=VALUE strings, as `aiayn validate` takes them (`dims.h=16`)
    :param registry: the registrations its types are read with (default: `load_registry()`,
        aiayn's own blocks and the installed plugins)
    :returns: the ExperimentSpec
    :raises UserError: every error, by its YAML path and where it was set"""
    return config.load_experiment(
        path, overrides, registry=registry if registry is not None else default_registry(), source="in overrides"
    )
