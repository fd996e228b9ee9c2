"""A sweep file -> its trials (variant x grid point x seed), each a validated experiment, and what
each needs now: a new run, a resumed run, or nothing (a finished run of the same config)."""

import re
import typing
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pydantic import ValidationError

from aiayn.builder.decode.checkpoint import source_model
from aiayn.builder.errors import UserError, resolved
from aiayn.builder.plugins import default_registry
from aiayn.builder.registry import Registry
from aiayn.builder.run.atomic import write_json
from aiayn.builder.run.config import blame_override, config_hash, load_config, load_experiment, stored_spec
from aiayn.builder.run.inherit import first_line, read_yaml
from aiayn.builder.run.jsonfile import read_json
from aiayn.builder.run.rundir import RunDir
from aiayn.builder.run.validation import format_validation_error
from aiayn.schemas.experiment import ExperimentSpec
from aiayn.schemas.sweep import DOTLIST_KEY, LocalLauncherSpec, Scalar, SlurmLauncherSpec, SweepSpec

SWEEP_PREFIX = "sweep."  # `aiayn sweep S.yaml sweep.launcher.parallel=2` changes the sweep file itself
TRIAL_FILE = "trial.json"  # in runs/<sweep>/<trial>/: the config hash and the run directory it ran in


@dataclass(frozen=True)
class Trial:
    name: str  # <variant>-seed<seed>, the experiment's name and its directory under the sweep's
    variant: str
    seed: int
    experiment: Path
    changes: tuple[str, ...]  # the variant's overrides and the grid point's
    overrides: tuple[str, ...]  # all that `aiayn train <experiment>` is given
    spec: ExperimentSpec

    @property
    def config_hash(self) -> str:
        return config_hash(self.spec)


@dataclass(frozen=True)
class TrialState:
    action: Literal["run", "resume", "skip"]
    run_dir: Path  # where the trial ran (skip), runs on (resume) or will run (run; not created yet)


# ---- the sweep file ----------------------------------------------------------------------


def split_overrides(overrides: typing.Sequence[str]) -> tuple[list[str], list[str]]:
    """(changes to the sweep file: `sweep.<key>=...` without the prefix, overrides of every trial)."""
    sweep = [o.removeprefix(SWEEP_PREFIX) for o in overrides if o.startswith(SWEEP_PREFIX)]
    return sweep, [o for o in overrides if not o.startswith(SWEEP_PREFIX)]


def load_sweep(path: str | Path, overrides: typing.Sequence[str] = ()) -> SweepSpec:
    """The validated sweep file, with `overrides` (dotlist, without the `sweep.` prefix) applied."""
    path = Path(path)
    config = _read(path)
    for item in overrides:
        key, sep, _ = item.partition("=")
        if not sep or not DOTLIST_KEY.match(key):
            raise UserError(f"override {SWEEP_PREFIX}{item!r} is not {SWEEP_PREFIX}KEY=VALUE, e.g. sweep.launcher.parallel=2")
        try:  # replace, not merge: `sweep.grid={}` empties the grid
            _set(config, key, OmegaConf.from_dotlist([f"value={item.partition('=')[2]}"]).value, item)
        except (OmegaConfBaseException, yaml.YAMLError) as e:
            raise UserError(f"override {SWEEP_PREFIX}{item}: {first_line(e)}") from None
    try:
        data = OmegaConf.to_container(config, resolve=True)
    except OmegaConfBaseException as e:
        raise UserError(f"{path}: {getattr(e, 'full_key', '?')}: cannot resolve interpolation: {first_line(e)}") from None
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as e:
        if _is_experiment(data):  # every key of it an error: say what the file is instead
            raise UserError(
                f"{path} is an experiment, not a sweep: train it with `aiayn train {path}`, or sweep it from a sweep "
                f"file's `base: {path.name}`"
            ) from None
        given = {item.partition("=")[0]: SWEEP_PREFIX + item for item in overrides}
        lines = [f"  {blame_override(line, given)}" for line in format_validation_error(e, root=SweepSpec)]
        noun = "error" if len(lines) == 1 else "errors"
        raise UserError(f"{path} is not a valid sweep ({len(lines)} {noun}):\n" + "\n".join(lines)) from None


