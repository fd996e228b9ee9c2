"""builder.data.collate and dataset: exact tensors for a hand-made batch."""

import numpy as np
import torch

from aiayn.builder.data.collate import Batch, TranslationCollator
from aiayn.builder.data.dataset import Example, TranslationDataset
from aiayn.builder.data.ragged import RaggedIds

PAD, BOS, EOS = 0, 1, 2


def test_collate_exact_tensors():
    examples = [
        Example(id=7, src=np.array([10, 11, 12], dtype=np.int32), tgt=np.array([20], dtype=np.int32)),
        Example(id=3, src=np.array([13], dtype=np.int32), tgt=np.array([21, 22, 23], dtype=np.int32)),
    ]
    batch = TranslationCollator(pad_id=PAD, bos_id=BOS, eos_id=EOS)(examples)
    assert isinstance(batch, Batch)
    expected = {
        "src": [[10, 11, 12], [13, 0, 0]],
        "tgt_in": [[1, 20, 0, 0], [1, 21, 22, 23]],
        "tgt_out": [[20, 2, 0, 0], [21, 22, 23, 2]],
        "ids": [7, 3],
        "tgt_rows": [0, 1, 4, 5, 6, 7],  # flat indices of tgt_out's non-padding tokens
        "src_rows": [0, 1, 2, 3],  # and of src's
    }
    for name, value in expected.items():
        tensor = getattr(batch, name)
        assert tensor.dtype == torch.long, name
        assert torch.equal(tensor, torch.tensor(value)), name
    assert (batch.n_src_tokens, batch.n_tgt_tokens) == (4, 6)


def test_collate_other_special_ids():
    batch = TranslationCollator(pad_id=9, bos_id=8, eos_id=7)(
        [Example(0, np.array([5]), np.array([], dtype=np.int32)), Example(1, np.array([5, 5]), np.array([6]))]
    )
    assert batch.src.tolist() == [[5, 9], [5, 5]]
    assert batch.tgt_in.tolist() == [[8, 9], [8, 6]]
    assert batch.tgt_out.tolist() == [[7, 9], [6, 7]]
    assert batch.tgt_rows.tolist() == [0, 2, 3]
    assert batch.src_rows.tolist() == [0, 2, 3]


def test_rows_are_the_non_padding_tokens_with_a_multiple():
    rng = np.random.default_rng(0)
    examples = [
        Example(i, rng.integers(3, 9, m), rng.integers(3, 9, n)) for i, (m, n) in enumerate([(4, 5), (9, 0), (1, 11), (3, 2)])
    ]
    batch = TranslationCollator(pad_id=PAD, bos_id=BOS, eos_id=EOS, pad_to_multiple=8)(examples)
    assert batch.tgt_out.shape == (4, 16) and batch.src.shape == (4, 16)
    assert torch.equal(batch.tgt_rows, batch.tgt_out.flatten().ne(PAD).nonzero().squeeze(1))
    assert len(batch.tgt_rows) == batch.n_tgt_tokens == 22
    assert torch.equal(batch.src_rows, batch.src.flatten().ne(PAD).nonzero().squeeze(1))
    assert len(batch.src_rows) == batch.n_src_tokens == 17


def test_dataset_keeps_line_numbers():
    src = RaggedIds.from_lists([[4], [5, 6], [7, 8, 9], [10]])
    tgt = RaggedIds.from_lists([[40], [50], [70, 80], [100, 101]])
    ds = TranslationDataset(src, tgt, np.array([1, 3]))
    assert len(ds) == 2
    assert ds.src_lengths.tolist() == [2, 1] and ds.tgt_lengths.tolist() == [1, 2]
    first = ds[0]
    assert first.id == 1 and first.src.tolist() == [5, 6] and first.tgt.tolist() == [50]
    assert [e.id for e in ds[[1, 0]]] == [3, 1]  # a batch of positions, as the sampler yields
    batch = TranslationCollator(pad_id=PAD, bos_id=BOS, eos_id=EOS)(ds[[1, 0]])
    assert batch.ids.tolist() == [3, 1]
    assert batch.src.tolist() == [[10, 0], [5, 6]]


def test_dataset_with_source_eos_ends_every_source_with_it():
    src = RaggedIds.from_lists([[4], [5, 6], [7, 8, 9]])
    tgt = RaggedIds.from_lists([[40], [50], [70, 80]])
    ds = TranslationDataset(src, tgt, np.array([0, 2]), source_eos=EOS)  # model.source_eos: fairseq's sources
    assert ds.src_lengths.tolist() == [2, 4] and ds.tgt_lengths.tolist() == [1, 2]  # the sampler counts the </s>
    assert ds[1].src.tolist() == [7, 8, 9, EOS] and ds[1].src.dtype == np.int32 and ds[1].tgt.tolist() == [70, 80]
    batch = TranslationCollator(pad_id=PAD, bos_id=BOS, eos_id=EOS)(ds[[0, 1]])
    assert batch.src.tolist() == [[4, EOS, 0, 0], [7, 8, 9, EOS]] and batch.n_src_tokens == 6
    assert batch.tgt_in.tolist() == [[1, 40, 0], [1, 70, 80]]  # the target as ever
    assert src[2].tolist() == [7, 8, 9]  # the cached ids are not changed
