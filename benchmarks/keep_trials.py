"""A sweep's finished trials kept as evidence, without their checkpoints: what `aiayn results`
reads to build the table (each trial's trial.json, results.json, config.yaml, validation
translations and, where `aiayn results SWEEP --split test` made them, its test translations) and
each run's validation curve from its TensorBoard events (curves.csv), copied into a folder small
enough to commit. With --last-checkpoint, also each run's last step checkpoint (not averaged)
scored on the test split by `aiayn evaluate CKPT --split test --json` (last-checkpoint.test.json
beside its results.json), while the checkpoints are there. `aiayn results OUT --split test` then builds the same table from OUT alone, and a
later sweep given OUT's trials skips them (their config hashes match).

    python benchmarks/keep_trials.py runs/multi30k-graphs docs/results/graphs-multi30k [--last-checkpoint] [--figure F.svg]
        [--sentence-stats]                                  # each test sentence's BLEU statistics (test.sentences.tsv)
        [--against OTHER_KEPT_FOLDER --labels THIS OTHER]   # the same trials of another sweep, dashed
"""

import argparse
import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

TRIAL_FILES = ("trial.json",)
RUN_FILES = ("results.json", "config.yaml")
CURVES = ("loss/valid", "PPL/valid")


def finished_runs(sweep: Path) -> list[tuple[Path, Path]]:
    """(trial folder, the run trial.json names) of every trial whose run finished."""
    found = []
    for record in sorted(sweep.glob("*/trial.json")):
        run = record.parent / json.loads(record.read_text())["run_dir"]
        if (run / "results.json").is_file():
            found.append((record.parent, run))
    return found


def keep(sweep: Path, out: Path) -> list[str]:
    kept = []
    for trial, run in finished_runs(sweep):
        target = out / trial.name / run.name
        (target / "translations").mkdir(parents=True, exist_ok=True)
        for name in TRIAL_FILES:
            shutil.copy2(trial / name, out / trial.name / name)
        for name in RUN_FILES:
            shutil.copy2(run / name, target / name)
        for path in sorted((run / "translations").glob("valid.*")):
            shutil.copy2(path, target / "translations" / path.name)
        scores = sweep / "scores" / trial.name / run.name
        for path in sorted(scores.glob("test.*")) if scores.is_dir() else []:
            (out / "scores" / trial.name / run.name).mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, out / "scores" / trial.name / run.name / path.name)
        kept.append(trial.name)
    _order(sweep, out)
    return kept


def _order(sweep: Path, out: Path) -> None:
    """OUT/sweep.json listing the kept trials' variants in the sweep's order (aiayn results'
    row order), from the sweep's own record; nothing else of it (paths of this machine)."""
    try:
        listed = [t["variant"] for t in json.loads((sweep / "sweep.json").read_text())["trials"]]
    except (OSError, ValueError, KeyError, TypeError):
        return
    order = list(dict.fromkeys(listed))
    records = [json.loads(p.read_text()) for p in sorted(out.glob("*/trial.json"))]
    records.sort(key=lambda r: (order.index(r["variant"]) if r["variant"] in order else len(order), r.get("seed") or 0))
    trials = [{"name": r["trial"], "variant": r["variant"], "seed": r.get("seed")} for r in records]
    (out / "sweep.json").write_text(json.dumps({"name": sweep.name, "trials": trials}, indent=2) + "\n")


STATS_HEADER = ["line", "sys_len", "ref_len", *(f"match{n}" for n in range(1, 5)), *(f"total{n}" for n in range(1, 5))]


def sentence_stats_files(out: Path) -> list[Path]:
    """Beside each kept run's test translations (scores/TRIAL/RUN/test.hyp, test.ref), test.sentences.tsv:
    each sentence's BLEU statistics as the run's signature scores it (its length, its reference's, the
    matching and the hypothesis n-grams, 1 to 4): summed, they give the corpus BLEU; resampled, the
    bootstrap of `aiayn results` (builder/sweep/significance.py's sentence_stats)."""
    from aiayn.builder.data.scoring import Scoring
    from aiayn.builder.sweep.significance import sentence_stats

    written = []
    for hyp in sorted(out.glob("scores/*/*/test.hyp")):
        run = out / hyp.parent.parent.name / hyp.parent.name
        signature = json.loads((run / "results.json").read_text())["sacrebleu_signature"]
        hyps, refs = hyp.read_text().splitlines(), hyp.with_suffix(".ref").read_text().splitlines()
        stats = sentence_stats(hyps, refs, Scoring.of_signature(signature))
        path = hyp.with_name("test.sentences.tsv")
        with open(path, "w", newline="") as f:
            writer = csv.writer(f, delimiter="\t")
            writer.writerow(STATS_HEADER)
            writer.writerows([i, *(int(v) for v in row)] for i, row in enumerate(stats))
        written.append(path)
    return written


LAST = "last-checkpoint.test.json"


