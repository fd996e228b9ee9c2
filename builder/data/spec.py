"""The experiment's data section -> the files of each split, their text, and the DataModule.

`split_texts` is the one place that says what a split of an experiment holds: training's
validation BLEU, results.json and `aiayn evaluate` all read their sentences through it.
"""

import os
from pathlib import Path
from typing import Any

from aiayn.builder.data.corpus import count_lines, read_parallel
from aiayn.builder.data.demo import generate_demo
from aiayn.builder.data.prepare.corpora import CORPORA
from aiayn.builder.data.text import TextPipeline, check_not_tokenized, pipelines_of, processed_file
from aiayn.builder.data.tokenizer import Tokenizer
from aiayn.builder.data.trees import read_gold_trees
from aiayn.builder.errors import UserError, resolved
from aiayn.builder.graph import graph_of
from aiayn.builder.registry import registry_of
from aiayn.schemas.data import DemoDataSpec, FilesDataSpec
from aiayn.schemas.experiment import ExperimentSpec

SPLITS = ("train", "valid", "test")


def cache_dir(spec: ExperimentSpec) -> Path:
    if spec.data.cache_dir:
        return Path(spec.data.cache_dir)
    return Path(os.environ.get("AIAYN_CACHE", Path.home() / ".cache" / "aiayn"))


def split_files(data: FilesDataSpec, split: str, languages: tuple[str, str]) -> tuple[Path, Path]:
    """(source file, target file) of a split: `{dir}/{name of the split}.{lang}` for the languages
    the graph reads and writes (`Graph.languages`: a language model's one file is both)."""
    prefix = Path(data.dir) / getattr(data, split)
    return Path(f"{prefix}.{languages[0]}"), Path(f"{prefix}.{languages[1]}")


def languages_of(spec: ExperimentSpec) -> tuple[str, str]:
    """The languages of what the experiment's model reads and writes (its graph says)."""
    return graph_of(spec).languages(spec)


def gold_trees(data: Any, split: str) -> Path | None:
    """A parsing corpus's gold trees of a split (`{split}.gold` beside its target file, as `aiayn
    data wsj` writes them), if the data are such files."""
    if not isinstance(data, FilesDataSpec):
        return None
    gold = split_files(data, split, (data.src_lang, data.tgt_lang))[1].with_suffix(".gold")  # a parser's: pairs
    return gold if gold.is_file() else None


def check_data_files(spec: ExperimentSpec) -> None:
    """Every split's two files exist, or a message that says where they were looked for."""
    data = spec.data
    if not isinstance(data, FilesDataSpec):
        return
    directory = Path(data.dir)
    how = "set data.dir (or $AIAYN_DATA, which the shipped experiments read) to the folder of the corpus"
    if directory.name in CORPORA:
        how += f", or write it there: aiayn data {directory.name} {directory}"
    if not directory.is_dir():
        resolved(directory)  # a link that leads back to itself is named as one
        what = "is a file, not a folder" if directory.exists() else "does not exist"
        raise UserError(f"data.dir {directory} {what}; {how}")
    languages = languages_of(spec)
    missing = list(dict.fromkeys(p.name for split in SPLITS for p in split_files(data, split, languages) if not p.is_file()))
    if missing:
        raise UserError(
            f"data.dir {directory} has no {', '.join(missing)}; {how}, or name the splits' files (data.train, data.valid, data.test)"
        )
    for split in ("valid", "test"):  # a parser's gold trees are read when its outputs are scored: checked before training
        gold = gold_trees(data, split)
        if gold is not None:
            check_gold_trees(gold, split_files(data, split, languages)[0])


def check_gold_trees(gold: Path, source: Path) -> None:
    """A split's gold trees read (UTF-8, brackets that close), one a line of its source, each over
    the source line's words: or a message that names the file, the tree and the fix."""
    trees, n = read_gold_trees(gold), count_lines(source)
    fix = "write the corpus again with aiayn data wsj"
    if len(trees) != n:
        raise UserError(f"{gold} holds {len(trees)} tree{'s' * (len(trees) != 1)} for the {n} lines of {source}; {fix}")
    with open(source, encoding="utf-8", errors="replace") as lines:
        for i, (tree, line) in enumerate(zip(trees, lines), 1):
            if tree.words() != line.split():
                raise UserError(f"{gold}: tree {i}'s words are not line {i} of {source}; {fix}")


