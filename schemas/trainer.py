"""Arguments passed to `lightning.Trainer`, under Lightning's own names."""

import re
from typing import Any, Literal

from pydantic import Field, model_validator

from aiayn.schemas._base import FieldError, PositiveInt, Spec

Precision = Literal["32-true", "32", "bf16-mixed", "16-mixed", "bf16-true", "64-true"]
_MAX_TIME = re.compile(r"^\d{2}:\d{2}:\d{2}:\d{2}$")


class TrainerSpec(Spec):
    accelerator: Literal["auto", "cpu", "gpu", "cuda", "mps"] = "auto"
    devices: int | Literal["auto"] | list[int] = "auto"  # checked in _check_values, with its own message
    strategy: Literal["auto", "ddp", "ddp_find_unused_parameters_true", "fsdp"] = "auto"  # ddp_spawn: _derived_arguments
    num_nodes: PositiveInt = 1
    precision: Precision = "32-true"
    max_steps: PositiveInt = 100_000
    max_time: str | None = None  # DD:HH:MM:SS
    val_check_interval: PositiveInt | None = 1000  # in optimizer steps
    # validate at the end of every n-th epoch instead (fairseq validates once an epoch); needs
    # val_check_interval: null
    check_val_every_n_epoch: PositiveInt | None = None
    log_every_n_steps: PositiveInt = 50
    gradient_clip_val: float | None = Field(default=None, gt=0.0)
    num_sanity_val_steps: int = Field(default=0, ge=-1)
    limit_val_batches: int | float | None = None  # batches (>= 1), or a fraction of them (0, 1]
    deterministic: bool = False
    enable_progress_bar: bool = True  # a status line on a terminal, a line per tenth of the run elsewhere
    enable_model_summary: bool = False  # Lightning's module table; `aiayn show` prints the model's own

    @property
    def validates(self) -> bool:
        """Whether training validates before its end (at an interval of steps or epochs)."""
        return self.val_check_interval is not None or self.check_val_every_n_epoch is not None

    @model_validator(mode="before")
    @classmethod
    def _derived_arguments(cls, data: Any) -> Any:
        if isinstance(data, dict) and "accumulate_grad_batches" in data:
            raise FieldError(
                "accumulate_grad_batches",
                "accumulate_grad_batches is derived from train.tokens_per_step, "
                "train.max_tokens_per_batch and devices x num_nodes, so a result does not depend "
                "on how many GPUs ran it; set train.max_tokens_per_batch instead",
            )
        if isinstance(data, dict) and data.get("strategy") == "ddp_spawn":
            raise FieldError(
                "strategy",
                "ddp_spawn would send the run's model and data to processes it spawns; aiayn starts each "
                "process from the command instead, which trains the same: use trainer.strategy=ddp",
            )
        return data

    @model_validator(mode="after")
    def _check_values(self) -> "TrainerSpec":
        devices = self.devices
        if isinstance(devices, int) and devices < 1 or isinstance(devices, list) and (not devices or min(devices) < 0):
            raise FieldError(
                "devices",
                f"{devices!r} names no device; give how many (devices: 2), which ones (devices: [0, 1]) or auto",
            )
        if self.check_val_every_n_epoch is not None and self.val_check_interval is not None:
            raise FieldError(
                "check_val_every_n_epoch",
                f"validates every {self.check_val_every_n_epoch} epochs, and val_check_interval every "
                f"{self.val_check_interval} steps; set trainer.val_check_interval=null to validate by epochs",
            )
        if self.max_time is not None and not _MAX_TIME.match(self.max_time):
            raise FieldError("max_time", f"{self.max_time!r} is not DD:HH:MM:SS; e.g. 00:12:00:00 for 12 hours")
        limit = self.limit_val_batches
        if limit is not None and (limit <= 0 or isinstance(limit, float) and limit > 1):
            raise FieldError(
                "limit_val_batches",
                f"{limit!r} is neither a number of batches (an int >= 1) nor a fraction of them (a float in (0, 1])",
            )
        return self
