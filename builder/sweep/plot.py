"""results.png: BLEU and PPL per variant, mean with the seeds' standard deviation as error bars,
the paper's value marked where it reported one."""

from pathlib import Path

from matplotlib.figure import Figure

from aiayn.builder.sweep.rows import Row, mean_std


def plot(rows: list[Row], path: Path) -> None:
    x = list(range(len(rows)))
    labels = [f"({r.group}) {r.variant}" if r.group and r.group not in ("base", "big") else r.variant for r in rows]
    fig = Figure(figsize=(max(8.0, 0.5 * len(rows) + 4), 4.5), layout="constrained")  # no pyplot: no global backend
    axes = fig.subplots(1, 2)
    first = ("bleu", "BLEU (higher is better)")
    if any(None in r.bleu for r in rows):  # language models translate nothing: their bits per byte instead
        first = ("bpb", "bits per byte (lower is better)")
    for ax, (metric, title) in zip(axes, (first, ("ppl", "PPL (lower is better)"))):
        stats = [mean_std(getattr(r, metric)) if None not in getattr(r, metric) else (float("nan"), None) for r in rows]
        ax.errorbar(
            x, [m for m, _ in stats], yerr=[s or 0.0 for _, s in stats], fmt="o", capsize=3, label="ours (mean ± std over seeds)"
        )
        paper = [(i, r.reported[metric]) for i, r in enumerate(rows) if r.reported.get(metric) is not None]
        if paper:
            ax.scatter([i for i, _ in paper], [v for _, v in paper], marker="x", color="tab:red", zorder=3, label="paper")
        ax.set_title(title)
        ax.set_xticks(x, labels, rotation=60, ha="right", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.savefig(path, dpi=100)
