"""Finished runs (results.json) -> Table 3 of the paper: one row per variant, seeds pooled as
mean ± sample standard deviation, grouped (A)-(E) with base first and big last, the paper's
numbers beside ours. Written as markdown, CSV, a plot and each row's model figure.

The parts: rows.py collects the runs into rows and finds the base row, columns.py chooses the
columns beyond Table 3's (the switches, the settings in which the rows differ; a variant whose
layers differ within a stack is marked †), formats.py writes the markdown and the CSV, plot.py
the plot; this module ties them together for `aiayn results` and the sweep's end."""

import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from aiayn.builder.errors import UserError, resolved
from aiayn.builder.plugins import default_registry
from aiayn.builder.registry import Registry
from aiayn.builder.run.jsonfile import read_json
from aiayn.builder.run.outputs import run_of
from aiayn.builder.sweep.formats import markdown, write_csv
from aiayn.builder.sweep.rows import Row, base_differences, base_row, collect, sweep_base, sweep_order, table, with_split
from aiayn.builder.sweep.search_notes import recorded_search
from aiayn.builder.sweep.split_scores import score_runs, translations


def write_figures(rows: list[Row], folder: Path, registry: Registry) -> dict[str, str]:
    """figures/<variant>.svg: each row's model (`aiayn show --figure`), drawn from its first run's
    config.yaml; {variant: its path relative to the sweep directory}. A config this release cannot
    read has no figure."""
    from aiayn.builder.model.figure import layout, save  # matplotlib is imported only here
    from aiayn.schemas.experiment import ExperimentSpec

    made = {}
    for row in rows:
        if not row.runs:
            continue
        try:
            config = yaml.safe_load((row.runs[0][1] / "config.yaml").read_text())
            spec = ExperimentSpec.model_validate(config, context=registry.context)
        except (OSError, ValueError, yaml.YAMLError, ValidationError):
            continue
        folder.mkdir(exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", row.variant) + ".svg"
        save(layout(spec.model, title=row.variant), folder / name)
        made[row.variant] = f"{folder.name}/{name}"
    return made


def _chose(directory: Path, search: Any) -> str:
    """How a search sweep's settings were chosen, and with which seeds, from its sweep.json."""
    try:
        record = read_json(directory / "sweep.json")
        seeds = sorted({t["seed"] for t in record["trials"]})
        trial_seed = record.get("trial_seed")
    except (OSError, ValueError, KeyError, TypeError):
        return f"on which the search chose each variant's settings (by valid {search.metric.upper()})"
    trials = f" (its trials trained with seed {trial_seed})" if trial_seed is not None else ""
    return (
        f"on which the search chose each variant's settings (by valid {search.metric.upper()}); the final runs' seeds "
        f"{', '.join(map(str, seeds))} are none of the search's{trials}"
    )


def _check_directory(directory: Path) -> None:
    """DIR is a folder of runs, not a run, and the table's files can be written into it."""
    if not directory.is_dir():
        resolved(directory)  # a link that leads back to itself is named as one
        raise UserError(f"{directory}: not a directory; give a sweep's or a run root's directory, e.g. runs/table3")
    run = run_of(directory)
    if run is not None:
        raise UserError(
            f"{directory} is {'a run directory' if run == resolved(directory) else 'part of the run ' + str(run)}, which only its "
            f"training writes, and the table is written into DIR; give the folder of its runs, {run.parent}"
        )
    for name in ("results.md", "results.csv", "results.png"):
        if (directory / name).is_dir():
            raise UserError(f"{directory / name}: a folder, where aiayn results writes the table's {name}; move it away")


def write_results(
    directory: Path,
    base: str | None = None,
    split: str | None = None,
    *,
    report: Callable[[str], None] = print,
    registry: Registry | None = None,
    bleu_parts: bool = False,
) -> str:
    """results.md (with a link to each row's model figure in figures/), results.csv and
    results.png in `directory`; returns the markdown. `base`: the variant ΔBLEU is measured from
    (default: see base_row); `split`: the split ΔBLEU compares on, its translations made where
    missing (default: test for a sweep that searched, whose settings the validation split chose;
    else valid); `registry`: what reads the runs (default: aiayn.load_registry()); `bleu_parts`: a
    section of each row's BLEU in parts and the interval of its mean against the reported BLEU
    (bleu_parts.py)."""
    registry = registry if registry is not None else default_registry()
    _check_directory(directory)
    runs = collect(directory)
    if not runs:
        raise UserError(
            f"{directory}: no finished runs (no results.json under it); a run writes results.json "
            "only when its training finished: train or sweep first, or resume unfinished runs"
        )
    rows = table(runs, sweep_order(directory))
    searched = recorded_search(directory)
    split = split or ("test" if searched is not None else "valid")
    if split != "valid":
        score_runs(directory, [run for row in rows for _, run in row.runs], split, registry, report=report)
        rows = with_split(rows, directory, split)
    reference = base_row(rows, base, sweep_base(directory))
    differences = base_differences(rows, reference, directory, split)
    chose = _chose(directory, searched) if searched is not None else None
    text = markdown(rows, differences, reference, write_figures(rows, directory / "figures", registry), split=split, chose=chose)
    if (directory / "study.journal").is_file():  # a sweep that searched: what its search can say
        from aiayn.builder.sweep.search_notes import search_section  # Optuna only here

        text += "\n" + search_section(directory)
    if bleu_parts:
        from aiayn.builder.sweep import bleu_parts as parts

        saved = partial(translations, directory, split=split)  # a run's own for valid, else the cached
        text += "\n" + parts.section(rows, saved, split)
    (directory / "results.md").write_text(text)
    write_csv(rows, directory / "results.csv", differences, reference, split=split)
    from aiayn.builder.sweep.plot import plot  # matplotlib is imported only here

    plot(rows, directory / "results.png")
    return text
