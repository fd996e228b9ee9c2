"""Finished runs scored on a split other than the validation one that results.json holds: what a
search sweep compares its tuned variants on (the validation split chose their settings, so it
cannot also judge them).

A run's translations of the split are cached beside the table that reads them, never in the run
(only its training writes there): DIR/scores/<the run's path under DIR>/<split>.hyp, .ref and
.json, the last with the digest of the run's results.json, so that a run trained further is
translated again.
"""

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiayn.builder.data.corpus import read_lines
from aiayn.builder.data.scoring import Scoring
from aiayn.builder.errors import UserError, resolved
from aiayn.builder.registry import Registry
from aiayn.builder.run.atomic import write_json, write_text_atomic
from aiayn.builder.run.jsonfile import read_json
from aiayn.builder.run.rundir import RunDir

SCORES = "scores"
SPLITS = ("valid", "test")


def _cache(directory: Path, run_dir: Path, split: str) -> Path:
    try:
        relative = resolved(run_dir).relative_to(resolved(directory))
    except ValueError:  # a run outside the table's folder (a symlink, say): named by its whole path
        relative = Path(*resolved(run_dir).parts[1:])
    return directory / SCORES / relative / split


def _digest(run_dir: Path) -> str:
    return hashlib.sha256((run_dir / "results.json").read_bytes()).hexdigest()[:16]


def translations(directory: Path, run_dir: Path, split: str) -> tuple[list[str], list[str]] | None:
    """(hypotheses, references) of a run on `split`: its own for valid, else the cached ones,
    None where there are none, the run changed since, or the cache is damaged (empty, cut short,
    not the JSON written): those are translated again."""
    if split == "valid":
        return RunDir(run_dir).translations_of("valid")
    cache = _cache(directory, run_dir, split)
    try:
        record = read_json(cache.with_suffix(".json"))
        if not isinstance(record, dict) or record.get("results") != _digest(run_dir):
            return None
        hyps, refs = read_lines(cache.with_suffix(".hyp")), read_lines(cache.with_suffix(".ref"))
    except (OSError, ValueError, UserError):
        return None
    return (hyps, refs) if refs and len(hyps) == len(refs) else None


def _check_place(directory: Path, cache: Path) -> None:
    """The cache's folder and files can be written: no file stands where a folder of it goes, no
    folder where a file does (refused before any run is translated)."""
    for folder in [cache.parent, *cache.parent.parents]:
        if folder.exists() and not folder.is_dir():
            raise UserError(
                f"{folder} is a file where aiayn keeps the split scores' translations (a folder); move it away, or delete it"
            )
        if folder == directory:
            break
    for suffix in (".hyp", ".ref", ".json"):
        if cache.with_suffix(suffix).is_dir():
            raise UserError(
                f"{cache.with_suffix(suffix)} is a folder where aiayn keeps a file of the split scores; move it away, or delete it"
            )


def bleu_of(pair: tuple[list[str], list[str]], signature: str | None) -> float:
    """The corpus BLEU of (hypotheses, references), scored as the run's own BLEU was."""
    hyps, refs = pair
    return round(Scoring.of_signature(signature).bleu().corpus_score(hyps, [refs]).score, 2)


def score_runs(
    directory: Path, run_dirs: list[Path], split: str, registry: Registry, *, report: Callable[[str], None] = print
) -> None:
    """Translate `split` with each run's model where its translations are not cached (the run's
    decode settings; its averaged model where it averaged)."""
    if split not in SPLITS:
        raise UserError(f"--split {split}: give one of {', '.join(SPLITS)}")
    todo = [run for run in run_dirs if translations(directory, run, split) is None]
    if not todo:
        return
    for run_dir in todo:
        _check_place(directory, _cache(directory, run_dir, split))
    from aiayn.builder.data.spec import check_data_files, split_texts  # torch only when there is work
    from aiayn.builder.decode.checkpoint import load_for_inference
    from aiayn.builder.decode.translate import translate_texts

    for k, run_dir in enumerate(todo, 1):
        loaded = load_for_inference(run_dir, registry)
        check_data_files(loaded.spec)
        sources, refs, where = split_texts(loaded.spec, split)
        hyps = translate_texts(loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer, sources, loaded.spec.decode)
        cache = _cache(directory, run_dir, split)
        cache.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(cache.with_suffix(".hyp"), "".join(h.replace("\n", " ") + "\n" for h in hyps))
        write_text_atomic(cache.with_suffix(".ref"), "".join(r.replace("\n", " ") + "\n" for r in refs))
        record: dict[str, Any] = {
            "run": str(run_dir),
            "split": split,
            "data": where,
            "model": loaded.what,
            "results": _digest(run_dir),
        }
        write_json(cache.with_suffix(".json"), record)
        report(f"scored {run_dir} on {split} ({len(refs)} sentences, {loaded.what}) [{k}/{len(todo)}]")
