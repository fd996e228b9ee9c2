"""A sweep's `search:` block: tune each variant's settings with Optuna at the same budget.

```yaml
search:
  params:                                     # any dotted key of the experiment
    train.lr_schedule.factor: {type: float, low: 0.25, high: 4.0, log: true}
    train.lr_schedule.warmup_steps: {type: int, low: 50, high: 400, step: 50}
    model.encoder.add_norm.placement: {type: categorical, choices: [post, pre]}
  n_trials: 12          # per variant
  sampler: tpe          # tpe, random or grid (grid: categorical params, or int params with a step)
  metric: bleu          # the validation BLEU (maximised) or ppl (minimised)
  pruner: {type: median, n_startup_trials: 3, n_warmup_steps: 0}   # median, successive_halving or none
  seed: 1               # the sampler's
  trial_seed: null      # train.seed of every trial; null: the first seed above the sweep's seeds
```
"""

from typing import Annotated, Literal

from pydantic import Field, model_validator

from aiayn.schemas._base import DOTLIST_KEY, FieldError, PositiveInt, Seed, Spec


class FloatParam(Spec):
    type: Literal["float"] = "float"
    low: float
    high: float
    log: bool = False

    @model_validator(mode="after")
    def _range(self) -> "FloatParam":
        _check_range(self.low, self.high, self.log)
        return self


class IntParam(Spec):
    type: Literal["int"] = "int"
    low: int
    high: int
    step: PositiveInt = 1
    log: bool = False

    @model_validator(mode="after")
    def _range(self) -> "IntParam":
        _check_range(self.low, self.high, self.log)
        if self.log and self.step != 1:
            raise FieldError("step", f"is {self.step}, but a log scale takes no step (Optuna's rule); drop one of them")
        span = self.high - self.low
        if span % self.step:
            last = self.low + span // self.step * self.step
            raise FieldError(
                "step",
                f"{self.step} does not divide high - low ({span}), so the range would end at {last}, not {self.high} "
                f"(Optuna shortens it); set high to {last} or {last + self.step}",
            )
        return self

    @property
    def values(self) -> list[int]:
        """The grid of the range (low, low + step, ..., high)."""
        return list(range(self.low, self.high + 1, self.step))


class CategoricalParam(Spec):
    type: Literal["categorical"] = "categorical"
    choices: tuple[bool | int | float | str, ...] = Field(min_length=1)


def _check_range(low: float, high: float, log: bool) -> None:
    if low > high:
        raise FieldError("low", f"{low} is above high ({high}); give low <= high")
    if log and low <= 0:
        raise FieldError("low", f"is {low}, but a log scale needs low > 0")


ParamSpec = Annotated[FloatParam | IntParam | CategoricalParam, Field(discriminator="type")]


class PrunerSpec(Spec):
    """Stops a trial whose validation metric is worse than the others' at the same step: median
    (Optuna's MedianPruner) or successive halving (SuccessiveHalvingPruner); none keeps every trial."""

    type: Literal["median", "successive_halving", "none"] = "median"
    n_startup_trials: int = Field(default=2, ge=0)  # median: trials that finish before any is pruned
    n_warmup_steps: int = Field(default=0, ge=0)  # median: steps before a trial may be pruned
    reduction_factor: int = Field(default=3, ge=2)  # successive halving


class SearchSpec(Spec):
    params: dict[str, ParamSpec] = Field(min_length=1)
    n_trials: PositiveInt = 8
    sampler: Literal["tpe", "random", "grid"] = "tpe"
    metric: Literal["bleu", "ppl"] = "bleu"
    pruner: PrunerSpec = PrunerSpec()
    seed: Seed = 1
    # train.seed of the search's trials: never one of the sweep's seeds, so that the final runs
    # (one per seed, on the best settings) are new trainings, not a trial trained again
    trial_seed: Seed | None = None

    @property
    def direction(self) -> Literal["maximize", "minimize"]:
        return "maximize" if self.metric == "bleu" else "minimize"

    @model_validator(mode="after")
    def _check(self) -> "SearchSpec":
        for key, param in self.params.items():
            if not DOTLIST_KEY.match(key):
                raise FieldError(
                    f"params.{key}", f"{key!r} is not a dotted key of the experiment, such as train.lr_schedule.factor"
                )
            if self.sampler == "grid" and isinstance(param, FloatParam):
                raise FieldError(
                    f"params.{key}", "the grid sampler needs values to enumerate: make it categorical, or an int with a step"
                )
        if self.sampler == "grid" and self.pruner.type != "none":
            raise FieldError(
                "pruner",
                f"is {self.pruner.type}, but the grid sampler runs every point: a pruned point is never "
                "revisited; set pruner: {type: none}, or use the tpe or random sampler",
            )
        return self

    def grid(self) -> dict[str, list[bool | int | float | str]]:
        """The grid sampler's search space."""
        space: dict[str, list[bool | int | float | str]] = {}
        for key, param in self.params.items():
            if isinstance(param, CategoricalParam):
                space[key] = list(param.choices)
            elif isinstance(param, IntParam):
                space[key] = list[bool | int | float | str](param.values)
        return space
