"""The LightningDataModule: files (or the demo) -> tokenizer -> cached ids -> token batches.

Distributed runs: `prepare_data` (Lightning runs it on local rank 0 of each node, the other
ranks wait at a barrier) writes the demo files, trains and saves the tokenizer and fills the
token cache; `setup` on every rank then only loads. Every step is deterministic (BPE training
included) and writes atomically, so it is also safe, just redundant, when several processes
prepare at once: nodes without a shared filesystem, or a script that calls `setup` on every
rank before `Trainer.fit`.

The Trainer must be built with `use_distributed_sampler=False`: TokenBatchSampler splits the
batches across ranks itself (Lightning would otherwise try to wrap it, and fail).

Resuming mid-epoch: the training DataLoader is stateful (`state_dict` / `load_state_dict`), so
Lightning stores its position in every checkpoint and restores it before iterating again.
"""

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from lightning.pytorch import LightningDataModule
from lightning.pytorch.utilities import rank_zero_only
from torch.utils.data import DataLoader, Dataset

from aiayn.builder.data.buckets import BucketShape
from aiayn.builder.data.cache import encode_cached
from aiayn.builder.data.collate import Batch
from aiayn.builder.data.corpus import count_parallel, filter_by_length, sampled_lines
from aiayn.builder.data.demo import write_demo
from aiayn.builder.data.loaders import eval_loader, loader_options, own_generator
from aiayn.builder.data.make_tokenizers import make_tokenizers
from aiayn.builder.data.ragged import RaggedIds
from aiayn.builder.data.reading import Batching, Reading, SplitPaths
from aiayn.builder.data.sampler import TokenBatchSampler
from aiayn.builder.data.text import TextPipeline, processed_file
from aiayn.builder.data.tokenizer import Tokenizer, load_run_tokenizers, training_sample
from aiayn.builder.errors import UserError
from aiayn.builder.registry import Registry
from aiayn.builder.run.rundir import RunDir
from aiayn.schemas.data import StaticShapesSpec
from aiayn.schemas.tokenizer import BpeTokenizerSpec, TokenizerSpec

say = rank_zero_only(print)  # what the user should know about their data, once per job


def _check_settings(
    tokenizers: tuple[Tokenizer, Tokenizer] | None, shared_vocab: bool, max_tokens: int, eval_max_tokens: int | None
) -> None:
    """The DataModule's settings that cannot work together, each one line."""
    if tokenizers is not None and shared_vocab and not tokenizers[0].same_ids(tokenizers[1]):
        raise UserError("data: the given tokenizers number their tokens differently, and shared_vocab: true needs one id space")
    if max_tokens < 1 or (eval_max_tokens is not None and eval_max_tokens < 1):
        raise UserError(f"data: max_tokens must be positive, got {max_tokens} / {eval_max_tokens}")


