"""builder.data.cache: tokenized corpora on disk, keyed by content and tokenizer."""

import json
import os
import pickle
import time
from functools import partial

import numpy as np
import pytest

from aiayn.builder.data import cache as cache_module
from aiayn.builder.data.bpe import FastTokenizer, train_tokenizer
from aiayn.builder.data.cache import _store, encode_blocks, encode_cached, encode_lines
from aiayn.builder.data.corpus import line_blocks
from aiayn.builder.data.demo import generate_demo
from aiayn.builder.data.ragged import RaggedIds
from aiayn.builder.errors import UserError


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
    original = FastTokenizer.encode_batch

    def counting(self, texts):
        calls.append(len(texts))
        return original(self, texts)

    monkeypatch.setattr(FastTokenizer, "encode_batch", counting)
    return calls


def test_second_call_hits_the_cache(tokenizer, corpus, tmp_path, monkeypatch):
    calls = count_encodes(monkeypatch)
    cache = tmp_path / "cache"
    src, tgt = encode_cached(tokenizer, *corpus, cache)
    assert calls == [2, 2]
    assert src.tolists() == [tokenizer.encode("she bought three books"), tokenizer.encode("i know that he sold seven cars")]
    assert tgt.tolists()[1] == tokenizer.encode("ich weiß, dass er sieben Autos verkaufte")
    files = list(cache.iterdir())
    assert len(files) == 1 and files[0].name.startswith("train-") and files[0].is_dir()
    assert sorted(p.name for p in files[0].iterdir()) == ["src_flat.npy", "src_offsets.npy", "tgt_flat.npy", "tgt_offsets.npy"]

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


@pytest.mark.parametrize("damage", ["garbage", "truncated", "missing"])
def test_corrupt_cache_is_rebuilt(tokenizer, corpus, tmp_path, monkeypatch, damage):
    calls = count_encodes(monkeypatch)
    encode_cached(tokenizer, *corpus, tmp_path / "cache")
    (folder,) = (tmp_path / "cache").iterdir()
    flat = folder / "tgt_flat.npy"
    if damage == "garbage":
        flat.write_bytes(b"not an array")
    elif damage == "truncated":  # as a full disk leaves it
        flat.write_bytes(flat.read_bytes()[:-4])
    else:
        flat.unlink()
    src, tgt = encode_cached(tokenizer, *corpus, tmp_path / "cache")
    assert len(calls) == 4 and src.tolists()[0] == tokenizer.encode("she bought three books")
    assert tgt.tolists()[1] == tokenizer.encode("ich weiß, dass er sieben Autos verkaufte")
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [folder.name]  # replaced, nothing left over
    assert np.load(flat).tolist() == tgt.flat.tolist()  # rewritten whole


def test_memory_mapped_ids_round_trip_exactly(tokenizer, corpus, tmp_path):
    cold_src, cold_tgt = encode_cached(tokenizer, *corpus, tmp_path / "cache")
    warm_src, warm_tgt = encode_cached(tokenizer, *corpus, tmp_path / "cache")
    fresh_src, fresh_tgt = encode_cached(tokenizer, *corpus, None)
    for ids in (cold_src, warm_src):
        assert isinstance(ids.flat, np.memmap) and ids.flat.dtype == np.int32 and ids.offsets.dtype == np.int64
    for got in ((cold_src, cold_tgt), (warm_src, warm_tgt)):
        assert [g.tolists() for g in got] == [fresh_src.tolists(), fresh_tgt.tolists()]
    assert fresh_src.tolists() == [tokenizer.encode(s) for s in corpus[0].read_text().splitlines()]
    for original in (warm_src, fresh_src):
        copy = pickle.loads(pickle.dumps(original))
        assert copy.tolists() == fresh_src.tolists() and isinstance(copy.flat, np.memmap) == (original is warm_src)


def test_mapped_ids_pickle_as_file_names(tmp_path):
    """DataLoader workers started by spawn or forkserver map the files, not receive a copy."""
    ids = RaggedIds(flat=np.arange(100_000, dtype=np.int32), offsets=np.array([0, 40_000, 100_000]))
    np.save(tmp_path / "flat.npy", ids.flat)
    np.save(tmp_path / "offsets.npy", ids.offsets)
    mapped = RaggedIds.open(tmp_path / "flat.npy", tmp_path / "offsets.npy")
    assert len(pickle.dumps(ids)) > 400_000 and len(pickle.dumps(mapped)) < 1000
    copy = pickle.loads(pickle.dumps(mapped))
    assert isinstance(copy.flat, np.memmap) and copy.files == mapped.files
    assert [a.tolist() for a in copy] == [list(range(40_000)), list(range(40_000, 100_000))]


