"""A sweep: variants of a base experiment, crossed with a grid and repeated over seeds (Table 3).

```yaml
name: table3                     # runs/<name>/<trial>/version_<n>
base: base.yaml                  # relative to this file
variants:                        # each: an experiment file, a list of overrides, or a mapping
  - {}                           #   the base itself
  - table3/a_h1.yaml             #   an experiment file (its name names the variant)
  - [dims.h=2, dims.d_k=256]     #   overrides of the base (named base-h2-d_k256)
  - {name: small, overrides: [dims.N=2]}
grid: {dims.P_drop: [0.0, 0.2]}  # every variant x every point of the grid
seeds: [1, 2]                    # every trial once per seed (train.seed)
overrides: [trainer.max_steps=1000]   # applied to every trial, after the variant's own
launcher: {type: local, parallel: 2, gpus_per_trial: 1}
keep: all                        # what a finished trial's checkpoints/ keeps: all, last or none
```
"""

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from aiayn.schemas._base import DOTLIST_KEY, FieldError, PositiveInt, Seed, Spec
from aiayn.schemas.search import SearchSpec

NAME_PATTERN = r"^[A-Za-z0-9._\-]+$"
# What a sweep sets itself: the trial's name and its seed.
RESERVED_KEYS = {"name": "trials are named by the sweep", "train.seed": "use the sweep's `seeds: [...]`"}

Scalar = bool | int | float | str | None


def _check_overrides(items: tuple[str, ...], where: str) -> tuple[str, ...]:
    for i, item in enumerate(items):
        key, sep, _ = item.partition("=")
        if not sep or not DOTLIST_KEY.match(key):
            raise FieldError(f"{where}[{i}]", f"override {item!r} is not KEY=VALUE with a dotted key, e.g. dims.h=16")
        if key in RESERVED_KEYS:
            raise FieldError(f"{where}[{i}]", f"override {item!r} sets {key}, which {RESERVED_KEYS[key]}")
    return items


class VariantSpec(Spec):
    """One variant: an experiment file (None: the sweep's base) with overrides. A variant made by
    overrides of another experiment is not a row of the paper: its `reported` numbers are
    cleared unless the overrides set them."""

    name: str | None = Field(default=None, pattern=NAME_PATTERN)  # None: from the experiment and overrides
    experiment: str | None = None  # relative to the sweep file
    overrides: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _shorthands(cls, value: Any) -> Any:
        """`path.yaml` -> {experiment: path.yaml}; `[k=v, ...]` -> {overrides: [...]}; `{}`: the base."""
        if isinstance(value, str):
            return {"experiment": value}
        if isinstance(value, (list, tuple)):
            return {"overrides": value}
        if value is None:
            return {}
        if not isinstance(value, (dict, VariantSpec)):
            raise ValueError(
                "a variant is an experiment file, a list of overrides, or a mapping with name, "
                f"experiment and overrides; got {value!r}"
            )
        return value

    @model_validator(mode="after")
    def _overrides(self) -> "VariantSpec":
        _check_overrides(self.overrides, "overrides")
        return self


class LocalLauncherSpec(Spec):
    """Trials as subprocesses of `aiayn sweep`, `parallel` at a time. gpus_per_trial k: each trial
    gets k GPUs (CUDA_VISIBLE_DEVICES) and trainer.devices=k, shared with at most trials_per_gpu - 1
    other trials; 0: CPU only; None: the experiment's trainer settings, unchanged."""

    type: Literal["local"] = "local"
    parallel: PositiveInt = 1
    gpus_per_trial: int | None = Field(default=None, ge=0)
    # small trials (a Multi30k model uses ~1% of an H100) share a GPU: each slot of
    # gpus_per_trial GPUs takes up to this many trials at once
    trials_per_gpu: PositiveInt = 1

    @model_validator(mode="after")
    def _packing_needs_gpus(self) -> "LocalLauncherSpec":
        if self.trials_per_gpu > 1 and not self.gpus_per_trial:
            raise FieldError(
                "trials_per_gpu",
                f"packs trials onto GPUs, but gpus_per_trial is {self.gpus_per_trial}; "
                "set gpus_per_trial to 1 (or more), or parallel for CPU trials",
            )
        return self


