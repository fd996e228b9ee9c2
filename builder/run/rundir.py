"""The run directory, Lightning's layout: runs/<name>/version_<n>/. `RunDir` is the one owner of
its file names and of how they are written (atomically, see atomic.py).

    config.yaml          the resolved experiment
    config.diff.yaml     what it changes in the experiment it extends
    tokenizer.json       the joint tokenizer (or tokenizer.src.json and tokenizer.tgt.json: one a side)
    checkpoints/         last.ckpt and step<N>.ckpt (the last K kept); averaged.ckpt;
                         hpc_ckpt_<n>.ckpt: Lightning's own save at SLURM's time-limit signal
                         (runs of aiayn before requeue.py, or a Trainer of your own)
    data/                the demo corpus, when the experiment trains on it
    status.json          running, interrupted, failed or finished
    translations/        valid.hyp and valid.ref: what results.json's BLEU scored, line by line
    results.json         only once training finished
    events.out.tfevents.*   TensorBoard
"""

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiayn.builder.run.atomic import dump_yaml, write_json, write_text_atomic
from aiayn.builder.run.jsonfile import read_json

RUN_DIR_ENV = "AIAYN_RUN_DIR"  # set by rank 0 so the processes it launches share its run directory
_VERSION = re.compile(r"version_(\d+)")
_STEP = re.compile(r"step[=_-]?(\d+)(?:-v\d+)?\.ckpt")
# what a run directory holds: its training's files, and a sweep's trial output beside them
_RUN_NAMES = (
    r"config(\.diff)?\.yaml|hparams\.yaml|status\.json|results\.json|tokenizer(\.src|\.tgt)?\.json|checkpoints|data"
    r"|translations|events\.out\.tfevents\..*|(stdout|stderr)(\.rank\d+)?\.log"
)
# a run's files, and atomic_write's half-written ones (.tokenizer.json.k3x_9f.tmp: another node of the job writing it)
RUN_FILE = re.compile(rf"(?:{_RUN_NAMES})|\.(?:{_RUN_NAMES})\.\w+\.tmp")
_HPC = re.compile(r"hpc_ckpt_(\d+)\.ckpt")  # Lightning's name (its checkpoint connector's hpc_save_path)


def version_dirs(parent: Path) -> list[Path]:
    """The version_<n> directories in `parent`, oldest (lowest n) first."""
    if not Path(parent).is_dir():
        return []
    found = [(_VERSION.fullmatch(p.name), p) for p in Path(parent).iterdir() if p.is_dir()]
    return [p for _, p in sorted((int(m.group(1)), p) for m, p in found if m)]


class _Within:
    """A path inside the run directory, as an attribute: `run.config` is run.path / "config.yaml"."""

    def __init__(self, *parts: str) -> None:
        self.parts = parts

    def __get__(self, run: "RunDir", owner: type) -> Path:
        return run.path.joinpath(*self.parts)


