"""Finished runs (results.json) -> the rows of a results table: one a variant, its seeds' values
pooled, in Table 3's group order (base first, big last), the paper's numbers beside ours; and
the row ΔBLEU is measured from (the paper's base, else the sweep's own)."""

import collections
import os
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from aiayn.builder.data.scoring import Scoring
from aiayn.builder.errors import UserError
from aiayn.builder.run.jsonfile import read_json
from aiayn.builder.run.validation import format_validation_error
from aiayn.builder.sweep.plan import TRIAL_FILE, read_trial_record
from aiayn.builder.sweep.search import SEARCH_DIR
from aiayn.builder.sweep.significance import Difference, compare_to_base
from aiayn.builder.sweep.split_scores import bleu_of, translations
from aiayn.schemas.results import ResultsSpec

GROUPS = ["base", "A", "B", "C", "D", "E", None, "big"]  # None: not a row of the paper


COLUMNS = ["N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "eps_ls"]


SWITCHES = ["norm", "ffn", "kv_heads", "rotary", "position_bias"]  # results.json's paper columns beyond Table 3's


@dataclass(frozen=True)
class Row:
    variant: str
    group: str | None
    trials: tuple[str, ...]
    paper: dict[str, Any]  # our Table 3 columns (results.json "paper")
    steps: tuple[int, ...]
    ppl: tuple[float, ...]
    bleu: tuple[float | None, ...]  # None: a language model's run
    params: int
    reported: dict[str, Any]  # the paper's ppl, bleu, params_m (None where it has none), and its source
    runs: tuple[tuple[int | None, Path], ...] = ()  # (seed, run directory) of each trial
    config: dict[str, Any] | None = None  # the first run's config.yaml, flattened (path -> value)
    signature: str | None = None  # the first run's BLEU signature (every run of a table is scored alike)
    compared: tuple[float, ...] = ()  # BLEU of its runs on the split the table compares on, where not valid
    bpb: tuple[float | None, ...] = ()  # a language model's bits per byte (None: a translation model's)
    f1: tuple[float | None, ...] = ()  # a parsing run's bracketing F1 (None: another task's)
    f1_repaired: tuple[float | None, ...] = ()  # the same of its outputs repaired (None: another task's, or an older run)


def collect(directory: Path) -> list[dict[str, Any]]:
    """Every finished run under `directory`. In a sweep's trial directory only the run that
    trial.json names counts: older runs there had another config."""
    runs = []
    searched = directory / SEARCH_DIR  # a search's trials: the study's, not rows
    for path in results_files(directory):
        run_dir = path.parent
        if searched in run_dir.parents:
            continue
        record = read_trial_record(run_dir.parent) if (run_dir.parent / TRIAL_FILE).is_file() else None
        if record is not None and record.get("run_dir") != run_dir.name:
            continue
        results = read_results(path)
        results["variant"] = record["variant"] if record and "variant" in record else re.sub(r"-seed\d+$", "", results["name"])
        results["run_dir"] = run_dir
        results["config"] = _flat_config(run_dir / "config.yaml")
        runs.append(results)
    return runs


def results_files(directory: Path) -> list[Path]:
    """Every results.json under `directory`, sorted, at any depth: an iterative walk (Path.rglob recurses, and a
    tree a thousand folders deep ends it in a RecursionError) that follows no link to a folder."""
    found, todo = [], [directory]
    while todo:
        folder = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:  # unreadable, or gone meanwhile: nothing of it is a finished run
            continue
        for entry in entries:
            if entry.name == "results.json":  # a folder so named too: read_results names it
                found.append(Path(entry.path))
            if entry.is_dir(follow_symlinks=False):
                todo.append(Path(entry.path))
    return sorted(found)


def read_results(path: Path) -> dict[str, Any]:
    """A results.json, checked against ResultsSpec; a file it does not fit is named, with why."""
    try:
        data = read_json(path)
        return ResultsSpec.model_validate(data).model_dump(mode="json")
    except (OSError, ValueError) as e:  # a folder, unreadable bytes, not JSON, not the schema
        if isinstance(e, ValidationError):
            why = "; ".join(format_validation_error(e, root=ResultsSpec))
        elif isinstance(e, OSError):
            why = f"it cannot be read ({e.strerror or e})"
        else:
            why = f"not valid JSON ({e})"
        raise UserError(f"{path}: not a results.json of `aiayn train`: {why}; delete it, or re-run that run") from None


def check_scored_alike(runs: list[dict[str, Any]]) -> None:
    """One BLEU column holds one kind of score: sacreBLEU on detokenized text and BLEU on a
    tokenized run's own text (tokenize none) are not comparable."""
    kinds: dict[Scoring, list[str]] = {}
    for run in runs:
        kinds.setdefault(Scoring.of_signature(run.get("sacrebleu_signature")), []).append(str(run.get("run_dir", run["name"])))
    if len(kinds) > 1:
        shown = "; ".join(f"{scoring_label(k)}: {', '.join(v[:2])}{' ...' if len(v) > 2 else ''}" for k, v in kinds.items())
        raise UserError(
            f"the runs were scored in {len(kinds)} ways, which one BLEU column cannot hold ({shown}); "
            "give aiayn results a directory of runs scored alike (a sweep's, or one experiment's)"
        )


def scoring_label(scoring: Scoring) -> str:
    if not scoring.tokenized:
        return "sacreBLEU on detokenized text" + (", lowercased" if scoring.lowercase else "")
    return "BLEU on the runs' tokenized text" + (", lowercased" if scoring.lowercase else "")


def table(runs: list[dict[str, Any]], order: Sequence[str] = ()) -> list[Row]:
    """One row per variant, in group order; within a group, in `order` (a sweep's variants),
    then by name. The runs must be scored alike (check_scored_alike)."""
    check_scored_alike(runs)
    by_variant: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        by_variant.setdefault(run["variant"], []).append(run)
    rows = []
    for variant, group in by_variant.items():
        group.sort(key=lambda r: r["name"])
        first = group[0]
        reported = first.get("reported") or {}
        rows.append(
            Row(
                variant=variant,
                group=reported.get("group"),
                trials=tuple(r["name"] for r in group),
                paper=first["paper"],
                steps=tuple(r["steps"] for r in group),
                ppl=tuple(r["ppl"] for r in group),
                bleu=tuple(r["bleu"] for r in group),
                bpb=tuple(r.get("bpb") for r in group),
                f1=tuple(r.get("parse_f1") for r in group),
                f1_repaired=tuple(r.get("parse_f1_repaired") for r in group),
                params=first["params"],
                reported={k: reported.get(k) for k in ("ppl", "bleu", "params_m", "source")},
                runs=tuple((r.get("seed"), r["run_dir"]) for r in group if "run_dir" in r),
                config=first.get("config"),
                signature=first.get("sacrebleu_signature"),
            )
        )
    rank = {v: i for i, v in enumerate(order)}
    rows.sort(
        key=lambda r: (
            GROUPS.index(r.group) if r.group in GROUPS else GROUPS.index(None),
            rank.get(r.variant, len(rank)),
            r.variant,
        )
    )
    return rows


def _flat_config(path: Path) -> dict[str, Any] | None:
    try:
        config = yaml.safe_load(path.read_text())
    except (OSError, ValueError, yaml.YAMLError):  # UnicodeDecodeError is a ValueError
        return None
    return dict(_flatten(config, "")) if isinstance(config, dict) else None


def _flatten(node: Any, path: str) -> list[tuple[str, Any]]:
    if isinstance(node, dict):
        return [item for k, v in node.items() for item in _flatten(v, f"{path}.{k}" if path else str(k))]
    if isinstance(node, list) and any(isinstance(v, (dict, list)) for v in node):
        return [item for i, v in enumerate(node) for item in _flatten(v, f"{path}[{i}]")]
    return [(path, node)]


def mean_std(values: tuple[float, ...]) -> tuple[float, float | None]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


def base_row(rows: list[Row], variant: str | None = None, own_base: str | None = None) -> Row | None:
    """The row ΔBLEU is measured from: `variant` (`aiayn results --base`), else the paper's base
    (the first row of group "base"), else `own_base` (the sweep's base experiment unchanged),
    else the first row."""
    if variant is None:
        paper = next((row for row in rows if row.group == "base"), None)
        own = next((row for row in rows if row.variant == own_base), None)
        return paper or own or (rows[0] if rows else None)
    found = next((row for row in rows if row.variant == variant), None)
    if found is None:
        raise UserError(
            f"--base {variant}: no finished runs of that variant; the variants are {', '.join(r.variant for r in rows)}"
        )
    return found


def base_differences(
    rows: list[Row], base: Row | None, directory: Path | None = None, split: str = "valid"
) -> dict[str, Difference]:
    """ΔBLEU of every row to `base` on `split`, where both have translations of it."""
    if base is None:
        return {}
    return compare_to_base(
        {row.variant: list(row.runs) for row in rows},
        base.variant,
        Scoring.of_signature(base.signature),
        translations=lambda run: translations(directory or run, run, split),
    )


def with_split(rows: list[Row], directory: Path, split: str) -> list[Row]:
    """Each row with its runs' BLEU on `split` (from their cached translations)."""
    return [
        replace(
            row,
            compared=tuple(bleu_of(pair, row.signature) for _, run in row.runs if (pair := translations(directory, run, split))),
        )
        for row in rows
    ]


def sweep_base(directory: Path) -> str | None:
    """The variant of a sweep's directory whose trials are its base experiment with no overrides
    of their own (those every trial has, the seed and the name left aside), if any."""
    try:
        record = read_json(directory / "sweep.json")
        trials = record["trials"]
        common = set.intersection(*(set(t["overrides"]) for t in trials))
        # the sweep's base (an older sweep.json has none: its most used experiment)
        base_file = record.get("base") or collections.Counter(t["experiment"] for t in trials).most_common(1)[0][0]
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None
    for trial in trials:
        own = [o for o in trial["overrides"] if o not in common and not o.startswith(("train.seed=", "name="))]
        if not own and trial["experiment"] == base_file:
            return trial["variant"]
    return None


def sweep_order(directory: Path) -> list[str]:
    """The variants in the order the sweep listed them, when `directory` is a sweep's."""
    try:
        trials = read_json(directory / "sweep.json")["trials"]
        return list(dict.fromkeys(t["variant"] for t in trials))
    except (OSError, ValueError, KeyError, TypeError):
        return []
