"""What `aiayn sweep --dry-run` prints: each trial, its size, what will happen to it and what it
changes of the sweep's base experiment (its overrides, or the settings of its own file), then the
search the trials wait for, with the ranges it tries."""

from pathlib import Path
from typing import Any

import yaml

from aiayn.builder.sweep.plan import Trial
from aiayn.schemas.search import CategoricalParam, FloatParam, IntParam
from aiayn.schemas.sweep import LocalLauncherSpec

# a variant file's keys that say what it is, not what it changes
NOT_SETTINGS = ("extends", "name", "description", "reported")


def render_plan(plan: Any) -> str:
    """The plan (runner.py's Plan) as the dry run prints it."""
    from aiayn.builder.model.size import count_params

    launcher = plan.sweep.launcher
    how = (
        f"local, {launcher.parallel} at a time"
        if isinstance(launcher, LocalLauncherSpec)
        else (f"submitit ({launcher.cluster}), {launcher.nodes} node(s) x {launcher.gpus_per_node} GPU(s) per trial")
    )
    rows = [("trial", "params", "action", "changes")]
    base = (plan.path.parent / plan.sweep.base).resolve()
    for trial, st in zip(plan.trials, plan.states):
        action = {"skip": "skip (finished)", "resume": "resume", "run": "run"}[st.action]
        changes = " ".join([*file_settings(trial, base), *trial.changes])
        rows.append((trial.name, f"{count_params(trial.spec.model):,}", f"{action} {st.run_dir}", changes))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"sweep {plan.sweep.name} ({plan.path}): {len(plan.trials)} trials in {plan.directory}, launcher {how}"]
    lines += [f"{r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}".rstrip() for r in rows]
    counts = {a: sum(s.action == a for s in plan.states) for a in ("run", "resume", "skip")}
    lines.append(f"{counts['run']} to run, {counts['resume']} to resume, {counts['skip']} finished (skipped)")
    if plan.sweep.search is not None:
        search = plan.sweep.search
        lines.append(
            f"first a search: {search.n_trials} trials per variant over {', '.join(ranges(search.params))} ({search.sampler} sampler, "
            f"{search.pruner.type} pruner, valid {search.metric.upper()}); the trials above then train each variant's best settings"
        )
    return "\n".join(lines)


def file_settings(trial: Trial, base: Path) -> list[str]:
    """A variant given as a file of its own: its name and what it sets (dims.h=1 ...), the keys that
    name it left out; nothing for the base's trials."""
    if trial.experiment.resolve() == base:
        return []
    own = yaml.safe_load(trial.experiment.read_text(encoding="utf-8")) or {}
    settings = {k: v for k, v in own.items() if k not in NOT_SETTINGS} if isinstance(own, dict) else {}
    return [f"{trial.experiment.name}:", *(f"{key}={value}" for key, value in _flat(settings))]


def _flat(tree: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out += _flat(value, f"{prefix}{key}.")
        else:
            out.append(
                (
                    f"{prefix}{key}",
                    yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix("...").strip(),
                )
            )
    return out


def ranges(params: dict[str, Any]) -> list[str]:
    """Each searched setting with what the search tries: `train.lr_schedule.factor [0.25, 2.0] log`."""
    out = []
    for key, p in params.items():
        if isinstance(p, CategoricalParam):
            out.append(f"{key} {{{', '.join(map(str, p.choices))}}}")
        elif isinstance(p, (FloatParam, IntParam)):
            step = f" step {p.step}" if isinstance(p, IntParam) and p.step != 1 else ""
            out.append(f"{key} [{p.low:g}, {p.high:g}]{' log' if p.log else ''}{step}")
        else:
            out.append(key)
    return out