class SlurmLauncherSpec(Spec):
    """One job array through submitit, a task per trial; a job runs the same `aiayn train` command
    as a local trial, one SLURM task per device so Lightning's SLURM environment sets the ranks.
    Jobs are requeueable: a preempted or requeued trial resumes from its checkpoint, and one
    signalled (USR1) signal_delay_s before its time limit saves and requeues itself."""

    type: Literal["slurm"] = "slurm"
    cluster: Literal["slurm", "local", "debug"] = "slurm"  # submitit's executor; local: no cluster needed
    partition: str | None = None
    timeout_min: PositiveInt = 24 * 60
    nodes: PositiveInt = 1
    gpus_per_node: int = Field(default=8, ge=0)
    tasks_per_node: PositiveInt | None = None  # processes (DDP ranks) per node; default one per GPU, 1 on CPU
    cpus_per_task: PositiveInt = 8
    mem_gb: PositiveInt | None = None
    array_parallelism: PositiveInt | None = None  # at most this many trials running at once
    additional: dict[str, str | int | float | bool] = {}  # more #SBATCH options, e.g. {account: nlp}
    setup: tuple[str, ...] = ()  # shell lines run before the trial, e.g. "module load cuda"
    # --signal=USR1@this: time for the step (and a validation) under way to end, and the save after it
    signal_delay_s: PositiveInt = 120

    @property
    def tasks(self) -> int:
        return self.tasks_per_node or max(self.gpus_per_node, 1)

    @model_validator(mode="after")
    def _one_task_per_gpu(self) -> "SlurmLauncherSpec":
        if self.gpus_per_node and self.tasks_per_node not in (None, self.gpus_per_node):
            raise FieldError(
                "tasks_per_node",
                f"is {self.tasks_per_node} but gpus_per_node is {self.gpus_per_node}; Lightning runs one "
                "task per GPU: leave tasks_per_node out, or set it to gpus_per_node",
            )
        return self


LauncherSpec = Annotated[LocalLauncherSpec | SlurmLauncherSpec, Field(discriminator="type")]


class SweepSpec(Spec):
    name: str = Field(min_length=1, pattern=NAME_PATTERN)
    description: str = ""
    base: str  # an experiment file, relative to the sweep file
    variants: tuple[VariantSpec, ...] = ()  # none: the base alone
    grid: dict[str, tuple[Scalar, ...]] = {}  # dotted key -> values; every combination
    seeds: tuple[Seed, ...] = (1,)
    overrides: tuple[str, ...] = ()  # every trial, after its variant's and the grid's
    launcher: LauncherSpec = LocalLauncherSpec()
    search: SearchSpec | None = None  # tune each variant with Optuna, then train the best with the seeds
    # what the final runs' checkpoints/ keep once the sweep has written its table: all (every step
    # file it kept), last (last.ckpt, and averaged.ckpt where it averaged: the run's model, resumable)
    # or none (its results, translations and events only). A search's trials keep none.
    keep: Literal["all", "last", "none"] = "all"

    @model_validator(mode="after")
    def _check(self) -> "SweepSpec":
        _check_overrides(self.overrides, "overrides")
        if self.search is not None:
            if self.grid:
                raise FieldError("search", "and grid both choose settings; put the grid's keys in search.params as categorical")
            for key in self.search.params:
                if key in RESERVED_KEYS:
                    raise FieldError(f"search.params.{key}", f"the search sets {key}, which {RESERVED_KEYS[key]}")
        for key, values in self.grid.items():
            if not DOTLIST_KEY.match(key):
                raise FieldError(f"grid.{key}", f"{key!r} is not a dotted key such as dims.h")
            if key in RESERVED_KEYS:
                raise FieldError(f"grid.{key}", f"the grid sets {key}, which {RESERVED_KEYS[key]}")
            if not values:
                raise FieldError(f"grid.{key}", "an empty list of values would make no trial; give at least one")
        if not self.seeds:
            raise FieldError("seeds", "an empty list of seeds would make no trial; give at least one, e.g. [1]")
        repeated = sorted({s for s in self.seeds if self.seeds.count(s) > 1})
        if repeated:
            raise FieldError("seeds", f"seed {repeated[0]} is listed more than once; each seed makes one trial")
        if self.search is not None and self.search.trial_seed in self.seeds:
            raise FieldError(
                "search.trial_seed",
                f"{self.search.trial_seed} is one of the sweep's seeds {list(self.seeds)}, so a final run would train a "
                "search trial again; give another, or null for the first seed above them",
            )
        return self

    @property
    def trial_seed(self) -> int:
        """train.seed of the search's trials: search.trial_seed, else the first above the seeds."""
        given = self.search.trial_seed if self.search is not None else None
        return given if given is not None else max(self.seeds) + 1

    @property
    def grid_points(self) -> list[dict[str, Scalar]]:
        """Every combination of the grid's values, the last key varying fastest."""
        points: list[dict[str, Scalar]] = [{}]
        for key, values in self.grid.items():
            points = [{**p, key: v} for p in points for v in values]
        return points

    @property
    def all_variants(self) -> tuple[VariantSpec, ...]:
        return self.variants or (VariantSpec(),)
