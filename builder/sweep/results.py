"""Finished runs (results.json) -> Table 3 of the paper: one row per variant, seeds pooled as
mean ± sample standard deviation, grouped (A)-(E) with base first and big last, the paper's
numbers beside ours. Written as markdown, CSV and a plot.

Table 3's columns cannot tell every variant apart: the switches of the variants after 2017 follow
(norm, ffn, kv_heads, rotary, position_bias, where a row has one), then a column for each other
setting of the runs' config.yaml in which the rows differ (post- and pre-norm, say), and a
variant whose layers differ within a stack (Table 3's columns then give its first layer) is
marked †."""

import collections
import csv
import json
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from aiayn.builder.data.scoring import Scoring
from aiayn.builder.errors import UserError, resolved
from aiayn.builder.run.jsonfile import read_json
from aiayn.builder.run.outputs import run_of
from aiayn.builder.run.validation import format_validation_error
from aiayn.builder.sweep.plan import TRIAL_FILE, read_trial_record
from aiayn.builder.sweep.search import SEARCH_DIR
from aiayn.builder.sweep.search_notes import recorded_search, short
from aiayn.builder.sweep.significance import LEVEL, MIN_SEEDS, SAMPLES, Difference, compare_to_base
from aiayn.builder.sweep.split_scores import bleu_of, score_runs, translations
from aiayn.schemas.results import ResultsSpec