class TranslationDataModule(LightningDataModule):
    """Parallel text for training (length-filtered) and evaluation (every pair with a non-empty
    source, in any order).

    Give either `train` (+ optional `valid`, `test`) file pairs, or `demo=(n_train, n_valid,
    n_test)` for the generated corpus (written to `run_dir/data`). The tokenizer is read from
    `run_dir` when it is there (a resumed run), else saved from `tokenizers` (init_from's source's), else trained on
    the training split (at most `train_sample_pairs` of its pairs, drawn at random) with
    `vocab_size` as `tokenizer` (data.tokenizer) says; `pipelines` (source's, target's): the text
    pipeline every split goes through first, its output cached; after `setup` (or
    `prepare_tokenizers`) `vocab_size` is its actual size. `max_tokens` bounds the padded size of
    a training batch on one device (`eval_max_tokens` of an evaluation batch, default the same).
    `source_eos`: the token every source ends with (model.source_eos), counted in its length.
    `reading`: what the model reads of the files and how its batches are laid out (its graph's
    `Graph.reading`; by default a pair read apart, the encoder-decoder's).
    """

    def __init__(
        self,
        *,
        run_dir: Path,
        train: SplitPaths | None = None,
        valid: SplitPaths | None = None,
        test: SplitPaths | None = None,
        demo: tuple[int, int, int] | None = None,
        demo_seed: int = 1234,
        vocab_size: int,
        shared_vocab: bool = True,
        tokenizer: TokenizerSpec = BpeTokenizerSpec(),
        pipelines: tuple[TextPipeline, TextPipeline] | None = None,
        tokenizers: tuple[Tokenizer, Tokenizer] | None = None,
        cache_dir: Path | None = None,
        max_tokens: int,
        eval_max_tokens: int | None = None,
        max_len: int = 256,
        min_len: int = 1,
        seed: int = 0,
        num_workers: int = 0,
        pin_memory: bool = False,
        pad_to_multiple: int = 1,
        static_shapes: StaticShapesSpec | None = None,
        source_eos: int | None = None,
        reading: Reading | None = None,
        registry: Registry,
    ) -> None:
        super().__init__()
        self.registry = registry  # the tokenizer types' registrations
        self.run_dir = Path(run_dir)
        self.run = RunDir(self.run_dir)
        self.paths = _split_paths(self.run, {"train": train, "valid": valid, "test": test}, demo)
        self.reading = reading if reading is not None else Reading()
        self.paths = {split: self.reading.files(paths) for split, paths in self.paths.items()}
        _check_settings(tokenizers, shared_vocab, max_tokens, eval_max_tokens)
        self.demo, self.demo_seed = demo, demo_seed
        self.vocab_size_requested, self.shared_vocab = vocab_size, shared_vocab
        self.tokenizer, self.pipelines = tokenizer, pipelines
        self.given_tokenizers, self.cache_dir = tokenizers, cache_dir
        self.max_tokens, self.eval_max_tokens = max_tokens, eval_max_tokens or max_tokens
        self.max_len, self.min_len, self.seed = max_len, min_len, seed
        self.options = loader_options(num_workers, pin_memory, pad_to_multiple)
        self.pad_to_multiple, self.static_shapes = pad_to_multiple, static_shapes
        self.source_eos = source_eos  # the token every source ends with (model.source_eos), if any
        self._empty()

    def _empty(self) -> None:
        """What preparing and setting up fill: the tokenizers, the splits' texts and datasets."""
        self.shapes: tuple[BucketShape, ...] = ()  # the training batches' shapes, under static_shapes
        self.src_tokenizer: Tokenizer | None = None
        self.tgt_tokenizer: Tokenizer | None = None
        self._texts: dict[str, SplitPaths] = {}
        self.datasets: dict[str, Any] = {}  # each split's, as the reading made it
        self.filter_counts: dict[str, int] = {}
        self.tokens_per_byte: dict[str, float] = {}  # evaluation splits of text: bits per byte from nats per token
        self.sentences: dict[str, int] = {}  # evaluation splits of text: the sentences their rows hold
        self._train_loader: TrainLoader | None = None

    # ---- preparing: idempotent, deterministic, atomic writes ------------------------------------

    def prepare_data(self) -> None:
        self.prepare_tokenizers()
        if self.cache_dir is not None:  # fill the cache once, for every rank's setup to read
            for split in self.paths:
                self._encode(split)

    def prepare_tokenizers(self) -> tuple[Tokenizer, Tokenizer]:
        """Writes the demo files, then loads, copies or trains the tokenizer(s); returns (src, tgt)."""
        if self.src_tokenizer is not None and self.tgt_tokenizer is not None:
            return self.src_tokenizer, self.tgt_tokenizer
        if self.demo is not None:
            n_train, n_valid, n_test = self.demo
            write_demo(self.run.data, n_train=n_train, n_valid=n_valid, n_test=n_test, seed=self.demo_seed)
        joint_file = self.run.tokenizer_files(joint=True)[0]
        src_file, tgt_file = self.run.tokenizer_files(joint=False)
        if not joint_file.is_file() and not (src_file.is_file() and tgt_file.is_file()):
            self._save(*self._make_tokenizers())
        self.src_tokenizer, self.tgt_tokenizer = load_run_tokenizers(self.run, self.registry)
        self.reading.check_tokenizer(self.tgt_tokenizer)
        return self.src_tokenizer, self.tgt_tokenizer

    def _make_tokenizers(self) -> tuple[Tokenizer, Tokenizer, str]:
        if self.given_tokenizers is not None:
            src, tgt = self.given_tokenizers
            return src, tgt, f"the source run's, {src.vocab_size} tokens (init_from.tokenizer: source)"
        src_path, tgt_path = self.texts("train")
        n = count_parallel(src_path, tgt_path)
        keep = training_sample(n, self.tokenizer.sample_pairs())
        if keep is not None:
            say(f"tokenizer: trained on {len(keep)} random pairs of the {n} (data.tokenizer.train_sample_pairs)")
        return make_tokenizers(
            self.tokenizer,
            self.registry,
            vocab_size=self.vocab_size_requested,
            shared_vocab=self.shared_vocab,
            src=(src_lines := partial(sampled_lines, src_path, n, keep)),
            tgt=src_lines if tgt_path == src_path else partial(sampled_lines, tgt_path, n, keep),  # one text: once
            specials=self.reading.specials,
        )

    def _save(self, src: Tokenizer, tgt: Tokenizer, what: str) -> None:
        """One file for a joint tokenizer, else tokenizer.src.json and tokenizer.tgt.json."""
        files = dict(zip(self.run.tokenizer_files(joint=src is tgt), (src, tgt)))  # one entry where joint
        for file, tokenizer in files.items():
            tokenizer.save(file)
        say(f"tokenizer: {what} -> {' and '.join(map(str, files))}")

    def texts(self, split: str) -> SplitPaths:
        """The files of a split as the model reads them: through the text pipeline (cached), if any."""
        if self.pipelines is None:
            return self.paths[split]
        if split not in self._texts:
            cache = self.cache_dir if self.cache_dir is not None else self.run.data
            (src, tgt), (src_pipeline, tgt_pipeline) = self.paths[split], self.pipelines
            self._texts[split] = (processed_file(src, src_pipeline, cache), processed_file(tgt, tgt_pipeline, cache))
        return self._texts[split]

    def _encode(self, split: str) -> tuple[RaggedIds, RaggedIds]:
        src_tok, tgt_tok = self.prepare_tokenizers()
        src_path, tgt_path = self.texts(split)
        return encode_cached(src_tok, src_path, tgt_path, self.cache_dir, tgt_tokenizer=tgt_tok)

    # ---- setup -----------------------------------------------------------------------------------

    def setup(self, stage: str | None = None) -> None:
        for split in self.paths:
            if split not in self.datasets:
                self.datasets[split] = self._build(split)

    def _build(self, split: str) -> Any:
        src, tgt = self._encode(split)
        return self.reading.dataset(self, split, src, tgt)

    def length_filtered(self, src: RaggedIds, tgt: RaggedIds, what: str, said: Callable[[dict[str, int]], str]) -> np.ndarray:
        """The training examples max_len and min_len keep (their ids), as `said` of the filter's counts says;
        training needs one."""
        kept, counts = filter_by_length(src, tgt, max_len=self.max_len, min_len=self.min_len)
        self.filter_counts = counts
        say(said(counts))
        if counts["kept"] == 0:
            raise UserError(
                f"data: the length filter removed all {len(src)} training {what} of {self.paths['train'][0]} "
                f"({counts['too_long']} longer than max_len={self.max_len}, {counts['too_short']} shorter "
                f"than min_len={self.min_len} tokens); raise max_len or lower min_len"
            )
        return kept

    @property
    def vocab_size(self) -> int:
        """The actual size of the shared vocabulary (or of the target one when separate)."""
        if self.tgt_tokenizer is None:
            raise RuntimeError("TranslationDataModule.vocab_size: call setup() or prepare_tokenizers() first")
        return self.tgt_tokenizer.vocab_size

    @property
    def src_vocab_size(self) -> int:
        if self.src_tokenizer is None:
            raise RuntimeError("TranslationDataModule.src_vocab_size: call setup() or prepare_tokenizers() first")
        return self.src_tokenizer.vocab_size

    @property
    def longest(self) -> int:
        """The longest tensor length (source, or target + 1) in any split set up: learned
        positional embeddings must have at least this many positions."""
        return max(int(max(ds.src_lengths.max(), ds.tgt_lengths.max() + 1)) for ds in self.datasets.values())

    # ---- loaders ---------------------------------------------------------------------------------

    def _world(self) -> tuple[int, int]:
        trainer = self.trainer
        return (1, 0) if trainer is None else (trainer.world_size, trainer.global_rank)

    def _dataset(self, split: str) -> Any:
        if split not in self.datasets:
            raise UserError(f"data: no {split} split was given")
        return self.datasets[split]

    def train_dataloader(self) -> "TrainLoader":
        ds = self._dataset("train")
        world, rank = self._world()
        # a pair's lengths as the encoder-decoder reads them, and the same budget, whatever the reading: a
        # decoder-only translation's batches (<s> x <sep> y a row) hold the very pairs an encoder-decoder's would
        src, tgt = ds.src_lengths, ds.tgt_lengths + 1
        options = self._options()
        if self.static_shapes is None:
            sampler = TokenBatchSampler(
                src, tgt, max_tokens=self.max_tokens, shuffle=True, seed=self.seed, num_replicas=world, rank=rank
            )
        else:
            batching = Batching(self.max_tokens, self.pad_to_multiple, self.seed, num_replicas=world, rank=rank)
            sampler, self.shapes, collate = self.reading.static_batches(
                src, tgt, self.static_shapes, batching, self.prepare_tokenizers()[1]
            )
            options = {**options, "collate_fn": collate}
            say(
                "static shapes: batches (rows x width; packed source, target tokens) "
                + ", ".join(f"{s.rows}x{s.width} ({s.src_tokens}, {s.tgt_tokens})" for s in self.shapes)
            )
        self._train_loader = TrainLoader(
            ds, sampler, global_step=lambda: self.trainer.global_step if self.trainer else -1, **options
        )
        return self._train_loader

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader("valid")

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader("test")

    def _eval_loader(self, split: str) -> DataLoader:
        world, rank = self._world()
        dataset = self._dataset(split)
        lengths = self.reading.eval_lengths(dataset)
        return eval_loader(dataset, self.eval_max_tokens, num_replicas=world, rank=rank, lengths=lengths, **self._options())

    def _options(self) -> dict[str, Any]:
        """The loaders' options: the reading's collator where it has its own."""
        collate = self.reading.collate(self.prepare_tokenizers()[1], self.pad_to_multiple)
        return self.options if collate is None else {**self.options, "collate_fn": collate}

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """Counts the training batches that reach the model: with workers, the sampler itself
        runs ahead of the training loop by the DataLoader's prefetch."""
        trainer, loader = self.trainer, self._train_loader
        if trainer is not None and trainer.training and loader is not None and isinstance(batch, Batch):
            loader.consumed_one()
            loader.counted(trainer.global_step)
        return batch


