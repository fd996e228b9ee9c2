"""The experiment's data section -> TranslationDataModule, and what evaluation reads from it."""

import os
from pathlib import Path

from torch.utils.data import DataLoader

from builder.data.corpus import read_parallel
from builder.data.datamodule import TranslationDataModule
from schemas.data import DemoDataSpec, FilesDataSpec
from schemas.experiment import ExperimentSpec


def cache_dir(spec: ExperimentSpec) -> Path:
    if spec.data.cache_dir:
        return Path(spec.data.cache_dir)
    return Path(os.environ.get("AIAYN_CACHE", Path.home() / ".cache" / "aiayn"))


def split_files(data: FilesDataSpec, split: str) -> tuple[Path, Path]:
    prefix = Path(data.dir) / getattr(data, split)
    return Path(f"{prefix}.{data.src_lang}"), Path(f"{prefix}.{data.tgt_lang}")


def make_datamodule(spec: ExperimentSpec, run_dir: Path, *, max_tokens: int) -> TranslationDataModule:
    data, emb = spec.data, spec.model.embedding
    common = dict(
        run_dir=run_dir,
        vocab_size=emb.vocab_size,
        shared_vocab=emb.shared_vocab,
        min_frequency=data.tokenizer.min_frequency,
        cache_dir=cache_dir(spec),
        max_tokens=max_tokens,
        eval_max_tokens=spec.decode.max_tokens,
        max_len=data.max_len,
        min_len=data.min_len,
        seed=spec.train.seed,
        num_workers=data.num_workers,
    )
    if isinstance(data, DemoDataSpec):
        return TranslationDataModule(demo=(data.n_train, data.n_valid, data.n_test), demo_seed=data.seed, **common)
    return TranslationDataModule(
        train=split_files(data, "train"), valid=split_files(data, "valid"), test=split_files(data, "test"), **common
    )


def split_texts(data: TranslationDataModule, split: str, limit: int | None = None) -> tuple[list[str], list[str]]:
    """The raw (source, reference) lines of a split, the first `limit` of them."""
    sources, refs = read_parallel(*data.paths[split])
    return sources[:limit], refs[:limit]


def eval_loader(data: TranslationDataModule, split: str) -> DataLoader:
    data.setup("validate")
    return data.val_dataloader() if split == "valid" else data.test_dataloader()
