"""The data pipeline at the paper's size: 4.5M sentence pairs (WMT14 EN-DE has 4.5M, ~140M tokens a side).

    python benchmarks/data_scale.py [--pairs 4500000] [--dir /tmp/aiayn-data-scale] [--workers 0] [--warm-only]

Writes (or reuses) a synthetic EN-DE corpus of `--pairs` lines made by joining 1-4 random Multi30k
training pairs per line (~30 tokens a side, as WMT's lines), read from $AIAYN_DATA/multi30k
(default /work/shared/data). Then runs each stage of `aiayn train`'s data path (the experiment
experiments/base.yaml pointed at that corpus, through builder.data.spec.make_datamodule) in a
fresh process and prints its wall time and peak resident memory (VmHWM, plus the largest
DataLoader worker's from RUSAGE_CHILDREN):

    tokenizer     training the shared BPE vocabulary (prepare_tokenizers)
    encode        tokenizing every split into an empty token cache (prepare_data)
    setup (warm)  a new process: loading the tokenizer and the cached ids, the length filter
    packing       building the training sampler's token-budget batches
    epoch         iterating one epoch of the sampler's batches of indices
    100 batches   the first 100 training batches through the DataLoader and the collator

CPU seconds (user + system, all threads) beside the wall time tell how much a loaded machine
slowed a stage down. Then the targets of issue 12: preparation (tokenizer + encode) <= 20 min
and <= 8 GB, and the first training batch of a cached corpus <= 30 s after its process starts
(imports included). The resident memory of the last stages includes the pages of the memory-
mapped token cache that batches touched (file-backed: shared by every process that maps the
cache, and dropped by the kernel before anything else); the last column is the private part.
"""

import argparse
import gc
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
GB = 1 << 30
STAGES = ("tokenizer", "encode", "load")


def peak_rss_reset() -> None:
    """Starts a new high-water mark of this process's resident memory (Linux: clear_refs 5)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass  # then VmHWM is the process's peak so far


def status_gb(field: str) -> float:
    status = Path("/proc/self/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith(f"{field}:")) * 1024 / GB


def peak_rss() -> float:
    """GB: this process's resident high-water mark, plus the largest finished child's (workers)."""
    return status_gb("VmHWM") + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / GB


# ---- the synthetic corpus ----------------------------------------------------------------------


def write_corpus(folder: Path, pairs: int, multi30k: Path, seed: int = 0) -> dict:
    """train.{en,de}: `pairs` lines, each 1-4 random Multi30k pairs joined by spaces; valid and
    test: Multi30k's valid and test2016. Reused when `folder/corpus.json` says it matches."""
    import numpy as np

    from aiayn.builder.data.corpus import read_parallel

    marker = folder / "corpus.json"
    wanted = {"pairs": pairs, "seed": seed, "source": str(multi30k)}
    if marker.is_file() and json.loads(marker.read_text()) == wanted:
        return {"reused": True}
    marker.unlink(missing_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    for split, name in (("valid", "valid"), ("test", "test2016")):
        for lang in ("en", "de"):
            shutil.copyfile(multi30k / f"{name}.{lang}", folder / f"{split}.{lang}")
    en, de = read_parallel(multi30k / "train.en", multi30k / "train.de")
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 5, pairs)  # sentences per line: 1-4, 2.5 on average
    picks = rng.integers(0, len(en), int(counts.sum()))
    bounds = np.concatenate([[0], np.cumsum(counts)]).tolist()
    with open(folder / "train.en", "w", encoding="utf-8") as fe, open(folder / "train.de", "w", encoding="utf-8") as fd:
        for start in range(0, pairs, 100_000):
            rows = range(start, min(start + 100_000, pairs))
            chosen = [picks[bounds[i] : bounds[i + 1]].tolist() for i in rows]
            fe.write("".join(" ".join(en[j] for j in js) + "\n" for js in chosen))
            fd.write("".join(" ".join(de[j] for j in js) + "\n" for js in chosen))
    marker.write_text(json.dumps(wanted))
    return {"reused": False}


# ---- one stage, in a fresh process -------------------------------------------------------------


def datamodule(args: argparse.Namespace):
    from aiayn import load_experiment
    from aiayn.builder.data.spec import make_datamodule
    from aiayn.builder.train.trainer import batching

    overrides = [f"data.dir={args.dir / 'corpus'}", "data.valid=valid", "data.test=test", f"data.cache_dir={args.dir / 'cache'}",
                 f"data.num_workers={args.workers}"]  # fmt: skip
    spec = load_experiment(ROOT / "experiments" / "base.yaml", overrides)
    max_tokens = batching(spec, 1)[0]
    return make_datamodule(spec, args.dir / "run", max_tokens=max_tokens), max_tokens


def cpu_seconds() -> float:
    """User + system time of this process (all its threads: the Rust encoder's too) and its children."""
    return sum(r.ru_utime + r.ru_stime for r in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))