EXPERIMENT_KEYS = ("extends", "dims", "model", "train", "trainer", "data", "decode")


def _is_experiment(data: Any) -> bool:
    """An experiment given where a sweep file was wanted."""
    return isinstance(data, dict) and "base" not in data and any(key in data for key in EXPERIMENT_KEYS)


LAUNCHERS: dict[str, type[LocalLauncherSpec] | type[SlurmLauncherSpec]] = {"local": LocalLauncherSpec, "slurm": SlurmLauncherSpec}


def _set(config: DictConfig, key: str, value: Any, item: str) -> None:
    """Sets `key` of the sweep file to `value`. The searched params' names are dotted keys of the
    experiment: `search.params.train.lr_schedule.factor.low` is the key `low` of the param
    `train.lr_schedule.factor` (`...factor={...}` the whole param); a param the file does not
    search yet is a message."""
    prefix = "search.params."
    kind = LAUNCHERS.get(str(value)) if key == "launcher.type" else None
    if kind is not None and isinstance(config.get("launcher"), DictConfig):  # a new kind keeps only the keys it has
        config.launcher = {k: v for k, v in config.launcher.items() if k in kind.model_fields}
    if not key.startswith(prefix):
        OmegaConf.update(config, key, value, merge=False)
        return
    params = OmegaConf.select(config, "search.params")
    rest, known = key.removeprefix(prefix), [str(k) for k in params.keys()] if isinstance(params, DictConfig) else []
    for name in sorted(known, key=len, reverse=True):  # the longest first: `a.b` before `a`
        if rest == name:
            params[name] = value
            return
        if rest.startswith(f"{name}."):
            OmegaConf.update(params[name], rest.removeprefix(f"{name}."), value, merge=False)
            return
    raise UserError(
        f"override {SWEEP_PREFIX}{item}: a searched parameter's name is a dotted key of the experiment, so an override "
        f"can set only those the sweep file searches ({', '.join(known) or 'none'}), as {SWEEP_PREFIX}{prefix}NAME.low=... "
        "or NAME={...}; add a new one in the file"
    )


def _read(path: Path) -> DictConfig:
    return read_yaml(path, "a sweep must be a YAML mapping (name, base, variants, ...)")


# ---- trials ----------------------------------------------------------------------------


def expand(
    sweep: SweepSpec,
    sweep_path: str | Path,
    overrides: typing.Sequence[str] = (),
    tuned: dict[str, list[str]] | None = None,
    *,
    registry: Registry | None = None,
) -> list[Trial]:
    """Every trial of the sweep, in order: variants, then grid points, then seeds. Each trial's
    experiment is validated here, so a typo stops the sweep before anything runs. `tuned`:
    {variant: the settings its search found best}, applied after the variant's own. `registry`:
    what the experiments are read with (default: aiayn.load_registry())."""
    registry = registry if registry is not None else default_registry()
    sweep_path = Path(sweep_path)
    here = sweep_path.parent
    trials: list[Trial] = []
    origin: dict[str, str] = {}
    errors: list[str] = []
    for i, variant in enumerate(sweep.all_variants):
        experiment = _variant_file(sweep_path, here / (variant.experiment or sweep.base), i if variant.experiment else None)
        stem = variant.name or "-".join([_experiment_name(experiment, registry), *(_label(o) for o in variant.overrides)])
        for point in sweep.grid_points:
            grid = [f"{key}={_dotlist_value(value)}" for key, value in point.items()]
            name = "-".join([stem, *(_label(g) for g in grid)])
            changes = [*variant.overrides, *grid, *(tuned or {}).get(name, [])]
            for seed in sweep.seeds:
                trial = f"{name}-seed{seed}"
                _claim(origin, trial, f"variants[{i}]" if sweep.variants else "base", sweep_path)
                given = (
                    *(["reported=null"] if changes else []),  # a changed experiment is not the paper's row
                    *changes,
                    *sweep.overrides,
                    *overrides,
                    f"train.seed={seed}",
                    f"name={trial}",
                )
                try:
                    spec = _trial_experiment(experiment, given, registry)
                except UserError as e:
                    errors.append(f"  {trial}: " + str(e).replace("\n", "\n  "))
                    continue
                trials.append(Trial(trial, name, seed, experiment, tuple(changes), given, spec))
    if errors:
        raise UserError(
            f"{sweep_path}: {len(errors)} of {len(origin)} trials are not valid experiments; nothing was run:\n"
            + "\n".join(errors)
        )
    return trials