def test_encoded_in_chunks_like_all_at_once(tokenizer, tmp_path):
    lines = generate_demo(1000, 1, 1, seed=5)["train"][1] + ["", "Bücher"]
    whole = encode_lines(tokenizer, lines)
    for chunk_lines in (1, 7, 1000, 5000):
        chunked = encode_lines(tokenizer, lines, chunk_lines=chunk_lines)
        np.testing.assert_array_equal(chunked.flat, whole.flat)
        np.testing.assert_array_equal(chunked.offsets, whole.offsets)
    assert whole.tolists() == [tokenizer.encode(s) for s in lines]
    assert encode_lines(tokenizer, []).tolists() == []
    path = tmp_path / "x.de"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    streamed = encode_blocks(tokenizer, line_blocks(path, block_bytes=100), chunk_lines=7)  # blocks of ~3 lines
    np.testing.assert_array_equal(streamed.flat, whole.flat)
    np.testing.assert_array_equal(streamed.offsets, whole.offsets)


def test_misaligned_or_blank_corpus(tokenizer, tmp_path, monkeypatch):
    calls = count_encodes(monkeypatch)
    src, tgt = tmp_path / "a.en", tmp_path / "a.de"
    src.write_text("one\ntwo\n", encoding="utf-8")
    tgt.write_text("eins\n", encoding="utf-8")
    with pytest.raises(UserError) as e:
        encode_cached(tokenizer, src, tgt, tmp_path / "cache")
    assert str(e.value).startswith("parallel corpus is misaligned: ") and calls == []  # before any encoding
    tgt.write_text(" \n\t\n", encoding="utf-8")
    with pytest.raises(UserError) as e:
        encode_cached(tokenizer, src, tgt, tmp_path / "cache")
    assert str(e.value) == f"{tgt}: all 2 lines are blank; it holds no sentences"
    assert not (tmp_path / "cache").exists()


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
    with pytest.raises(
        UserError,
        match=r"cannot write the token cache .*file/train-[0-9a-f]{32} \(File exists\); point the cache directory at a writable place$",
    ):
        encode_cached(tokenizer, *corpus, blocker)


def test_a_concurrent_writer_that_finished_first_is_kept(tmp_path):
    """Two sweep trials encode the same corpus at once: the second keeps the first's entry (the
    same ids), so a process already reading it never sees the folder vanish."""
    first = RaggedIds.from_lists([[5, 6], [7]])
    _store(tmp_path / "train-key", first, first)
    inode = (tmp_path / "train-key" / "src_flat.npy").stat().st_ino
    _store(tmp_path / "train-key", first, first)
    assert (tmp_path / "train-key" / "src_flat.npy").stat().st_ino == inode
    assert [p.name for p in tmp_path.iterdir()] == ["train-key"]  # no temporary folder left


def test_the_cache_is_written_a_chunk_at_a_time_as_encoded_all_at_once(tokenizer, tmp_path, monkeypatch):
    """The ids stream into the entry's files (memory holds a chunk, not the corpus): across chunks
    and blocks of lines they are the in-memory encoding's, exactly."""
    from aiayn.builder.data import cache as module

    en, de = generate_demo(500, 1, 1, seed=3)["train"]
    src, tgt = tmp_path / "train.en", tmp_path / "train.de"
    src.write_text("\n".join([*en, "Bücher"]) + "\n", encoding="utf-8")
    tgt.write_text("\n".join([*de, "books"]) + "\n", encoding="utf-8")
    monkeypatch.setattr(module, "CHUNK_LINES", 7)
    monkeypatch.setattr(module, "line_blocks", partial(line_blocks, block_bytes=300))  # blocks of a few lines
    streamed = encode_cached(tokenizer, src, tgt, tmp_path / "cache")
    whole = encode_cached(tokenizer, src, tgt, None)
    for a, b in zip(streamed, whole):
        assert isinstance(a.flat, np.memmap) and a.flat.dtype == np.int32 and len(a) == 501
        np.testing.assert_array_equal(a.flat, b.flat)
        np.testing.assert_array_equal(a.offsets, b.offsets)