def timed(results: dict, name: str, fn):
    peak_rss_reset()
    start, cpu = time.perf_counter(), cpu_seconds()
    out = fn()
    results[name] = {"s": time.perf_counter() - start, "cpu": cpu_seconds() - cpu, "gb": peak_rss(), "anon": status_gb("RssAnon")}
    return out


def run_stage(args: argparse.Namespace, started: float) -> dict:
    results: dict = {}
    dm, max_tokens = datamodule(args)
    if args.stage == "tokenizer":
        tok, _ = timed(results, "tokenizer", dm.prepare_tokenizers)
        results["info"] = {"vocab": tok.vocab_size}
    elif args.stage == "encode":
        timed(results, "encode", dm.prepare_data)
    else:
        timed(results, "setup (warm)", lambda: dm.setup("fit"))
        loader = timed(results, "packing", dm.train_dataloader)
        timed(results, "epoch", lambda: sum(1 for _ in loader.sampler))
        it = iter(loader)
        timed(results, "first batch", lambda: next(it))
        results["first batch"]["since start"] = time.time() - started
        results["first batch"]["cpu since start"] = cpu_seconds()
        timed(results, "100 batches", lambda: [next(it) for _ in range(99)])
        ds = dm.datasets["train"]
        results["info"] = {
            "kept": len(ds), "src_tokens": int(ds.src_lengths.sum()), "tgt_tokens": int(ds.tgt_lengths.sum()),
            "batches": len(loader), "max_tokens": max_tokens,
        }  # fmt: skip
        del it, loader  # the workers exit, and their peak memory joins RUSAGE_CHILDREN
        gc.collect()
        results["100 batches"]["gb"] = max(results["100 batches"]["gb"], peak_rss())
    return results


def child(args: argparse.Namespace, stage: str) -> dict:
    cmd = [sys.executable, __file__, "--stage", stage, "--dir", str(args.dir), "--workers", str(args.workers),
           "--started", repr(time.time())]  # fmt: skip
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---- the driver --------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4_500_000, help="training pairs of the synthetic corpus")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/aiayn-data-scale"), help="work folder (corpus, cache, run)")
    parser.add_argument("--workers", type=int, default=0, help="DataLoader worker processes (data.num_workers)")
    parser.add_argument("--warm-only", action="store_true", help="reuse the tokenizer and token cache of an earlier run in --dir")
    parser.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)
    parser.add_argument("--started", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stage:
        print(json.dumps(run_stage(args, args.started)))
        return
    multi30k = Path(os.environ.get("AIAYN_DATA", "/work/shared/data")) / "multi30k"
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores: 2.0 = fully used by others)")
    start = time.perf_counter()
    made = write_corpus(args.dir / "corpus", args.pairs, multi30k)
    print(f"corpus: {args.pairs:,} pairs in {args.dir / 'corpus'} ({'reused' if made['reused'] else f'written in {time.perf_counter() - start:.0f} s'}; "
          f"train.en {(args.dir / 'corpus' / 'train.en').stat().st_size / 1e6:,.0f} MB, train.de {(args.dir / 'corpus' / 'train.de').stat().st_size / 1e6:,.0f} MB)")  # fmt: skip
    if not args.warm_only:
        shutil.rmtree(args.dir / "run", ignore_errors=True)
        shutil.rmtree(args.dir / "cache", ignore_errors=True)
    results, info = {}, {}
    for stage in STAGES[-1:] if args.warm_only else STAGES:
        out = child(args, stage)
        info.update(out.pop("info", {}))
        results.update(out)
    report(results, info, args)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def report(results: dict, info: dict, args: argparse.Namespace) -> None:
    print(f"vocabulary {info.get('vocab', 'reused')}; kept {info['kept']:,} training pairs, {info['src_tokens']:,} source / "
          f"{info['tgt_tokens']:,} target tokens; {info['batches']:,} batches of <= {info['max_tokens']:,} tokens; workers {args.workers}")  # fmt: skip
    print("| stage | wall s | CPU s | peak RSS GB | private (anonymous) RSS at the end GB |")
    print("|---|---:|---:|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['s']:.1f} | {r['cpu']:.1f} | {r['gb']:.2f} | {r['anon']:.2f} |")
    if "encode" in results:
        prep_s = results["tokenizer"]["s"] + results["encode"]["s"]
        prep_gb = max(results["tokenizer"]["gb"], results["encode"]["gb"])
        print(
            f"target: preparation (tokenizer + encode) {prep_s / 60:.1f} min <= 20 min: {'met' if prep_s <= 1200 else 'NOT met'}"
        )
        print(f"target: preparation peak RSS {prep_gb:.2f} GB <= 8 GB: {'met' if prep_gb <= 8 else 'NOT met'}")
    first, first_cpu = results["first batch"]["since start"], results["first batch"]["cpu since start"]
    print(
        f"target: first batch of the cached corpus {first:.1f} s ({first_cpu:.1f} CPU s, imports included) after the process started <= 30 s: "
        f"{'met' if first <= 30 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
