"""`prepare`: a corpus's splits, from `--from` downloads or the Hub, written as line-aligned
`{split}.en` / `{split}.de` files with the training pairs cleaned and every other split as it is.

The pairs are streamed from the sources to the files, line by line, with a progress bar on
stderr (shown on a terminal only); `prepared.json` records what was done.
"""

import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from tqdm import tqdm

from aiayn.builder.data.prepare.clean import REASONS, CleanRules, judge
from aiayn.builder.data.prepare.corpora import LANGS, Corpus, Split
from aiayn.builder.data.prepare.sources import chain_pairs, locate
from aiayn.builder.data.text import PREPARED, TextPipeline, check_not_tokenized, parse_steps, recorded_pipeline
from aiayn.builder.errors import UserError
from aiayn.builder.registry import Registry
from aiayn.builder.run.atomic import check_folder_output, staged_folder
from aiayn.builder.run.outputs import check_output
from aiayn.schemas.text import TextStep, step_names

Pairs = Callable[[], Iterator[tuple[str, str]]]


@dataclass
class SplitReport:
    name: str
    train: bool
    read: int
    written: int
    dropped: dict[str, int] | None  # reason -> pairs; None: not cleaned
    sacrebleu: str | None


@dataclass
class Report:
    corpus: str
    out: Path
    source: str
    cleaning: str | None
    splits: list[SplitReport] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # optional splits the source does not have
    pipeline: list[TextStep] = field(default_factory=list)  # data.pipeline's steps applied to every line
    langs: tuple[str, str] = LANGS

    def lines(self) -> list[str]:
        """What `aiayn data` prints: a line per split, what cleaning dropped, sacreBLEU's names."""
        lines = [f"{self.corpus}: wrote {self.out} from {self.source}"]
        if self.pipeline:
            names = ", ".join(step.type for step in self.pipeline)
            lines.append(f"every line through [{names}]: experiments reading it set data.pipeline: [{names}]")
        for s in self.splits:
            if s.dropped is not None:
                why = ", ".join(f"{n:,} {REASONS[reason]}" for reason, n in s.dropped.items())
                lines.append(f"{s.name}: kept {s.written:,} of {s.read:,} pairs; dropped {why} (cleaning: {self.cleaning})")
            else:
                lines.append(f"{s.name}: {s.written:,} pairs" + (", not cleaned" if s.train else ", as they are"))
            if s.sacrebleu:
                lines[-1] += f"; the test set `sacrebleu -t {s.sacrebleu} -l {'-'.join(self.langs)}`"
        if self.skipped:
            lines.append(f"not in this source: {', '.join(self.skipped)}")
        return lines


@dataclass(frozen=True)
class Planned:
    split: Split
    pairs: Pairs
    total: int | None  # pairs to read, where known (for the progress bar)


def prepare(
    corpus: Corpus,
    out: Path,
    *,
    source: Path | None,
    rules: CleanRules | None,
    force: bool = False,
    workers: int = 1,
    pipeline: Sequence[TextStep] = (),
    registry: Registry,
) -> Report:
    """Write `corpus` into `out` (see the module's docstring); `rules` None: no cleaning;
    `workers`: processes that count Moses tokens for it; `pipeline`: data.pipeline's steps, applied
    to every line written (after cleaning) and recorded, so that an experiment reading the folder
    knows its text is processed."""
    check_output(out, "DIR", inputs=[source] if source is not None else [])
    check_folder_output(out, force=force, purpose="write the corpus into")
    plan, where = (local_plan(corpus, source), str(source)) if source is not None else hub_plan(corpus)
    if source is not None:
        pipeline, recorded = processed_before(source, plan, pipeline, registry)
        if recorded:  # `aiayn data`'s own output, processed: copied as it is, its record kept
            return _write(corpus, out, plan, where, rules, workers, applied=(), recorded=recorded, registry=registry)
    return _write(corpus, out, plan, where, rules, workers, applied=pipeline, recorded=pipeline, registry=registry)


def processed_before(
    source: Path, plan: list[Planned], pipeline: Sequence[TextStep], registry: Registry
) -> tuple[Sequence[TextStep], tuple[TextStep, ...]]:
    """(the steps still to apply, the steps `aiayn data` applied to the text in `source` already
    (its prepared.json)). Text processed otherwise than --pipeline asks, or text that holds the
    marks of a step --pipeline would apply again (Moses' escapes), is refused, as an experiment
    refuses it."""
    done = recorded_pipeline(source)
    if done:
        recorded = parse_steps(done, registry)
        if pipeline and list(pipeline) != list(recorded):
            raise UserError(
                f"--pipeline: --from {source} holds text that `aiayn data` processed with {step_names(recorded)} (its "
                f"{PREPARED}), and --pipeline {','.join(step_names(pipeline))} would process it again; give --from the "
                "raw downloads, or leave --pipeline out to copy the text as it is"
            )
        return (), recorded
    train = next((p for p in plan if p.split.train), None)
    found = locate(source, train.split.parts[0].places["en"]) if train is not None else None
    if pipeline and found is not None and found.member is None and found.file.suffix != ".gz":  # a plain text file
        check_not_tokenized(pipeline, found.file, None)
    return pipeline, ()