GROUPS = ["base", "A", "B", "C", "D", "E", None, "big"]  # None: not a row of the paper
COLUMNS = ["N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "eps_ls"]
SWITCHES = ["norm", "ffn", "kv_heads", "rotary", "position_bias"]  # results.json's paper columns beyond Table 3's
CSV_FIELDS = [
    "group", "variant", "runs", *COLUMNS, "positional", *SWITCHES, "uniform", "steps",
    "ppl", "ppl_std", "bpb", "bpb_std", "bleu", "bleu_std", "delta_bleu", "delta_low", "delta_high", "p_value", "seeds_agree", "interval_over", "vs_paper", "params", "paper_ppl", "paper_bleu", "paper_params_m", "trials",
]  # fmt: skip


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
    reported: dict[str, Any]  # the paper's ppl, bleu, params_m (None where it has none)
    runs: tuple[tuple[int | None, Path], ...] = ()  # (seed, run directory) of each trial
    config: dict[str, Any] | None = None  # the first run's config.yaml, flattened (path -> value)
    signature: str | None = None  # the first run's BLEU signature (every run of a table is scored alike)
    compared: tuple[float, ...] = ()  # BLEU of its runs on the split the table compares on, where not valid
    bpb: tuple[float | None, ...] = ()  # a language model's bits per byte (None: a translation model's)


def collect(directory: Path) -> list[dict[str, Any]]:
    """Every finished run under `directory`. In a sweep's trial directory only the run that
    trial.json names counts: older runs there had another config."""
    runs = []
    searched = directory / SEARCH_DIR  # a search's trials: the study's, not rows
    for path in sorted(directory.rglob("results.json")):
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
        shown = "; ".join(f"{_scoring_label(k)}: {', '.join(v[:2])}{' ...' if len(v) > 2 else ''}" for k, v in kinds.items())
        raise UserError(
            f"the runs were scored in {len(kinds)} ways, which one BLEU column cannot hold ({shown}); "
            "give aiayn results a directory of runs scored alike (a sweep's, or one experiment's)"
        )


def _scoring_label(scoring: Scoring) -> str:
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
                params=first["params"],
                reported={k: reported.get(k) for k in ("ppl", "bleu", "params_m")},
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


# What a row shows already, or what tells its trials apart rather than its variant
_SHOWN = re.compile(
    r"^(name|description|reported\..*|train\.seed|dims\..*|trainer\.max_steps|train\.label_smoothing|model\.positional\.type"
    r"|.*\.(h|d_k|d_v|d_ff|d_model|num_layers|dropout))$"
)


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


_NOT_SWITCHES = {*COLUMNS, "positional", "train_steps", "uniform"}


def switches(rows: list[Row]) -> list[str]:
    """The switch columns some row has (a model departing from the paper): aiayn's in their
    order, then any other a block reports (a plugin's), by name."""
    found = {key for row in rows for key, value in row.paper.items() if key not in _NOT_SWITCHES and value is not None}
    return [s for s in SWITCHES if s in found] + sorted(found - set(SWITCHES))


# The config paths a shown column reads its value from: such a path is hidden where the column
# already tells its rows apart (a rotary's base beside its fraction; the positions' layout beside
# their type). Any other path in which the rows differ gets a column of its own.
_COLUMN_PATHS = {
    "positional": re.compile(r"^model\.positional\."),
    "norm": re.compile(r"\.add_norm\.norm\."),
    "ffn": re.compile(r"\.(layer|overrides)\b.*\.(type|activation)$"),
    "kv_heads": re.compile(r"\.kv_heads$"),
    "rotary": re.compile(r"\.rotary(\.|$)"),
    "position_bias": re.compile(r"\.position_bias(\.|$)"),
    "graph": re.compile(r"^model\.(encoder|decoder|embedding)\."),  # what the decoder-only graph has and has not
}
_STACK = re.compile(r"^model\.(encoder|decoder)\.")


def differing(rows: list[Row]) -> list[str]:
    """The config paths in whose values the rows differ, in config order, but for what the table
    shows already: Table 3's and the switch columns, and the paths those columns read (where the
    column tells the rows apart as the path does). A setting of both stacks with the same values
    in every row is one column, model.{encoder,decoder}.<key>."""
    known = [row for row in rows if row.config is not None]
    if len(known) < 2:
        return []
    shown = {c: [_key(row.paper.get(c)) for row in known] for c in ["positional", *switches(rows)]}
    patterns = {**{c: re.compile(rf"\.{re.escape(c)}(\.|$)") for c in shown}, **_COLUMN_PATHS}  # a plugin's switch too
    paths = list(dict.fromkeys(p for row in known for p in row.config))  # type: ignore[union-attr]
    values_of = {path: [_key(row.config.get(path)) for row in known] for path in paths}  # type: ignore[union-attr]
    found: dict[str, list[str]] = {}
    for path, values in values_of.items():
        if _SHOWN.match(path) or len(set(values)) < 2 or _told_apart(path, values, values_of):
            continue
        if any(
            pattern.search(path) and column in shown and _determines(shown[column], values)
            for column, pattern in patterns.items()
        ):
            continue
        found[path] = values
    merged: list[str] = []
    for path, values in found.items():
        other = _STACK.sub(lambda m: f"model.{'decoder' if m.group(1) == 'encoder' else 'encoder'}.", path)
        if other != path and found.get(other) == values:
            both = _STACK.sub("model.{encoder,decoder}.", path)
            if both not in merged:
                merged.append(both)
            continue
        merged.append(path)
    return merged


def _told_apart(path: str, values: list[str], values_of: dict[str, list[str]]) -> bool:
    """Whether other columns tell the rows apart as `path` does: an empty list or mapping where
    other rows have items (`data.pipeline: []` beside `data.pipeline[0].type`), or a field that
    only some types of its block have (a SentencePiece tokenizer's character_coverage beside
    data.tokenizer.type)."""
    if all(v in ("[]", "{}", "null") for v in values) and any(p.startswith((f"{path}[", f"{path}.")) for p in values_of):
        return True
    owner = path.rpartition(".")[0]
    kind = values_of.get(f"{owner}.type") if owner and not path.endswith(".type") else None
    return kind is not None and len(set(kind)) > 1 and "null" in values and _determines(kind, values)


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _determines(column: list[str], values: list[str]) -> bool:
    """Whether equal values in `column` always come with equal `values`."""
    seen: dict[str, str] = {}
    return all(seen.setdefault(c, v) == v for c, v in zip(column, values))


def _setting(row: Row, path: str, *, full: bool = False) -> str:
    """The row's value of a config path as the table shows it (`full`: as the CSV keeps it)."""
    path = path.replace("model.{encoder,decoder}.", "model.encoder.")  # one column for both stacks' equal values
    if row.config is None or row.config.get(path) is None:
        return ""
    value = row.config[path]
    return (
        json.dumps(value)
        if isinstance(value, (dict, list))
        else str(value).lower()
        if isinstance(value, bool)
        else str(value)
        if full
        else short(value)
    )


def _variant(row: Row) -> str:
    return row.variant + (" †" if row.paper.get("uniform") is False else "")


def mean_std(values: tuple[float, ...]) -> tuple[float, float | None]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


def _mean_std_or_blank(values: tuple[float | None, ...]) -> tuple[Any, Any]:
    """(mean, std) for the CSV, each "" where a run has no value (or one run: no std)."""
    if not values or any(v is None for v in values):
        return "", ""
    mean, std = mean_std(values)  # type: ignore[arg-type]
    return mean, "" if std is None else std


def _cell(values: tuple[float | None, ...]) -> str:
    """mean ± std of the runs' values; empty where a run has none (a language model's BLEU)."""
    if not values or any(v is None for v in values):
        return ""
    mean, std = mean_std(values)  # type: ignore[arg-type]
    return f"{mean:.2f}" if std is None else f"{mean:.2f} ± {std:.2f}"


def _number(value: Any, spec: str = "") -> str:
    return "" if value is None else format(value, spec) if spec else short(value)


def _full(value: Any) -> str:
    return "" if value is None else str(value)


PAPER_FORMAT = {"ppl": ".2f", "bleu": ".1f", "params_m": "g"}  # as Table 3 prints them


def _group_label(group: str | None) -> str:
    return "" if group is None else group if group in ("base", "big") else f"({group})"


def _steps(steps: tuple[int, ...]) -> str:
    return str(steps[0]) if len(set(steps)) == 1 else f"{min(steps)}-{max(steps)}"


def _delta(difference: Difference | None) -> str:
    """+1.23 [-0.40, +2.95] 2/3 (seeds whose own difference has its sign), * where significant;
    fewer than MIN_SEEDS seeds: ‡ and never *."""
    if difference is None:
        return ""
    d = difference
    seeds = (f" {d.agree}/{d.pairs}" if d.covers_training else "") + ("" if d.enough_seeds else " ‡")
    return f"{d.delta:+.2f} [{d.low:+.2f}, {d.high:+.2f}]{seeds}" + (" *" if d.significant else "")


def markdown(
    rows: list[Row],
    differences: dict[str, Difference] | None = None,
    base: Row | None = None,
    figures: dict[str, str] | None = None,
    *,
    split: str = "valid",
    chose: str | None = None,
) -> str:
    """The table; with `differences`, a ΔBLEU column (variant - base, 95% interval, the seeds that
    agree, * where significant) and lines under the table that say how it was computed, on which
    split and from which row; with `figures` (variant -> path), a link to each row's model figure.
    `split`: where ΔBLEU compares (another than valid gets a BLEU column of its own); `chose`:
    what chose the rows' settings on the validation split (a search). A column empty in every row
    is left out (the CSV keeps every column)."""
    differences, figures = differences or {}, figures or {}
    settings, shown = differing(rows), switches(rows)
    compared = [f"BLEU {split}"] if split != "valid" else []
    head = [
        "group", "variant", *COLUMNS, "positional", *shown, *settings, "steps", "runs", "PPL", "bits/byte", "BLEU", *compared, "ΔBLEU [95% CI]",
        "params ×10⁶", "paper PPL", "paper BLEU", "paper params ×10⁶", "vs paper", "model",
    ]  # fmt: skip
    agreement = directions(rows, differences, base)
    body: list[list[str]] = []
    previous: object = object()
    for row in rows:
        label = _group_label(row.group) if row.group != previous else ""
        previous = row.group
        body.append([label, *_cells(row, shown, settings, bool(compared), differences, figures, agreement)])
    kept = [j for j, name in enumerate(head) if name == "variant" or any(cells[j] for cells in body)]
    lines = ["| " + " | ".join(head[j] for j in kept) + " |", "|" + "|".join("---" for _ in kept) + "|"]
    lines += ["| " + " | ".join(cells[j] for j in kept) + " |" for cells in body]
    return "\n".join(lines + _notes(rows, differences, base, agreement, split, chose)) + "\n"


def _cells(
    row: Row, shown: list[str], settings: list[str], compared: bool, differences: dict[str, Difference], figures: dict[str, str],
    agreement: dict[str, str],
) -> list[str]:  # fmt: skip
    """A row's cells after its group: markdown's head, in order."""
    return [
        _variant(row),
        *(_number(row.paper.get(c)) for c in COLUMNS),
        str(row.paper.get("positional", "")),
        *(_number(row.paper.get(s)) for s in shown),
        *(_setting(row, path) for path in settings),
        _steps(row.steps),
        str(len(row.trials)),
        _cell(row.ppl),
        _cell(row.bpb),
        _cell(row.bleu),
        *([_cell(row.compared) if row.compared else ""] if compared else []),
        _delta(differences.get(row.variant)),
        f"{row.params / 1e6:.2f}",
        *(_number(row.reported[k], PAPER_FORMAT[k]) for k in ("ppl", "bleu", "params_m")),
        agreement.get(row.variant, ""),
        f"[figure]({figures[row.variant]})" if row.variant in figures else "",
    ]


def _notes(
    rows: list[Row],
    differences: dict[str, Difference],
    base: Row | None,
    agreement: dict[str, str],
    split: str,
    chose: str | None,
) -> list[str]:
    """The lines under the table: how BLEU was scored, on which split, how ΔBLEU was computed."""
    lines = []
    if any(None not in row.bleu for row in rows):
        scoring = _scoring_label(Scoring.of_signature(rows[0].signature))
        lines += ["", f"BLEU: {scoring}, sacreBLEU {rows[0].signature or 'default (13a)'}."]
    if any(row.bpb and None not in row.bpb for row in rows):
        lines += [
            "",
            "bits/byte: a language model's summed NLL of the validation text over its UTF-8 bytes (a newline each line), in bits.",
        ]
    if split != "valid":
        chosen = f", {chose}" if chose else ""
        lines += ["", f"Splits: PPL and BLEU are the validation split's{chosen}; BLEU {split} and ΔBLEU are the {split} split's."]
    if differences:
        where = "validation" if split == "valid" else split
        lines += ["", _DELTA_NOTE.format(base=base.variant if base else "the base", samples=SAMPLES, level=LEVEL, split=where)]
        if any(not d.enough_seeds for d in differences.values()):
            lines += ["", _FEW_SEEDS_NOTE.format(least=MIN_SEEDS)]
    if agreement:
        lines += ["", _tally(list(agreement.values()))]
    if any(row.paper.get("uniform") is False for row in rows):
        lines += ["", "†: layers differ within a stack; Table 3's columns give the first layer's."]
    return lines


_DELTA_NOTE = (
    "ΔBLEU: the row's BLEU minus that of {base}, the base row, on the same {split} sentences (paired by seed, "
    "mean over seeds), with the 95% interval of a two-level paired bootstrap ({samples} resamples of the seeds and "
    "of the sentences, sacreBLEU's test on the sentences), so that both training and the test set vary; k/n: the "
    "seeds whose own difference has the mean's sign; * significant: p < {level} and the interval excludes 0."
)
_FEW_SEEDS_NOTE = (
    "‡ fewer than {least} seeds: with one, the interval covers the test set's sampling only, not another training "
    "run's; with two, a resample of the seeds has only three distinct means, too few to bound another run's "
    "difference. Neither is ever marked significant: give the sweep {least} seeds or more."
)


def write_csv(
    rows: list[Row],
    path: Path,
    differences: dict[str, Difference] | None = None,
    base: Row | None = None,
    *,
    split: str = "valid",
) -> None:
    agreement = directions(rows, differences or {}, base)
    settings = differing(rows)
    compared = [f"bleu_{split}", f"bleu_{split}_std"] if split != "valid" else []
    others = [s for s in switches(rows) if s not in SWITCHES]  # switches a plugin's block reports
    with open(path, "w", newline="") as f:
        # then the compared split's BLEU (where not valid), other switches, a column per setting the rows differ in
        writer = csv.DictWriter(f, fieldnames=[*CSV_FIELDS, *compared, *others, *settings])
        writer.writeheader()
        for row in rows:
            ppl, ppl_std = mean_std(row.ppl)
            bleu, bleu_std = _mean_std_or_blank(row.bleu)
            bpb, bpb_std = _mean_std_or_blank(row.bpb)
            d = (differences or {}).get(row.variant)
            verdict = agreement.get(row.variant, "")
            writer.writerow(
                {
                    "group": row.group or "",
                    "variant": row.variant,
                    "runs": len(row.trials),
                    **{c: row.paper.get(c) for c in COLUMNS},
                    "positional": row.paper.get("positional"),
                    **{s: _full(row.paper.get(s)) for s in SWITCHES},
                    "steps": _steps(row.steps),
                    "ppl": ppl,
                    "ppl_std": "" if ppl_std is None else ppl_std,
                    "bpb": bpb,
                    "bpb_std": bpb_std,
                    "bleu": bleu,
                    "bleu_std": bleu_std,
                    **_delta_fields(d),
                    "vs_paper": verdict,
                    "params": row.params,
                    **{f"paper_{k}": _number(row.reported[k], "g") for k in ("ppl", "bleu", "params_m")},
                    "trials": " ".join(row.trials),
                    "uniform": str(row.paper.get("uniform", True)).lower(),
                    **(dict(zip(compared, _mean_std_cells(row.compared))) if compared else {}),
                    **{s: _full(row.paper.get(s)) for s in others},
                    **{path: _setting(row, path, full=True) for path in settings},
                }
            )


def _mean_std_cells(values: tuple[float, ...]) -> tuple[Any, Any]:
    if not values:
        return "", ""
    mean, std = mean_std(values)
    return mean, "" if std is None else std


def directions(rows: list[Row], differences: dict[str, Difference], base: Row | None) -> dict[str, str]:
    """Per row with a ΔBLEU and the paper's BLEU (its own and its base's): whether our change
    goes the paper's way: "agrees", "disagrees", "n.s." (ours not significant), or
    "paper: no change" (Table 3 prints the base's BLEU)."""
    if base is None or base.reported["bleu"] is None:
        return {}
    out = {}
    for row in rows:
        d = differences.get(row.variant)
        if d is None or row.reported["bleu"] is None:
            continue
        paper = row.reported["bleu"] - base.reported["bleu"]
        if abs(paper) < 0.05:  # Table 3 prints one decimal
            out[row.variant] = "paper: no change"
        elif not d.enough_seeds:
            out[row.variant] = "too few seeds"
        elif not d.significant:
            out[row.variant] = "n.s."
        else:
            out[row.variant] = "agrees" if (d.delta > 0) == (paper > 0) else "disagrees"
    return out


def _tally(verdicts: list[str]) -> str:
    significant = [v for v in verdicts if v in ("agrees", "disagrees")]
    one = f", {verdicts.count('too few seeds')} with too few seeds" if "too few seeds" in verdicts else ""
    return (
        f"vs paper: our ΔBLEU goes the paper's way on {significant.count('agrees')} of the {len(significant)} rows where it is "
        f"significant; {verdicts.count('n.s.')} not significant{one}, {verdicts.count('paper: no change')} the paper's BLEU unchanged."
    )


def _delta_fields(d: Difference | None) -> dict[str, Any]:
    if d is None:
        return {"delta_bleu": "", "delta_low": "", "delta_high": "", "p_value": "", "seeds_agree": "", "interval_over": ""}
    return {
        "delta_bleu": round(d.delta, 4), "delta_low": round(d.low, 4), "delta_high": round(d.high, 4), "p_value": round(d.p, 4),
        "seeds_agree": f"{d.agree}/{d.pairs}", "interval_over": "seeds and sentences" if d.covers_training else "sentences",
    }  # fmt: skip


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
        {row.variant: list(row.runs) for row in rows}, base.variant, Scoring.of_signature(base.signature),
        translations=lambda run: translations(directory or run, run, split),
    )  # fmt: skip


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