def _claim(origin: dict[str, str], trial: str, label: str, sweep_path: Path) -> None:
    """Record that `label` makes the trial named `trial`; a name two variants make is an error."""
    if trial in origin:
        raise UserError(
            f"{sweep_path}: {origin[trial]} and {label} both make a trial named {trial!r}; "
            "give the variants distinct names with `name:`"
        )
    origin[trial] = label


def _trial_experiment(experiment: Path, given: typing.Sequence[str], registry: Registry) -> ExperimentSpec:
    """A trial's experiment: its file with the sweep's overrides, its init_from's model read where it takes one."""
    return load_experiment(
        experiment, given, registry=registry, source="by the sweep", model_of=partial(source_model, registry=registry)
    )


def _variant_file(sweep_path: Path, experiment: Path, variant: int | None) -> Path:
    """The experiment file of a variant (None: the base), or a UserError naming where it was given."""
    if not experiment.is_file():
        resolved(experiment)  # a link that leads back to itself is named as one
        where = f"variants[{variant}].experiment" if variant is not None else "base"
        raise UserError(f"{sweep_path}: {where}: {experiment} does not exist")
    return experiment


def _experiment_name(path: Path, registry: Registry) -> str:
    name = load_config(path, registry=registry).get("name")
    return str(name) if name else path.stem


def _label(override: str) -> str:
    """`dims.d_k=64` -> `d_k64`: the last key and the value, as a name may spell them."""
    key, _, value = override.partition("=")
    leaf = re.sub(r"\[\d+\]$", "", key).rpartition(".")[2]
    return re.sub(r"[^A-Za-z0-9._\-]", "_", f"{leaf}{value}")


def _dotlist_value(value: Scalar) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# ---- what each trial needs ---------------------------------------------------------------


def state(trial: Trial, sweep_dir: Path, registry: Registry) -> TrialState:
    """skip: the trial's run trained this experiment and finished (results.json); resume: it has
    a checkpoint; run: anything else, in a new version directory. The run trained this
    experiment where trial.json holds its hash, or where the run's config.yaml, read by this
    release, is it: a release that adds a field (with a default that keeps the old behaviour)
    changes every hash, and would otherwise train a finished sweep again."""
    trial_dir = sweep_dir / trial.name
    record = read_trial_record(trial_dir)
    if record:
        run = RunDir(trial_dir / str(record.get("run_dir")))
        if record.get("config_hash") == trial.config_hash or _stored_hash(run, registry) == trial.config_hash:
            if run.results_file.is_file():
                return TrialState("skip", run.path)
            if run.has_checkpoint:
                return TrialState("resume", run.path)
    return TrialState("run", RunDir.next_in(trial_dir).path)


def _stored_hash(run: RunDir, registry: Registry) -> str | None:
    try:
        spec = stored_spec(run.config, registry)
    except UserError:  # an unreadable config.yaml: not this experiment's run
        return None
    return config_hash(spec) if spec else None


def read_trial_record(trial_dir: Path) -> dict[str, Any] | None:
    try:
        record = read_json(trial_dir / TRIAL_FILE)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def write_trial_record(trial: Trial, run_dir: Path) -> None:
    write_json(
        run_dir.parent / TRIAL_FILE,
        {
            "trial": trial.name,
            "variant": trial.variant,
            "seed": trial.seed,
            "experiment": str(trial.experiment),
            "overrides": list(trial.overrides),
            "config_hash": trial.config_hash,
            "run_dir": run_dir.name,
        },
    )
