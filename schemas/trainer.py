"""Arguments passed to `lightning.Trainer`, under Lightning's own names."""

from typing import Any, Literal

from pydantic import Field, model_validator

from schemas._base import FieldError, PositiveInt, Spec

Precision = Literal["32-true", "32", "bf16-mixed", "16-mixed", "bf16-true", "64-true"]


class TrainerSpec(Spec):
    accelerator: str = "auto"
    devices: int | str | list[int] = "auto"
    strategy: Literal["auto", "ddp", "ddp_spawn", "ddp_find_unused_parameters_true", "fsdp"] = "auto"
    num_nodes: PositiveInt = 1
    precision: Precision = "32-true"
    max_steps: PositiveInt = 100_000
    max_time: str | None = None  # "DD:HH:MM:SS"
    val_check_interval: PositiveInt | None = 1000  # in optimizer steps
    log_every_n_steps: PositiveInt = 50
    gradient_clip_val: float | None = Field(default=None, gt=0.0)
    num_sanity_val_steps: int = Field(default=0, ge=-1)
    limit_val_batches: PositiveInt | float | None = None
    deterministic: bool = False
    enable_progress_bar: bool = True

    @model_validator(mode="before")
    @classmethod
    def _derived_arguments(cls, data: Any) -> Any:
        if isinstance(data, dict) and "accumulate_grad_batches" in data:
            raise FieldError(
                "accumulate_grad_batches",
                "accumulate_grad_batches is derived from train.tokens_per_step, "
                "train.max_tokens_per_batch and devices x num_nodes, so a result does not depend "
                "on how many GPUs ran it; set train.max_tokens_per_batch instead"
            )
        return data