def _write(
    corpus: Corpus,
    out: Path,
    plan: list[Planned],
    where: str,
    rules: CleanRules | None,
    workers: int,
    *,
    applied: Sequence[TextStep],
    recorded: Sequence[TextStep],
    registry: Registry,
) -> Report:
    """Write the planned splits into `out`, each line through the `applied` steps; prepared.json
    records `recorded` (what the text has been through)."""
    present = {p.split.name for p in plan}
    skipped = [s.name for s in corpus.splits if s.name not in present]
    report = Report(
        corpus.name,
        out,
        where,
        rules.describe(corpus.cleaned_as) if rules else None,
        skipped=skipped,
        pipeline=list(recorded),
        langs=corpus.langs,
    )
    texts = tuple(TextPipeline(applied, lang, registry) for lang in corpus.langs) if applied else None
    with staged_folder(out) as tmp:
        for planned in sorted(plan, key=lambda p: p.split.train):  # the small splits first: errors early
            report.splits.append(
                write_split(tmp, planned, rules if planned.split.train else None, workers, texts, langs=corpus.langs)
            )
        report.splits.sort(key=lambda r: [s.name for s in corpus.splits].index(r.name))
        (tmp / "prepared.json").write_text(json.dumps(manifest(report), indent=2) + "\n")
    return report


def local_plan(corpus: Corpus, folder: Path) -> list[Planned]:
    """Every split whose files are all under `folder`; a required one missing is an error that
    names what to download."""
    if not folder.is_dir():
        what = "is a file" if folder.exists() else "does not exist"
        raise UserError(f"--from {folder} {what}; give the folder that holds {corpus.downloads}")
    plan, missing = [], []
    for split in corpus.splits:
        src, tgt = corpus.langs
        found = [
            (locate(folder, part.places[src], sgm=part.sgm), locate(folder, part.places[tgt], sgm=part.sgm))
            for part in split.parts
        ]
        lacking = [
            first_place(part.places[lang])
            for part, pair in zip(split.parts, found)
            for lang, f in zip(corpus.langs, pair)
            if f is None
        ]
        if not lacking:
            plan.append(Planned(split, partial(chain_pairs, [(s, t) for s, t in found if s is not None and t is not None]), None))
        elif split.required:
            missing += lacking
    if missing:
        hint = "".join(f"; {text}" for name, text in corpus.hints if (folder / name).exists())
        raise UserError(f"--from {folder} has no {', '.join(dict.fromkeys(missing))}{hint}; it should hold {corpus.downloads}")
    return plan


def first_place(places) -> str:
    place = places[0]
    return place.archive or f"{place.path}(.gz)"


def hub_plan(corpus: Corpus) -> tuple[list[Planned], str]:
    from aiayn.builder.data.prepare.hub import hub_pairs, load_splits

    loaded = load_splits(corpus)
    plan = []
    for split in corpus.splits:
        if split.hub_split is not None:
            rows: Any = loaded[split.hub_split]  # a datasets.Dataset
            plan.append(Planned(split, partial(hub_pairs, corpus, split, rows), len(rows)))
    where = f"the Hugging Face Hub's {corpus.hub.path}" + (f" ({corpus.hub.config})" if corpus.hub.config else "")
    return plan, where


def write_split(
    folder: Path,
    planned: Planned,
    rules: CleanRules | None,
    workers: int,
    texts: tuple[TextPipeline, ...] | None = None,
    *,
    langs: tuple[str, str] = LANGS,
) -> SplitReport:
    """Stream one split's pairs into `{split}.en` and `{split}.de` (`langs`) under `folder`;
    `rules`: the cleaning of its pairs, or None to write them all; `texts`: each side's text pipeline."""
    split = planned.split
    pairs = progress(planned.pairs(), split.name, planned.total)
    judged = judge(pairs, rules, langs, workers=workers) if rules else ((s, t, None) for s, t in pairs)
    dropped: Counter[str] = Counter()
    read = 0
    paths = [folder / f"{split.name}.{lang}" for lang in langs]
    with open(paths[0], "w", encoding="utf-8", newline="\n") as en, open(paths[1], "w", encoding="utf-8", newline="\n") as de:
        for src, tgt, reason in judged:
            read += 1
            if reason is None:
                if texts is not None:
                    src, tgt = texts[0](src), texts[1](tgt)
                en.write(src + "\n")
                de.write(tgt + "\n")
            else:
                dropped[reason] += 1
    written = read - sum(dropped.values())
    if read == 0:
        raise UserError(f"{split.name}: the source has no sentence pairs; are the downloaded files intact?")
    if written == 0:
        raise UserError(
            f"{split.name}: cleaning dropped all {read} pairs; loosen it (--max-len, --clean-ratio) or give --no-clean"
        )
    return SplitReport(
        split.name, split.train, read, written, {r: dropped[r] for r in REASONS} if rules else None, split.sacrebleu
    )


def progress(pairs: Iterable, name: str, total: int | None) -> Iterable:
    """A progress bar on stderr while a split is written; tqdm shows it on a terminal only."""
    return tqdm(pairs, desc=name, total=total, unit=" pairs", unit_scale=True, file=sys.stderr, disable=None, leave=False)


def manifest(report: Report) -> dict:
    return {
        "corpus": report.corpus,
        "source": report.source,
        "cleaning": report.cleaning,
        "splits": {s.name: {k: v for k, v in asdict(s).items() if k not in ("name", "train")} for s in report.splits},
        "skipped": report.skipped,
        "pipeline": [step.model_dump(mode="json") for step in report.pipeline],
    }
