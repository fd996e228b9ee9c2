"""Optuna's journal storage and pruners, as a sweep's search (builder/sweep/search.py, which asks
and tells) and its trial processes (builder/train/pruning.py, which report) both open them."""

from pathlib import Path
from typing import Any

from aiayn.schemas.search import PrunerSpec

ENV = "AIAYN_SEARCH"  # set by the sweep for a search trial's process: its study and trial (JSON)


def storage(journal: str | Path) -> Any:
    """The study journal file (Optuna's JournalStorage): processes share it with no server."""
    import optuna
    from optuna.storages.journal import JournalFileBackend

    return optuna.storages.JournalStorage(JournalFileBackend(str(journal)))


def make_pruner(spec: PrunerSpec) -> Any:
    import optuna

    if spec.type == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=spec.n_startup_trials, n_warmup_steps=spec.n_warmup_steps)
    if spec.type == "successive_halving":
        return optuna.pruners.SuccessiveHalvingPruner(reduction_factor=spec.reduction_factor)
    return optuna.pruners.NopPruner()