@dataclass(frozen=True)
class RunDir:
    path: Path

    config = _Within("config.yaml")
    config_diff = _Within("config.diff.yaml")
    checkpoints = _Within("checkpoints")
    last_checkpoint = _Within("checkpoints", "last.ckpt")
    averaged_checkpoint = _Within("checkpoints", "averaged.ckpt")
    data = _Within("data")
    translations = _Within("translations")
    status_file = _Within("status.json")
    results_file = _Within("results.json")
    progress_file = _Within("progress.json")  # the step trained and its ETA, rewritten every few seconds

    @classmethod
    def next_in(cls, parent: Path) -> "RunDir":
        """The next version_<n> in `parent` (runs/<name>); not created."""
        existing = version_dirs(parent)
        n = int(_VERSION.fullmatch(existing[-1].name).group(1)) + 1 if existing else 0  # type: ignore[union-attr]
        return cls(Path(parent) / f"version_{n}")

    @classmethod
    def latest_in(cls, parent: Path) -> "RunDir | None":
        """The newest version in `parent` that has a checkpoint: a run that failed before its
        first checkpoint does not hide the one before it."""
        runs = [cls(p) for p in version_dirs(parent)]
        return next((r for r in reversed(runs) if r.has_checkpoint), None)

    @staticmethod
    def inherited() -> "RunDir | None":
        """The run directory of the rank-0 process that launched this one, if any."""
        value = os.environ.get(RUN_DIR_ENV)
        return RunDir(Path(value)) if value and os.environ.get("LOCAL_RANK", "0") != "0" else None

    # ---- paths ---------------------------------------------------------------------------

    @property
    def version(self) -> int | None:
        match = _VERSION.fullmatch(self.path.name)
        return int(match.group(1)) if match else None

    @property
    def has_checkpoint(self) -> bool:
        return self.resume_checkpoint.is_file()

    @property
    def resume_checkpoint(self) -> Path:
        """What a resume continues from: Lightning's newest hpc_ckpt_<n>.ckpt (its own save when
        SLURM signals a job before its time limit, which aiayn's trainer now leaves to
        builder/train/requeue.py; a later step checkpoint removes it), else last.ckpt."""
        return (self.hpc_checkpoints() or [self.last_checkpoint])[-1]

    def hpc_checkpoints(self) -> list[Path]:
        found = [(_HPC.fullmatch(p.name), p) for p in self.checkpoints.glob("hpc_ckpt_*.ckpt")]
        return [p for _, p in sorted((int(m.group(1)), p) for m, p in found if m)]

    @property
    def model_checkpoint(self) -> Path:
        """The run's model: averaged.ckpt where the run averaged its last checkpoints (the model
        results.json reports), else last.ckpt."""
        averaged = (self.results() or {}).get("averaged_checkpoints")
        return self.averaged_checkpoint if averaged and self.averaged_checkpoint.is_file() else self.last_checkpoint

    def tokenizer_files(self, *, joint: bool) -> tuple[Path, Path]:
        """(source, target) tokenizer files; the same file for one joint tokenizer."""
        if joint:
            return self.path / "tokenizer.json", self.path / "tokenizer.json"
        return self.path / "tokenizer.src.json", self.path / "tokenizer.tgt.json"

    @property
    def has_tokenizer(self) -> bool:
        shared, _ = self.tokenizer_files(joint=True)
        src, tgt = self.tokenizer_files(joint=False)
        return shared.is_file() or (src.is_file() and tgt.is_file())

    def step_checkpoints(self) -> list[Path]:
        """The run's step*.ckpt files, oldest step first."""
        found = [(_STEP.fullmatch(p.name), p) for p in self.checkpoints.glob("step*.ckpt")]
        return [p for _, p in sorted((int(m.group(1)), p) for m, p in found if m)]

    # ---- files ---------------------------------------------------------------------------

    def drop_checkpoints(self, keep: str) -> None:
        """Free a finished run's disk: keep "all" its checkpoints, the "last" (last.ckpt and
        averaged.ckpt: its model, and where a resume starts) or "none" of them."""
        if keep == "all" or not self.checkpoints.is_dir():
            return
        kept = {self.last_checkpoint.name, self.averaged_checkpoint.name} if keep == "last" else set()
        for path in self.checkpoints.iterdir():
            if path.name not in kept and path.is_file():
                path.unlink()
        if keep == "none":
            self.checkpoints.rmdir()

    def write_status(self, status: str, **fields: Any) -> None:
        write_json(self.status_file, {"status": status, **fields})

    def status(self) -> dict[str, Any] | None:
        return _read_json(self.status_file)

    def progress(self) -> dict[str, Any] | None:
        """progress.json: the latest step of the training under way (or last run), its max_steps, the ETA
        (seconds) at its pace so far, and when it was written (seconds since the epoch)."""
        return _read_json(self.progress_file)

    def write_progress(self, step: int, max_steps: int, eta_s: float | None) -> None:
        write_json(self.progress_file, {"step": step, "max_steps": max_steps, "eta_s": eta_s, "written_at": time.time()})

    def write_results(self, results: dict[str, Any]) -> None:
        write_json(self.results_file, results)

    def results(self) -> dict[str, Any] | None:
        return _read_json(self.results_file)

    def write_translations(self, split: str, hyps: list[str], refs: list[str]) -> None:
        """translations/{split}.hyp and .ref, one sentence a line (for `sacrebleu` and the
        paired bootstrap of `aiayn results`)."""
        for suffix, lines in (("hyp", hyps), ("ref", refs)):
            write_text_atomic(self.translations / f"{split}.{suffix}", "".join(_one_line(s) + "\n" for s in lines))

    def translations_of(self, split: str) -> tuple[list[str], list[str]] | None:
        """(hypotheses, references) saved by write_translations, or None."""
        try:
            hyps, refs = (_lines((self.translations / f"{split}.{suffix}").read_text("utf-8")) for suffix in ("hyp", "ref"))
        except (OSError, UnicodeDecodeError):
            return None
        return (hyps, refs) if len(hyps) == len(refs) else None

    def write_config(self, resolved: dict[str, Any], diff: dict[str, Any], header: str, *, note: str | None = None) -> None:
        write_text_atomic(self.config, (f"# {_one_line(note)}\n" if note else "") + dump_yaml(resolved))
        write_text_atomic(self.config_diff, f"# {header}\n" + dump_yaml(diff))


def _one_line(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ")


def _lines(text: str) -> list[str]:
    return text.split("\n")[:-1] if text else []


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = read_json(path)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def diff(parent: Any, child: Any) -> Any:
    """The parts of `child` that differ from `parent` (nested mappings compared key by key)."""
    if isinstance(parent, dict) and isinstance(child, dict):
        out = {}
        for key, value in child.items():
            if key not in parent:
                out[key] = value
            elif parent[key] != value:
                out[key] = diff(parent[key], value)
        return out
    return child


def differences(old: Any, new: Any, path: str) -> list[tuple[str, Any, Any]]:
    """(key, old value, new value) of every leaf that differs between two nested configs."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [d for k in dict.fromkeys([*old, *new]) for d in differences(old.get(k), new.get(k), f"{path}.{k}")]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [d for i, (a, b) in enumerate(zip(old, new)) for d in differences(a, b, f"{path}[{i}]")]
    return [] if old == new else [(path, old, new)]


def final_scores(results: dict) -> str:
    """A results.json's scores in words, as `aiayn train` and `aiayn sweep` print them: a parser's
    bracketing F1, a translation's BLEU, a language model's bits per byte, a masked language model's
    accuracy on the tokens it predicts, and the PPL of each."""
    scores = f"bracketing F1 {results['parse_f1']:.2f} (EVALB's), " if results.get("parse_f1") is not None else ""
    if "parse_f1" in results and results["parse_f1"] is None:  # EVALB's -nan: no output it could score
        scores = f"bracketing F1 n/a (no valid sentence: {results.get('parse_errors', 0)} errors), "
    scores += f"BLEU {results['bleu']:.2f}, " if results.get("bleu") is not None else ""
    scores += f"PPL {results['ppl']:.2f}"
    if results.get("mlm_accuracy") is not None:
        scores += f", {100 * results['mlm_accuracy']:.1f}% of the masked tokens right"
    return scores + (f", {results['bpb']:.3f} bits per byte" if results.get("bpb") is not None else "")