def score_last(sweep: Path, out: Path) -> None:
    """The test split's scores of each kept run's last step checkpoint, where not kept yet."""
    for trial, run in finished_runs(sweep):
        target = out / trial.name / run.name / LAST
        steps = json.loads((run / "results.json").read_text())["steps"]
        checkpoint = run / "checkpoints" / f"step{steps:08d}.ckpt"
        if target.is_file() or not checkpoint.is_file():
            continue
        argv = [sys.executable, "-m", "aiayn", "evaluate", str(checkpoint), "--split", "test", "--json"]
        done = subprocess.run(argv, capture_output=True, text=True, check=True)
        target.write_text(done.stdout)
        print(f"{trial.name}: {checkpoint.name} test BLEU {json.loads(done.stdout)['bleu']}")


def curves(sweep: Path, out: Path) -> Path:
    """Each run's validation loss and PPL at every validation (the last row: the final model's,
    averaged where the run averaged), from its TensorBoard events."""
    path = out / "curves.csv"
    with_events = [(trial, run) for trial, run in finished_runs(sweep) if any(run.glob("events.out.tfevents.*"))]
    names = {trial.name for trial, _ in with_events}
    earlier = [r for r in csv.DictReader(open(path))] if path.is_file() else []  # kept by an earlier session
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["trial", "step", "loss_valid", "ppl_valid"])
        for row in earlier:
            if row["trial"] not in names:
                writer.writerow([row["trial"], row["step"], row["loss_valid"], row["ppl_valid"]])
        for trial, run in with_events:
            events = EventAccumulator(str(run), size_guidance={"scalars": 0}).Reload()
            tags = events.Tags()["scalars"]
            loss = {e.step: e.value for e in events.Scalars(CURVES[0])} if CURVES[0] in tags else {}
            ppl = {e.step: e.value for e in events.Scalars(CURVES[1])} if CURVES[1] in tags else {}
            for step in sorted(set(loss) | set(ppl)):
                writer.writerow([trial.name, step, _value(loss.get(step)), _value(ppl.get(step))])
    return path


def _value(v: float | None) -> str:
    return "" if v is None else f"{v:.4f}"


def figure(curves_csv: Path, path: Path, *, against: Path | None = None, labels: tuple[str, str] = ("", "")) -> None:
    """Validation PPL against steps, a line a trial, one colour an arm (the variant: the trial's
    name without its seed). `against`: another kept folder whose trials of the same names are
    drawn dashed beside them (`labels`: what tells the two apart, e.g. their peak learning rates)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(csv.DictReader(open(curves_csv)))
    trials = sorted({r["trial"] for r in rows})
    other = [r for r in csv.DictReader(open(against / "curves.csv")) if r["trial"] in trials] if against else []
    arms = sorted({t.rsplit("-seed", 1)[0] for t in trials})
    colours = dict(zip(arms, ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]))
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    named: set[str] = set()
    for source, style, label in ((rows, "-", labels[0]), (other, "--", labels[1])):
        for trial in trials:
            points = [(int(r["step"]), float(r["ppl_valid"])) for r in source if r["trial"] == trial and r["ppl_valid"]]
            if not points:
                continue
            steps, ppl = zip(*points[:-1]) if len(points) > 1 else zip(*points)  # the last: the final (averaged) model
            arm = trial.rsplit("-seed", 1)[0]
            name = f"{arm} {label}".strip()
            ax.plot(steps, ppl, style, color=colours[arm], lw=1, label=None if name in named else name)
            named.add(name)
    title = (
        "Multi30k: the three graphs, each seed a line" if not against else "Multi30k: the three graphs at two peak learning rates"
    )
    ax.set(yscale="log", xlabel="step", ylabel="validation PPL (log scale)", title=title)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)  # the same curves, the same file
    print(f"wrote {path}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sweep", type=Path, help="a sweep's folder (runs/<sweep name>)")
    p.add_argument("out", type=Path, help="the folder to keep the trials in")
    p.add_argument("--figure", type=Path, help="draw the validation curves here (.svg or .png)")
    p.add_argument("--last-checkpoint", action="store_true", help="score each run's last step checkpoint on the test split")
    p.add_argument(
        "--sentence-stats", action="store_true", help="write each kept test translation's per-sentence BLEU statistics beside it"
    )
    p.add_argument("--against", type=Path, help="a kept folder whose trials of the same names the figure draws dashed")
    p.add_argument("--labels", nargs=2, default=("", ""), metavar=("THIS", "AGAINST"), help="the legend's names of the two")
    a = p.parse_args()
    kept = keep(a.sweep, a.out)
    print(f"kept {len(kept)} finished trials in {a.out}: {', '.join(kept)}")
    if a.last_checkpoint:
        score_last(a.sweep, a.out)
    if a.sentence_stats:
        print(f"wrote {len(sentence_stats_files(a.out))} test.sentences.tsv")
    written = curves(a.sweep, a.out)
    print(f"wrote {written}")
    if a.figure is not None:
        figure(written, a.figure, against=a.against, labels=tuple(a.labels))


if __name__ == "__main__":
    main()
