"""The DataLoaders of evaluation: every pair once, in length order, batched by tokens. The Lightning
validation loop and `aiayn evaluate` (outside Lightning) read the same batches from here."""

from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

from aiayn.builder.data.collate import TranslationCollator
from aiayn.builder.data.sampler import TokenBatchSampler
from aiayn.builder.data.tokenizer import Tokenizer


def collator(pad_to_multiple: int = 1) -> TranslationCollator:
    return TranslationCollator(
        pad_id=Tokenizer.pad_id, bos_id=Tokenizer.bos_id, eos_id=Tokenizer.eos_id, pad_to_multiple=pad_to_multiple
    )


def loader_options(num_workers: int, pin_memory: bool, pad_to_multiple: int = 1) -> dict:
    """The DataLoader's arguments besides the dataset and the sampler."""
    return {
        "batch_size": None,  # the sampler yields whole batches
        "collate_fn": collator(pad_to_multiple),
        "num_workers": num_workers,
        "persistent_workers": num_workers > 0,
        "pin_memory": pin_memory,
    }


def eval_loader(
    dataset: Any,
    max_tokens: int,
    *,
    num_replicas: int = 1,
    rank: int = 0,
    lengths: tuple[np.ndarray, np.ndarray] | None = None,
    **options: Any,
) -> DataLoader:
    """Batches of at most `max_tokens` padded tokens a side, longest pairs together; rank r of
    `num_replicas` gets its own share. `lengths`: each row's (source, target) lengths as the budget
    counts them (a reading's `eval_lengths`; by default the source's and `<s> y`'s). `Batch.ids`
    restores the input order."""
    src, tgt = (
        lengths if lengths is not None else (dataset.src_lengths, dataset.tgt_lengths + 1)
    )  # tgt_in / tgt_out carry bos / eos
    sampler = TokenBatchSampler(
        src,
        tgt,
        max_tokens=max_tokens,
        shuffle=False,
        num_replicas=num_replicas,
        rank=rank,
    )
    return DataLoader(dataset, sampler=sampler, generator=own_generator(), **(options or loader_options(0, False)))


def own_generator() -> torch.Generator:
    """A DataLoader's own generator. Each iterator it makes draws its workers' base seed from
    it, not from the global RNG that dropout draws from: a run that goes on makes an iterator at
    every epoch and validation, a resumed one restores the RNG after its iterators exist, so draws
    from the global RNG there would set the two apart (a checkpoint at an epoch's last batch, or
    at a validation step, resumed to other dropout masks)."""
    return torch.Generator()