def _age(*paths, seconds=60):
    for p in paths:
        st = p.stat()
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns - seconds * 10**9))


def count_hashes(monkeypatch) -> list[str]:
    hashed, original = [], cache_module.hash_file
    monkeypatch.setattr(cache_module, "hash_file", lambda h, path: (hashed.append(path.name), original(h, path)))
    return hashed


def test_an_unchanged_corpus_is_not_read_again_to_key_it(tokenizer, corpus, tmp_path, monkeypatch):
    """keys.json remembers the key by the files' identity: a WMT-sized corpus is not hashed at each start."""
    hashed, cache = count_hashes(monkeypatch), tmp_path / "cache"
    time.sleep(0.01)
    _age(*corpus)  # modified a minute before the hashing (and its ctime? see below)
    first = encode_cached(tokenizer, *corpus, cache)
    keys = json.loads((cache / "keys.json").read_text()) if (cache / "keys.json").is_file() else {}
    racy = max(p.stat().st_ctime for p in corpus) + cache_module.RACY_S >= time.time()  # ctime cannot be set back
    assert hashed == ["train.en", "train.de"] and len(keys) == (0 if racy else 1)
    monkeypatch.setattr(cache_module, "time", type("Clock", (), {"time": staticmethod(lambda: 10**10)}))  # hashing far after
    encode_cached(tokenizer, *corpus, cache)  # remembered now, if not before
    hashed.clear()
    again = encode_cached(tokenizer, *corpus, cache)
    assert hashed == [] and again[1].tolists() == first[1].tolists()  # the key from keys.json, the entry from the cache
    corpus[1].write_text("sie kaufte vier Bücher\nich weiß, dass er sieben Autos verkaufte\n", encoding="utf-8")  # same size
    st = corpus[1].stat()
    os.utime(corpus[1], ns=(st.st_atime_ns, st.st_mtime_ns - 60 * 10**9))  # and an old mtime: its ctime changed
    _, tgt = encode_cached(tokenizer, *corpus, cache)
    assert hashed == ["train.en", "train.de"] and tgt.tolists()[0] == tokenizer.encode("sie kaufte vier Bücher")


def test_files_written_just_before_the_hashing_are_hashed_every_time(tokenizer, corpus, tmp_path, monkeypatch):
    hashed, cache = count_hashes(monkeypatch), tmp_path / "cache"
    encode_cached(tokenizer, *corpus, cache)
    encode_cached(tokenizer, *corpus, cache)
    assert hashed == ["train.en", "train.de"] * 2 and not (cache / "keys.json").exists()


@pytest.mark.parametrize(
    "content",
    ["", "{trunc", "[1, 2]", '{"x": "y"}', "ENTRY_AS_LIST", '{"key": 5, "hashed_at": 1e10}', '{"key": "../../x", "hashed_at": 1e10}',
     '{"key": "KEY", "hashed_at": "later"}', '{"key": "KEY", "hashed_at": true}', "[" * 100_000],
)  # fmt: skip
def test_a_damaged_keys_file_costs_a_hashing_and_nothing_else(tokenizer, corpus, tmp_path, monkeypatch, content):
    hashed, cache = count_hashes(monkeypatch), tmp_path / "cache"
    first = encode_cached(tokenizer, *corpus, cache)
    monkeypatch.setattr(cache_module, "time", type("Clock", (), {"time": staticmethod(lambda: 10**10)}))
    encode_cached(tokenizer, *corpus, cache)  # remembered
    (identity,) = json.loads((cache / "keys.json").read_text())
    key = next(p.name.split("-")[-1] for p in cache.iterdir() if p.is_dir())
    entry = content.replace("KEY", key)
    text = f'{{"{identity}": {entry}}}' if entry.startswith('{"') or entry == "ENTRY_AS_LIST" else entry
    (cache / "keys.json").write_text(text.replace("ENTRY_AS_LIST", "[1]"))
    hashed.clear()
    again = encode_cached(tokenizer, *corpus, cache)
    assert hashed == ["train.en", "train.de"] and again[1].tolists() == first[1].tolists()
    assert [p.name for p in cache.iterdir() if p.is_dir()] == [f"train-{key}"]  # no folder named by a damaged key
    assert json.loads((cache / "keys.json").read_text())[identity]["key"] == key  # written anew