def write_figures(rows: list[Row], folder: Path) -> dict[str, str]:
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
            spec = ExperimentSpec.model_validate(yaml.safe_load((row.runs[0][1] / "config.yaml").read_text()))
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


def write_results(
    directory: Path, base: str | None = None, split: str | None = None, *, report: Callable[[str], None] = print
) -> str:
    """results.md (with a link to each row's model figure in figures/), results.csv and
    results.png in `directory`; returns the markdown. `base`: the variant ΔBLEU is measured from
    (default: see base_row); `split`: the split ΔBLEU compares on, its translations made where
    missing (default: test for a sweep that searched, whose settings the validation split chose;
    else valid)."""
    if not directory.is_dir():
        resolved(directory)  # a link that leads back to itself is named as one
        raise UserError(f"{directory}: not a directory; give a sweep's or a run root's directory, e.g. runs/table3")
    run = run_of(directory)
    if run is not None:
        raise UserError(
            f"{directory} is {'a run directory' if run == resolved(directory) else 'part of the run ' + str(run)}, which only its "
            f"training writes, and the table is written into DIR; give the folder of its runs, {run.parent}"
        )
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
        score_runs(directory, [run for row in rows for _, run in row.runs], split, report=report)
        rows = with_split(rows, directory, split)
    reference = base_row(rows, base, sweep_base(directory))
    differences = base_differences(rows, reference, directory, split)
    chose = _chose(directory, searched) if searched is not None else None
    text = markdown(rows, differences, reference, write_figures(rows, directory / "figures"), split=split, chose=chose)
    if (directory / "study.journal").is_file():  # a sweep that searched: what its search can say
        from aiayn.builder.sweep.search_notes import search_section  # Optuna only here

        text += "\n" + search_section(directory)
    (directory / "results.md").write_text(text)
    write_csv(rows, directory / "results.csv", differences, reference, split=split)
    from aiayn.builder.sweep.plot import plot  # matplotlib is imported only here

    plot(rows, directory / "results.png")
    return text