def _split_paths(run: RunDir, given: dict[str, SplitPaths | None], demo: tuple[int, int, int] | None) -> dict[str, SplitPaths]:
    """The files of each split: those given, or where the demo corpus is written (run/data)."""
    if (given["train"] is None) == (demo is None):
        raise UserError("data: give either the training files or the demo corpus sizes, not both or neither")
    if demo is None:
        return {k: (Path(p[0]), Path(p[1])) for k, p in given.items() if p is not None}
    if given["valid"] is not None or given["test"] is not None:
        raise UserError("data: the demo corpus makes its own valid and test splits; give no files with it")
    return {split: (run.data / f"{split}.en", run.data / f"{split}.de") for split in ("train", "valid", "test")}


class TrainLoader(DataLoader):
    """The training DataLoader; stateful, so Lightning saves its place in an epoch with every
    checkpoint and restores it on resume (before it iterates).

    A checkpoint saved inside an optimizer step (Lightning's save when SLURM signals the time
    limit comes whenever the signal does) records the place where that step began, as the task
    records its RNG there: what the checkpoint's weights have seen, and no batch more."""

    def __init__(
        self,
        dataset: Dataset,
        sampler: TokenBatchSampler,
        *,
        global_step: Callable[[], int],
        **options: Any,
    ) -> None:
        super().__init__(dataset, sampler=sampler, generator=own_generator(), **options)
        self.batches = sampler
        self._epoch, self._consumed = sampler.epoch, sampler.consumed
        self._global_step = global_step  # the trainer's optimizer steps so far
        self._step_start: tuple[int, int, int] | None = None  # (global step, epoch, consumed) where the step began

    def counted(self, global_step: int) -> None:
        """The batch just counted is part of optimizer step `global_step` + 1 (the first: it begins there)."""
        if self._step_start is None or self._step_start[0] != global_step:
            self._step_start = (global_step, self._epoch, self._consumed - 1)

    def consumed_one(self) -> None:
        if self._epoch != self.batches.epoch:
            self._epoch, self._consumed = self.batches.epoch, 0
        self._consumed += 1

    def state_dict(self) -> dict[str, Any]:
        """The place after the last batch counted, or inside a step, the place where it began."""
        epoch, consumed = self._epoch, self._consumed
        if self._step_start is not None and self._global_step() == self._step_start[0]:
            _, epoch, consumed = self._step_start
        return self.batches.state_dict(consumed=consumed if epoch == self.batches.epoch else 0)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.batches.load_state_dict(state)
        self._epoch, self._consumed = self.batches.epoch, self.batches.consumed
