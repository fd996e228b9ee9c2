"""Arguments passed to `lightning.Trainer`, under Lightning's own names."""

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from schemas._base import FieldError, PositiveInt, Spec

Precision = Literal["32-true", "32", "bf16-mixed", "16-mixed", "bf16-true", "64-true"]
DeviceIndex = Annotated[int, Field(ge=0)]
Fraction = Annotated[float, Field(gt=0.0, le=1.0)]


class TrainerSpec(Spec):
    accelerator: Literal["auto", "cpu", "gpu", "cuda", "mps"] = "auto"
    devices: PositiveInt | Literal["auto"] | Annotated[list[DeviceIndex], Field(min_length=1)] = "auto"
    strategy: Literal["auto", "ddp", "ddp_spawn", "ddp_find_unused_parameters_true", "fsdp"] = "auto"
    num_nodes: PositiveInt = 1
    precision: Precision = "32-true"
    max_steps: PositiveInt = 100_000
    max_time: Annotated[str, Field(pattern=r"^\d{2}:\d{2}:\d{2}:\d{2}$")] | None = None  # DD:HH:MM:SS
    val_check_interval: PositiveInt | None = 1000  # in optimizer steps
    log_every_n_steps: PositiveInt = 50
    gradient_clip_val: float | None = Field(default=None, gt=0.0)
    num_sanity_val_steps: int = Field(default=0, ge=-1)
    limit_val_batches: PositiveInt | Fraction | None = None  # batches, or a fraction of them
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
