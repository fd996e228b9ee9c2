"""`python benchmarks/prepare.py [--pairs N]`: how fast `aiayn data wmt14-en-de --from` turns
the statmt.org archives into the experiment's files, and how much memory it holds.

The archives are made here with the real member names, their training pairs cycled from the
newstest2013/2014 sentences of $AIAYN_DATA/wmt14-en-de-test (news, WMT's sentence lengths), or
from the demo corpus when those are absent. Each setting runs in a fresh process, so its peak
resident memory (its own and its workers') is its own: streaming means it does not grow with N.
"""

import argparse
import io
import json
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from contextlib import redirect_stdout
from itertools import cycle, islice
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # not benchmarks/common.py: it imports torch, which `aiayn data` does not

SETTINGS = {
    "no cleaning": ["--no-clean"],
    "clean, whitespace tokens": ["--count", "whitespace"],
    "clean, Moses tokens, 1 worker": ["--workers", "1"],
    f"clean, Moses tokens, {os.cpu_count()} workers": ["--workers", str(os.cpu_count())],
}


def sentences() -> tuple[list[str], list[str], str]:
    news = Path(os.environ.get("AIAYN_DATA", ROOT.parent / "shared" / "data")) / "wmt14-en-de-test"
    if (news / "newstest2014.en").is_file():
        en = [line for name in ("newstest2013", "newstest2014") for line in (news / f"{name}.en").read_text().splitlines()]
        de = [line for name in ("newstest2013", "newstest2014") for line in (news / f"{name}.de").read_text().splitlines()]
        return en, de, f"{news}/newstest2013+2014"
    sys.path.insert(0, str(ROOT))
    from aiayn.builder.data.demo import generate_demo

    en, de = generate_demo(5000, 1, 1, seed=0)["train"]
    return list(en), list(de), "the demo corpus"


def tgz(path: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def make_downloads(folder: Path, n: int) -> str:
    en, de, origin = sentences()
    text = lambda lines: "".join(line + "\n" for line in islice(cycle(lines), n)).encode()  # noqa: E731
    tgz(
        folder / "training-parallel-europarl-v7.tgz",
        {"training/europarl-v7.de-en.en": text(en), "training/europarl-v7.de-en.de": text(de)},
    )
    tgz(folder / "training-parallel-commoncrawl.tgz", {"commoncrawl.de-en.en": b"One.\n", "commoncrawl.de-en.de": b"Eins.\n"})
    tgz(folder / "training-parallel-nc-v9.tgz", {f"training/news-commentary-v9.de-en.{lang}": b"x\n" for lang in ("en", "de")})
    tgz(folder / "dev.tgz", {"dev/newstest2013.en": b"Dev.\n", "dev/newstest2013.de": b"Dev.\n"})
    segs = b'<seg id="1">Test.</seg>\n'
    tgz(folder / "test-full.tgz", {f"test-full/newstest2014-deen-{k}.sgm": segs for k in ("src.en", "ref.de")})
    return origin


def one(downloads: Path, out: Path, flags: list[str]) -> None:
    """Run in a fresh process: one `aiayn data` and what it took, as JSON on stdout."""
    from aiayn.builder.cli import main

    start = time.perf_counter()
    with open(os.devnull, "w") as null, redirect_stdout(null):
        code = main(["data", "wmt14-en-de", str(out), "--from", str(downloads), *flags])
    seconds = time.perf_counter() - start
    # VmHWM: this process's own peak (ru_maxrss would count the parent's memory at the fork before
    # the exec); RUSAGE_CHILDREN: the largest worker's
    status = Path("/proc/self/status").read_text()
    kb = int(status.split("VmHWM:")[1].split()[0]) + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    kept = json.loads((out / "prepared.json").read_text())["splits"]["train"]["written"]
    print(json.dumps({"code": code, "seconds": seconds, "peak_mib": kb / 1024, "kept": kept}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=200_000, help="training pairs in the archive (WMT14 has 4.5M)")
    parser.add_argument("--no-moses", action="store_true", help="only the settings without Moses' tokenizer (fast, for large N)")
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        return one(Path(args.one[0]), Path(args.one[1]), json.loads(args.one[2]))
    with tempfile.TemporaryDirectory() as tmp:
        downloads = Path(tmp) / "downloads"
        downloads.mkdir()
        origin = make_downloads(downloads, args.pairs)
        size = (downloads / "training-parallel-europarl-v7.tgz").stat().st_size
        print(f"{args.pairs:,} training pairs from {origin}; archive {size / 2**20:.1f} MiB; {os.cpu_count()} CPUs")
        print("| setting | seconds | pairs/s | kept | peak memory (MiB, main + largest worker) |\n|---|---|---|---|---|")
        for name, setting in SETTINGS.items():
            if args.no_moses and "Moses" in name:
                continue
            out = Path(tmp) / name.replace(" ", "_").replace(",", "")
            command = [sys.executable, __file__, "--one", str(downloads), str(out), json.dumps(setting)]
            result = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
            rate = (args.pairs + 1 + 1) / result["seconds"]
            print(f"| {name} | {result['seconds']:.1f} | {rate:,.0f} | {result['kept']:,} | {result['peak_mib']:.0f} |")


if __name__ == "__main__":
    main()
