"""A results table written: markdown (results.md, the lines under it saying how BLEU and ΔBLEU
were computed and on which split) and CSV (results.csv, every column kept), with whether each
ΔBLEU goes the paper's way."""

import csv
from pathlib import Path
from typing import Any

from aiayn.builder.data.scoring import Scoring
from aiayn.builder.sweep.columns import differing, setting, switches, variant_label
from aiayn.builder.sweep.rows import COLUMNS, SWITCHES, Row, mean_std, scoring_label
from aiayn.builder.sweep.search_notes import short
from aiayn.builder.sweep.significance import LEVEL, MIN_SEEDS, SAMPLES, Difference
from aiayn.schemas.experiment import ReportedSpec

CSV_FIELDS = [
    "group", "variant", "runs", *COLUMNS, "positional", *SWITCHES, "uniform", "steps",
    "ppl", "ppl_std", "bpb", "bpb_std", "bleu", "bleu_std", "parse_f1", "parse_f1_std", "parse_f1_repaired", "parse_f1_repaired_std", "delta_bleu", "delta_low", "delta_high", "p_value", "seeds_agree", "interval_over", "vs_paper", "params", "paper_ppl", "paper_bleu", "paper_params_m", "trials",
]  # fmt: skip


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
        "group", "variant", *COLUMNS, "positional", *shown, *settings, "steps", "runs", "PPL", "bits/byte", "BLEU", "F1 (brackets)", "F1 (repaired)", *compared, "ΔBLEU [95% CI]",
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
    row: Row,
    shown: list[str],
    settings: list[str],
    compared: bool,
    differences: dict[str, Difference],
    figures: dict[str, str],
    agreement: dict[str, str],
) -> list[str]:
    """A row's cells after its group: markdown's head, in order."""
    return [
        variant_label(row),
        *(_number(row.paper.get(c)) for c in COLUMNS),
        str(row.paper.get("positional", "")),
        *(_number(row.paper.get(s)) for s in shown),
        *(setting(row, path) for path in settings),
        _steps(row.steps),
        str(len(row.trials)),
        _cell(row.ppl),
        _cell(row.bpb),
        _cell(row.bleu),
        _cell(row.f1),
        _cell(row.f1_repaired),
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
        scoring = scoring_label(Scoring.of_signature(rows[0].signature))
        lines += ["", f"BLEU: {scoring}, sacreBLEU {rows[0].signature or 'default (13a)'}."]
    if any(row.bpb and None not in row.bpb for row in rows):
        lines += [
            "",
            "bits/byte: a language model's summed NLL of the validation text over its UTF-8 bytes (a newline each line), in bits.",
        ]
    if any(row.f1 and None not in row.f1 for row in rows):
        lines += [
            "",
            "F1 (brackets): a parsing run's labelled bracketing F1 of the validation split's trees, EVALB's rules (COLLINS.prm), "
            "on the output as it is (an unbalanced or empty tree an error sentence, as EVALB counts it); F1 (repaired): the "
            "same with the outputs' brackets mended first (stray and empty ones dropped, open ones closed), not EVALB's number.",
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
    return lines + _sources(rows)


# the paper columns' source, unless an experiment's reported.source says another
PAPER = ReportedSpec.model_fields["source"].default


def _sources(rows: list[Row]) -> list[str]:
    """A line naming where a row's paper columns come from, for rows whose numbers are not the paper's."""
    other: dict[str, list[str]] = {}
    for row in rows:
        source = row.reported.get("source")
        if source and source != PAPER and any(row.reported.get(k) is not None for k in ("ppl", "bleu", "params_m")):
            other.setdefault(source, []).append(row.variant)
    said = "; ".join(f"{', '.join(variants)}: {source}" for source, variants in other.items())
    return ["", f"paper columns not from {PAPER}: {said}."] if other else []


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
                    **_score_cells(row),
                    **_delta_fields(d),
                    "vs_paper": verdict,
                    "params": row.params,
                    **{f"paper_{k}": _number(row.reported[k], "g") for k in ("ppl", "bleu", "params_m")},
                    "trials": " ".join(row.trials),
                    "uniform": str(row.paper.get("uniform", True)).lower(),
                    **(dict(zip(compared, _mean_std_cells(row.compared))) if compared else {}),
                    **{s: _full(row.paper.get(s)) for s in others},
                    **{path: setting(row, path, full=True) for path in settings},
                }
            )


def _score_cells(row: Row) -> dict[str, Any]:
    """A row's scores over its seeds, each a mean and a standard deviation (blank where none)."""
    ppl, ppl_std = mean_std(row.ppl)
    return {
        "ppl": ppl,
        "ppl_std": "" if ppl_std is None else ppl_std,
        **dict(zip(("bpb", "bpb_std"), _mean_std_or_blank(row.bpb))),
        **dict(zip(("bleu", "bleu_std"), _mean_std_or_blank(row.bleu))),
        **dict(zip(("parse_f1", "parse_f1_std"), _mean_std_or_blank(row.f1))),
        **dict(zip(("parse_f1_repaired", "parse_f1_repaired_std"), _mean_std_or_blank(row.f1_repaired))),
    }


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
        "delta_bleu": round(d.delta, 4),
        "delta_low": round(d.low, 4),
        "delta_high": round(d.high, 4),
        "p_value": round(d.p, 4),
        "seeds_agree": f"{d.agree}/{d.pairs}",
        "interval_over": "seeds and sentences" if d.covers_training else "sentences",
    }
