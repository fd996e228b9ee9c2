"""What Lightning sets on its Trainer while it runs, which its type hints do not declare (the
callbacks, the datamodule, log_every_n_steps): read here, typed, so that the rest of the code
type-checks without an ignore."""

from typing import Any, cast

import lightning as L


def callbacks_of(trainer: L.Trainer) -> list[L.Callback]:
    return cast(list[L.Callback], getattr(trainer, "callbacks"))


def datamodule_of(trainer: L.Trainer) -> Any:
    """The run's TranslationDataModule (typed Any: builder.data's class, imported by its users)."""
    return getattr(trainer, "datamodule")


def log_every_n_steps(trainer: L.Trainer) -> int:
    return int(getattr(trainer, "log_every_n_steps"))
