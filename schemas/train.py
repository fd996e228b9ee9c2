"""The training recipe (Sec. 5): loss, optimizer, learning-rate schedule, batching, checkpoints."""

import difflib
import typing
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from aiayn.schemas._base import FieldError, Float32, PositiveInt, Probability, Seed, Spec


class AdamSpec(Spec):
    type: Literal["adam"] = "adam"
    betas: tuple[Probability, Probability] = (0.9, 0.98)
    eps: Float32 = Field(default=1e-9, gt=0.0)
    weight_decay: Float32 = Field(default=0.0, ge=0.0)


class NoamSpec(Spec):
    """lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5) (Sec. 5.3, eq. 3)."""

    type: Literal["noam"] = "noam"
    factor: Float32 = Field(default=1.0, gt=0.0)
    warmup_steps: PositiveInt = 4000


class CheckpointSpec(Spec):
    """The paper wrote a checkpoint every 10 minutes and averaged the last 5 (base) or 20 (big);
    with no trigger set, a checkpoint is written every 10 minutes. Every multiple of
    every_n_train_steps (or the end of every every_n_epochs-th epoch, as fairseq's epoch
    checkpoints) gets its step<N>.ckpt, and so does the final step; keep_last of them are kept."""

    every_n_train_steps: PositiveInt | None = None
    every_n_minutes: float | None = Field(default=None, gt=0.0)
    every_n_epochs: PositiveInt | None = None
    keep_last: PositiveInt = 5

    @model_validator(mode="after")
    def _one_trigger(self) -> "CheckpointSpec":
        given = [
            (k, v) for k in ("every_n_train_steps", "every_n_minutes", "every_n_epochs") if (v := getattr(self, k)) is not None
        ]
        if len(given) > 1:
            shown = " and ".join(f"{k} ({v})" for k, v in given)
            raise FieldError(
                given[-1][0],
                f"set one of every_n_train_steps, every_n_minutes and every_n_epochs, not {shown}; set the others to null",
            )
        return self

    @property
    def minutes(self) -> float | None:
        if self.every_n_train_steps is None and self.every_n_minutes is None and self.every_n_epochs is None:
            return 10.0
        return self.every_n_minutes


class ValidationSpec(Spec):
    bleu: bool = True
    bleu_max_sentences: PositiveInt | None = None  # a fixed prefix of the valid split
    num_samples: int = Field(default=4, ge=0)  # translation samples shown in TensorBoard
    attention_maps_every: int = Field(default=5, ge=0)  # in validations; 0 turns them off
    probe_sentence: str | None = None  # None: the first validation sentence


class EarlyStoppingSpec(Spec):
    """Lightning's EarlyStopping (fairseq's --patience): training stops when `monitor` has not
    improved by more than min_delta for `patience` validations in a row."""

    monitor: Literal["loss/valid", "PPL/valid"] = "loss/valid"  # the validation's label-smoothed loss, or its perplexity
    patience: PositiveInt = 10
    min_delta: float = Field(default=0.0, ge=0.0)


CompileMode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]  # torch.compile's


class TrainSpec(Spec):
    seed: Seed = 1
    label_smoothing: Probability = 0.1  # eps_ls, spread over the V-1 non-target classes
    # a decoder-only model translating `<s> x <sep> y`: the loss on the source's tokens too (a
    # language model of the pair); false: on the target's alone, as a translation model is trained
    source_loss: bool = False
    tokens_per_step: PositiveInt = 25000  # global, per side, padded; independent of devices
    max_tokens_per_batch: PositiveInt | None = None  # per device; None: tokens_per_step
    optimizer: AdamSpec = AdamSpec()
    lr_schedule: NoamSpec = NoamSpec()
    checkpoint: CheckpointSpec = CheckpointSpec()
    validation: ValidationSpec = ValidationSpec()
    early_stopping: EarlyStoppingSpec | None = None  # None: train to trainer.max_steps (or max_time)
    # torch.compile the training step (pays on GPUs, not on CPUs): true is mode default; or one of
    # torch.compile's modes; reduce-overhead and max-autotune record CUDA graphs and need
    # data.static_shapes (builder/train/compiled.py)
    compile: bool | CompileMode = False
    # the output projection and the loss together in chunks of rows, recomputed in backward: the
    # batch's (n, V) logits are never held (less memory; the projection's FLOPs a third more)
    fused_output_loss: bool = False
    # each layer's activations recomputed in backward instead of kept (torch.utils.checkpoint, non-reentrant;
    # torchtune's enable_activation_checkpointing): the same gradients, less memory, about a third more compute
    activation_checkpointing: bool = False
    # threads of a CPU run (torch.set_num_threads); auto: $OMP_NUM_THREADS where set (a sweep's
    # share), else the cores other processes leave free, looked at again every 5 s. The count
    # changes a run's numbers in the last bits: a number (or $OMP_NUM_THREADS) repeats bit for bit
    cpu_threads: PositiveInt | Literal["auto"] = "auto"
    # Sec. 6.1: evaluate (results.json) the mean of the last K checkpoints, kept as checkpoints/averaged.ckpt
    average_last: PositiveInt | None = None
    # parameters that do not train: patterns (fnmatch) of their names in the model's state_dict
    # ("src_embed.*", "encoder.layers.0.*"); each must match one. They get no optimizer state
    freeze: tuple[str, ...] = ()

    @field_validator("compile", mode="before")
    @classmethod
    def _a_mode(cls, value: Any) -> Any:
        modes = typing.get_args(CompileMode)
        if isinstance(value, str) and value not in modes:
            close = difflib.get_close_matches(value, modes, n=1, cutoff=0.5)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise ValueError(f"{value!r} is not true, false or one of torch.compile's modes {', '.join(modes)}{hint}")
        return value

    @model_validator(mode="after")
    def _average_what_is_kept(self) -> "TrainSpec":
        k, kept = self.average_last, self.checkpoint.keep_last
        if k is not None and k > kept:
            raise FieldError(
                "average_last",
                f"averages the last {k} checkpoints but train.checkpoint.keep_last keeps {kept}; "
                f"set train.checkpoint.keep_last to at least {k}",
            )
        return self