def text_pipelines(spec: ExperimentSpec) -> tuple[TextPipeline, TextPipeline] | None:
    """The (source, target) text pipelines of data.pipeline; None without one, or where the
    corpus holds their output already (`aiayn data --pipeline` wrote it)."""
    data = spec.data
    if isinstance(data, FilesDataSpec) and check_not_tokenized(
        data.pipeline, split_files(data, "train", languages_of(spec))[0], Path(data.dir)
    ):
        return None
    return pipelines_of(spec)


def split_texts(spec: ExperimentSpec, split: str, *, raw: bool = False) -> tuple[list[str], list[str], str]:
    """(sources, references, where they come from) of a split of the experiment's data as the
    model reads them (through data.pipeline; `raw`: as the corpus has them): its files, or the
    demo corpus regenerated from its sizes and seed (what training wrote)."""
    data = spec.data
    pipelines = None if raw else text_pipelines(spec)
    reads, writes = languages_of(spec)
    if isinstance(data, DemoDataSpec):
        sides = dict(
            zip((data.src_lang, data.tgt_lang), generate_demo(data.n_train, data.n_valid, data.n_test, data.seed)[split])
        )
        sources, refs = sides[reads], sides[writes]  # a language model's: its side's sentences, as both
        where = f"the demo corpus's {split} split, seed {data.seed}" + (f", its {reads} side" if reads == writes else "")
        if pipelines is not None:
            return pipelines[0].lines(sources), pipelines[1].lines(refs), f"{where}, through data.pipeline"
        return list(sources), list(refs), where
    src, ref = split_files(data, split, (reads, writes))
    where = str(src) if src == ref else f"{src} -> {ref}"
    if pipelines is None:
        return *read_parallel(src, ref), where
    texts = [processed_file(path, pipeline, cache_dir(spec)) for path, pipeline in zip((src, ref), pipelines)]
    return *read_parallel(*texts), f"{where}, through data.pipeline"


def make_datamodule(
    spec: ExperimentSpec, run_dir: Path, *, max_tokens: int, on_gpu: bool = False, tokenizers: Any = None
):  # -> TranslationDataModule
    """The experiment's DataModule; `on_gpu`: batches are made by workers into pinned memory;
    `tokenizers`: (source, target) to use instead of training them (init_from's source's)."""
    from aiayn.builder.data.datamodule import TranslationDataModule  # Lightning only when training

    data, emb = spec.data, spec.model.embedding
    common: dict[str, Any] = dict(
        run_dir=run_dir,
        vocab_size=emb.vocab_size,
        shared_vocab=emb.shared_vocab,
        tokenizer=data.tokenizer,
        pipelines=text_pipelines(spec),
        cache_dir=cache_dir(spec),
        max_tokens=max_tokens,
        eval_max_tokens=spec.decode.max_tokens,
        max_len=data.max_len,
        min_len=data.min_len,
        seed=spec.train.seed,
        num_workers=(2 if on_gpu else 0) if data.num_workers == "auto" else data.num_workers,
        pin_memory=on_gpu,
        pad_to_multiple=data.pad_to_multiple,
        static_shapes=data.static_shapes,
        tokenizers=tokenizers,
        source_eos=Tokenizer.eos_id if spec.model.source_eos else None,
        reading=graph_of(spec).reading(spec),  # what its model reads of the files, and how a batch holds it
        registry=registry_of(spec),
    )
    if isinstance(data, DemoDataSpec):
        return TranslationDataModule(demo=(data.n_train, data.n_valid, data.n_test), demo_seed=data.seed, **common)
    languages = languages_of(spec)
    return TranslationDataModule(
        train=split_files(data, "train", languages),
        valid=split_files(data, "valid", languages),
        test=split_files(data, "test", languages),
        **common,
    )
