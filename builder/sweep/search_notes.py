"""What a search's numbers can and cannot say, written under the results table: per variant its
best settings (named where they lie at a range's edge), its trials finished, pruned and failed,
the sampler (a TPE search shorter than TPE's random start-up is a random search), and the
parameters' importances only where enough trials finished for them to mean something."""

import math
from pathlib import Path
from typing import Any

from aiayn.builder.run.jsonfile import read_json
from aiayn.builder.run.study import storage
from aiayn.builder.sweep.search import JOURNAL
from aiayn.schemas.search import CategoricalParam, IntParam, SearchSpec

TPE_STARTUP = 10  # Optuna's TPESampler(n_startup_trials=10): its first trials are drawn at random
MIN_FOR_IMPORTANCE = 10  # finished trials a study needs before its fANOVA importances are shown
EDGE = 0.02  # a float within 2% of its range (of its log range, on a log scale) is at the edge


def startup_note(search: SearchSpec) -> str | None:
    """One line where TPE never leaves its random start-up: the search is a random search."""
    if search.sampler != "tpe" or search.n_trials > TPE_STARTUP:
        return None
    return (
        f"search.sampler: tpe with {search.n_trials} trials a variant never leaves TPE's {TPE_STARTUP} random start-up "
        "trials: this is a random search (give n_trials > 10 for TPE to model anything, or say sampler: random)"
    )


def edge_note(param: Any, value: Any) -> str | None:
    """Where a best value lies at its range's edge (the optimum may lie beyond): "low edge of [a, b]"."""
    if isinstance(param, CategoricalParam) or not isinstance(value, (int, float)):
        return None
    low, high = param.low, param.high
    if isinstance(param, IntParam):
        at_low, at_high = value <= low, value >= high
    else:
        scale = (lambda x: math.log(x)) if param.log else (lambda x: x)
        span = scale(high) - scale(low)
        at_low = span > 0 and (scale(value) - scale(low)) <= EDGE * span
        at_high = span > 0 and (scale(high) - scale(value)) <= EDGE * span
    if not (at_low or at_high):
        return None
    return f"at the {'low' if at_low else 'high'} edge of [{low:g}, {high:g}]: the best may lie beyond it"


def recorded_search(directory: Path) -> SearchSpec | None:
    """The search a sweep ran (sweep.json records it), if any."""
    try:
        return SearchSpec.model_validate(read_json(directory / "sweep.json")["search"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def short(value: Any) -> str:
    """A value as the results show it: a float rounded to 4 significant digits, written as Python
    writes that float (0.04403, 0.0, 1e-05; the CSV keeps every digit)."""
    return repr(float(f"{value:.4g}")) if isinstance(value, float) else str(value)


def search_section(directory: Path) -> str:
    """The search section of results.md ("" where the sweep did not search)."""
    import optuna

    journal = directory / JOURNAL
    if not journal.is_file():
        return ""
    search = recorded_search(directory)
    lines = ["## Search", ""]
    if search is not None:
        lines.append(
            f"Each variant tuned on the validation split's {search.metric.upper()} ({search.direction}d): {search.n_trials} "
            f"trials a variant, {search.sampler} sampler (seed {search.seed}), {search.pruner.type} pruner."
        )
        if note := startup_note(search):
            lines += ["", note + "."]
        lines.append("")
    lines += ["| variant | finished | pruned | failed | best | settings |", "|---|---|---|---|---|---|"]
    notes = _StudyNotes()
    for summary in optuna.get_all_study_summaries(storage(journal)):
        lines.append(notes.row(optuna.load_study(study_name=summary.study_name, storage=storage(journal)), search))
    return "\n".join([*lines, "", *notes.lines()])


class _StudyNotes:
    """What the search section says under its table: best values at an edge of their range, and
    the parameters' importances (where enough trials finished)."""

    def __init__(self) -> None:
        self.edges: list[str] = []
        self.importances: list[str] = []
        self.few: list[str] = []

    def row(self, study: Any, search: SearchSpec | None) -> str:
        """The study's row of the table; its notes kept for `lines`."""
        import optuna

        name, trials = study.study_name, study.get_trials(deepcopy=False)
        complete = [t for t in trials if t.state.name == "COMPLETE"]
        pruned = sum(t.state.name == "PRUNED" for t in trials)
        if not complete:
            return f"| {name} | 0 | {pruned} | {len(trials) - pruned} |  |  |"
        best = study.best_trial
        for key, value in best.params.items():
            note = edge_note(search.params[key], value) if search is not None and key in search.params else None
            if note:
                self.edges.append(f"{name}'s {key}={short(value)} is {note}")
        if len(complete) < MIN_FOR_IMPORTANCE:
            self.few.append(f"{name} ({len(complete)})")
        else:
            try:
                found = optuna.importance.get_param_importances(study)
            except (RuntimeError, ValueError, ImportError) as e:
                self.importances.append(f"{name}: not computed ({e})")
            else:
                self.importances.append(f"{name}: " + ", ".join(f"{k} {v:.2f}" for k, v in found.items()))
        settings = ", ".join(f"{k}={short(v)}" for k, v in best.params.items())
        return f"| {name} | {len(complete)} | {pruned} | {len(trials) - len(complete) - pruned} | {best.value:.2f} | {settings} |"

    def lines(self) -> list[str]:
        lines = []
        if self.edges:
            lines += ["Edges: " + "; ".join(self.edges) + ".", ""]
        if self.importances:
            lines += ["Importances (Optuna's fANOVA): " + "; ".join(self.importances) + ".", ""]
        if self.few:
            lines += [
                f"Importances: not shown for {', '.join(self.few)}: fewer than {MIN_FOR_IMPORTANCE} finished trials, on which an "
                "importance says little.",
                "",
            ]
        return lines
