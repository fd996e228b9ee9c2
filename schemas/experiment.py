"""An experiment: the model, how to train it, on what data, and how to decode."""

from typing import Literal

from pydantic import Field, model_validator

from aiayn.schemas._base import FieldError, PositiveInt, Probability, Spec
from aiayn.schemas.data import DataSpec
from aiayn.schemas.decode import DecodeSpec
from aiayn.schemas.init_from import InitFromSpec
from aiayn.schemas.model import ModelSpec
from aiayn.schemas.train import TrainSpec
from aiayn.schemas.trainer import TrainerSpec


class DimsSpec(Spec):
    """Table 3's hyperparameters in one place; the model and train sections interpolate them
    (`h: ${dims.h}`), so an ablation overrides only these."""

    N: PositiveInt | None = None
    d_model: PositiveInt | None = None
    d_ff: PositiveInt | None = None
    h: PositiveInt | None = None
    d_k: PositiveInt | None = None
    d_v: PositiveInt | None = None
    P_drop: Probability | None = None
    eps_ls: Probability | None = None
    vocab_size: PositiveInt | None = None


class ReportedSpec(Spec):
    """What the paper reported for this configuration (newstest2013 dev set for Table 3)."""

    source: str = "Vaswani et al. 2017, Table 3"
    group: Literal["base", "A", "B", "C", "D", "E", "big"] | None = None
    ppl: float | None = Field(default=None, gt=0.0)
    bleu: float | None = Field(default=None, ge=0.0)
    params_m: float | None = Field(default=None, gt=0.0)  # millions


class ExperimentSpec(Spec):
    """An experiment, validated: its model, data, training, trainer and decode sections (the YAML
    format `aiayn schema` describes); `aiayn.load_experiment` reads one from a file."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._\-]+$")
    extends: str | None = None  # consumed by the loader; kept for editors and the schema
    description: str = ""
    dims: DimsSpec = DimsSpec()
    model: ModelSpec
    train: TrainSpec = TrainSpec()
    trainer: TrainerSpec = TrainerSpec()
    data: DataSpec
    decode: DecodeSpec = DecodeSpec()
    reported: ReportedSpec | None = None
    # start from a trained model (schemas/init_from.py): a new run at step 0 whose weights are the source's
    init_from: InitFromSpec | None = None

    def _positions_needed(self) -> tuple[int, str, str]:
        """(positions the longest input needs, what needs them, why)."""
        if self.data.packing == "blocks" and self.data.block_size is not None:
            return self.data.block_size, f"data.block_size {self.data.block_size}", "a block's tokens"
        needed, why = self.model.graph.positions_needed(self)
        return needed, f"data.max_len {self.data.max_len}", why

    def _check_graph_and_data(self) -> None:
        self.model.graph.check_experiment(self)
        if self.data.packing == "blocks" and self.data.static_shapes is not None:
            raise FieldError(
                "data.static_shapes",
                "blocks of data.block_size tokens are one shape already (every batch but an epoch's last): drop "
                "data.static_shapes, or pack sentences (data.packing: sentences) to bucket them",
            )

    @property
    def cautions(self) -> list[str]:
        """What is valid but likely not meant, one line each (validate and train print them)."""
        found = []
        warmup, steps = self.train.lr_schedule.warmup_steps, self.trainer.max_steps
        if warmup > steps:
            found.append(
                f"train.lr_schedule.warmup_steps ({warmup}) is longer than the run (trainer.max_steps {steps}): the "
                "learning rate rises all the way and never decays (eq. 3)"
            )
        rotary = [
            f"{stack}.{path}"
            for stack, spec in self.model.stacks.items()
            for path, sub in spec.located()
            if getattr(sub, "rotary", None) is not None
        ]
        if rotary and self.model.positional.type != "none":
            found.append(
                f"model.{rotary[0]}.rotary rotates by position, and model.positional ({self.model.positional.type}) adds "
                "absolute positions as well; set model.positional=none for rotary alone (RoFormer's, LLaMA's)"
            )
        return found

    @property
    def task(self) -> str:
        """What the model is trained to do: translation (an encoder-decoder, or a decoder-only model
        reading `<s> x <sep> y`), or language_model (a decoder-only model of data.side's text)."""
        return self.model.graph.task(self)

    @model_validator(mode="after")
    def _check(self) -> "ExperimentSpec":
        self._check_graph_and_data()
        positional = self.model.positional
        covered, (needed, what, why) = positional.max_positions, self._positions_needed()
        if covered is not None and covered < needed:
            fix = (
                f"data.block_size <= {covered}"
                if self.data.packing == "blocks"
                else f"data.max_len <= {self.model.graph.longest_fitting(self, covered)}"
            )
            raise FieldError(
                "model.positional.max_len" if "max_len" in type(positional).model_fields else "model.positional",
                f"the {positional.type} position table has {covered} rows but {what} needs {needed} ({why}), so longer "
                f"sentences would have no position; set model.positional.max_len >= {needed} or {fix}",
            )
        if self.train.compile in ("reduce-overhead", "max-autotune") and self.data.static_shapes is None:
            raise FieldError(
                "train.compile",
                f"{self.train.compile} records CUDA graphs, one for every batch shape; set data.static_shapes "
                "(data.static_shapes.num_buckets=6, say) so that training batches take a few fixed shapes",
            )
        stopping = self.train.early_stopping
        if stopping is not None and not self.trainer.validates:
            raise FieldError(
                "train.early_stopping",
                f"patience {stopping.patience} counts validations, but training never validates (trainer.val_check_interval "
                "and trainer.check_val_every_n_epoch are null); set trainer.check_val_every_n_epoch=1 (fairseq "
                "validates once an epoch) or a trainer.val_check_interval",
            )
        if self.data.min_len > self.data.max_len:
            raise FieldError(
                "data.min_len",
                f"min_len ({self.data.min_len}) is greater than max_len ({self.data.max_len}), which would drop every sentence",
            )
        return self
