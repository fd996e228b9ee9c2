"""builder.data.cache: tokenized corpora on disk, keyed by content and tokenizer."""

import numpy as np
import pytest

from builder.data.cache import encode_cached
from builder.data.demo import generate_demo
from builder.data.tokenizer import Tokenizer, train_tokenizer
from builder.errors import UserError


@pytest.fixture(scope="module")
def tokenizer():
    en, de = generate_demo(500, 1, 1, seed=0)["train"]
    return train_tokenizer(en + de, 300)


@pytest.fixture
def corpus(tmp_path):
    src, tgt = tmp_path / "train.en", tmp_path / "train.de"
    src.write_text("she bought three books\ni know that he sold seven cars\n", encoding="utf-8")
    tgt.write_text("sie kaufte drei Bücher\nich weiß, dass er sieben Autos verkaufte\n", encoding="utf-8")
    return src, tgt


def count_encodes(monkeypatch) -> list[int]:
    calls = []
    original = Tokenizer.encode_batch

    def counting(self, texts):
        calls.append(len(texts))
        return original(self, texts)

    monkeypatch.setattr(Tokenizer, "encode_batch", counting)
    return calls


def test_second_call_hits_the_cache(tokenizer, corpus, tmp_path, monkeypatch):
    calls = count_encodes(monkeypatch)
    cache = tmp_path / "cache"
    src, tgt = encode_cached(tokenizer, *corpus, cache)
    assert calls == [2, 2]
    assert src.tolists() == [tokenizer.encode("she bought three books"),
                             tokenizer.encode("i know that he sold seven cars")]
    assert tgt.tolists()[1] == tokenizer.encode("ich weiß, dass er sieben Autos verkaufte")
    files = list(cache.iterdir())
    assert len(files) == 1 and files[0].name.startswith("train-") and files[0].suffix == ".npz"

    src2, tgt2 = encode_cached(tokenizer, *corpus, cache)
    assert calls == [2, 2]  # not encoded again
    for a, b in ((src, src2), (tgt, tgt2)):
        np.testing.assert_array_equal(a.flat, b.flat)
        np.testing.assert_array_equal(a.offsets, b.offsets)
    assert src2.flat.dtype == np.int32


def test_changed_file_invalidates(tokenizer, corpus, tmp_path, monkeypatch):
    calls = count_encodes(monkeypatch)
    cache = tmp_path / "cache"
    encode_cached(tokenizer, *corpus, cache)
    corpus[1].write_text("sie kaufte vier Bücher\nich weiß, dass er sieben Autos verkaufte\n", encoding="utf-8")
    _, tgt = encode_cached(tokenizer, *corpus, cache)
    assert calls == [2, 2, 2, 2]
    assert tgt.tolists()[0] == tokenizer.encode("sie kaufte vier Bücher")
    assert len(list(cache.iterdir())) == 2


def test_other_tokenizer_invalidates(tokenizer, corpus, tmp_path, monkeypatch):
    calls = count_encodes(monkeypatch)
    other = train_tokenizer(corpus[0].read_text().split("\n"), 100, min_frequency=1)
    encode_cached(tokenizer, *corpus, tmp_path)
    src, _ = encode_cached(other, *corpus, tmp_path)
    assert len(calls) == 4 and src.tolists()[0] == other.encode("she bought three books")
    encode_cached(tokenizer, *corpus, tmp_path, tgt_tokenizer=other)  # separate vocabularies
    assert len(calls) == 6


def test_content_not_path_or_mtime_is_the_key(tokenizer, corpus, tmp_path, monkeypatch):
    calls = count_encodes(monkeypatch)
    cache = tmp_path / "cache"
    encode_cached(tokenizer, *corpus, cache)
    copy = tmp_path / "copy"
    copy.mkdir()
    for p in corpus:
        (copy / p.name).write_bytes(p.read_bytes())
    encode_cached(tokenizer, copy / "train.en", copy / "train.de", cache)
    assert len(calls) == 2


def test_corrupt_cache_file_is_rebuilt(tokenizer, corpus, tmp_path, monkeypatch):
    calls = count_encodes(monkeypatch)
    encode_cached(tokenizer, *corpus, tmp_path / "cache")
    (cache_file,) = (tmp_path / "cache").iterdir()
    cache_file.write_bytes(b"not a zip")
    src, _ = encode_cached(tokenizer, *corpus, tmp_path / "cache")
    assert len(calls) == 4 and src.tolists()[0] == tokenizer.encode("she bought three books")
    np.load(cache_file)  # rewritten whole


def test_no_cache_dir(tokenizer, corpus, monkeypatch):
    calls = count_encodes(monkeypatch)
    encode_cached(tokenizer, *corpus, None)
    encode_cached(tokenizer, *corpus, None)
    assert len(calls) == 4


def test_missing_file(tokenizer, corpus, tmp_path):
    with pytest.raises(UserError) as e:
        encode_cached(tokenizer, corpus[0], tmp_path / "x.de", tmp_path / "cache")
    assert str(e.value) == f"corpus file not found: {tmp_path / 'x.de'}; check the data path"


def test_unwritable_cache_dir(tokenizer, corpus, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UserError, match=r"cannot write the token cache .*file/train-.*\.npz"):
        encode_cached(tokenizer, *corpus, blocker)
