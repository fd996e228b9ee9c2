"""builder.data.corpus: reading line-aligned files, its user errors, and the length filter."""

from pathlib import Path

import numpy as np
import pytest

from aiayn.builder.data.corpus import (
    count_lines,
    count_parallel,
    filter_by_length,
    line_blocks,
    read_lines,
    read_parallel,
    sampled_lines,
)
from aiayn.builder.data.ragged import RaggedIds
from aiayn.builder.errors import UserError


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_reads_lines_without_line_endings(tmp_path):
    src = write(tmp_path / "a.en", "one\ntwo words\n\nfour\n".encode())
    tgt = write(tmp_path / "a.de", "eins\nzwei Wörter\n\nvier".encode())  # no final newline
    assert read_parallel(src, tgt) == (["one", "two words", "", "four"], ["eins", "zwei Wörter", "", "vier"])


def test_splits_on_newline_only(tmp_path):
    # U+2028 and form feed are line breaks to str.splitlines, but not to a corpus
    path = write(tmp_path / "x.en", "a\u2028b\x0cc\r\n\ufeffd\n".encode())
    assert read_lines(path) == ["a\u2028b\x0cc", "\ufeffd"]


def test_byte_order_mark_is_not_text(tmp_path):
    assert read_lines(write(tmp_path / "x.en", "\ufeffhello\n".encode())) == ["hello"]


@pytest.mark.parametrize("block_bytes", [1, 2, 3, 5, 8, 1 << 24])
@pytest.mark.parametrize("text", ["\ufeffeins\r\nzwei Wörter\n\n„drei“ – 😀\nvier", "a\n\n", "\n", "x", ""])
def test_read_in_blocks_as_whole(tmp_path, block_bytes, text):
    """Any block size reads what splitting the whole text would."""
    path = write(tmp_path / "x.de", text.encode())
    lines = text.removeprefix("\ufeff").split("\n")
    expected = [line.removesuffix("\r") for line in (lines[:-1] if lines[-1] == "" else lines)]
    assert read_lines(path, block_bytes=block_bytes) == expected
    assert [line for block in line_blocks(path, block_bytes=block_bytes) for line in block] == expected
    assert count_lines(path) == len(expected)


@pytest.mark.parametrize("block_bytes", [1, 4, 1 << 24])
def test_invalid_utf8_line_counts_across_blocks(tmp_path, block_bytes):
    path = write(tmp_path / "a.de", "ä\nöö\n\nü".encode() + b"\xe9\n")
    with pytest.raises(UserError, match=r"a\.de, line 4: invalid UTF-8 \(byte 0xe9\)"):
        read_lines(path, block_bytes=block_bytes)


@pytest.mark.parametrize("block_bytes", [1, 6, 1 << 24])
def test_sampled_lines(tmp_path, block_bytes):
    path = write(tmp_path / "x.en", "".join(f"line {i}\n" for i in range(20)).encode())
    assert list(sampled_lines(path, 20, block_bytes=block_bytes)) == [f"line {i}" for i in range(20)]
    keep = np.array([0, 3, 4, 11, 19])
    assert list(sampled_lines(path, 20, keep, block_bytes=block_bytes)) == ["line 0", "line 3", "line 4", "line 11", "line 19"]
    blank = write(tmp_path / "b.en", b"  \n\n\t\n")
    lines = sampled_lines(blank, 3, np.array([1]), block_bytes=block_bytes)
    assert next(lines) == ""
    with pytest.raises(UserError) as e:  # once the whole file has been read
        next(lines)
    assert str(e.value) == f"{blank}: all 3 lines are blank; it holds no sentences"


def test_missing_file(tmp_path):
    src = write(tmp_path / "a.en", b"x\n")
    missing = tmp_path / "nope.de"
    with pytest.raises(UserError) as e:
        read_parallel(src, missing)
    assert str(e.value) == f"corpus file not found: {missing}; check the data path"


@pytest.mark.parametrize("read", [read_parallel, count_parallel])
def test_different_line_counts(tmp_path, read):
    src = write(tmp_path / "a.en", b"1\n2\n3\n")
    tgt = write(tmp_path / "a.de", b"1\n2\n")
    with pytest.raises(UserError) as e:
        read(src, tgt)
    assert str(e.value) == (
        f"parallel corpus is misaligned: {src} has 3 lines but {tgt} has 2; line N of one file must translate line N of the other"
    )


def test_invalid_utf8_names_file_and_line(tmp_path):
    src = write(tmp_path / "a.en", b"fine\nalso fine\ncaf\xe9 latin-1\nmore\n")
    tgt = write(tmp_path / "a.de", b"1\n2\n3\n4\n")
    with pytest.raises(UserError) as e:
        read_parallel(src, tgt)
    assert str(e.value) == (
        f"{src}, line 3: invalid UTF-8 (byte 0xe9); the corpus must be UTF-8 text: re-encode it, e.g. `iconv -f latin1 -t utf-8`"
    )


def test_invalid_utf8_on_first_line(tmp_path):
    path = write(tmp_path / "a.de", b"\xff\n")
    with pytest.raises(UserError, match=r"a\.de, line 1: invalid UTF-8 \(byte 0xff\)"):
        read_lines(path)


@pytest.mark.parametrize("read", [read_parallel, count_parallel])
def test_empty_corpus(tmp_path, read):
    src = write(tmp_path / "a.en", b"")
    tgt = write(tmp_path / "a.de", b"")
    with pytest.raises(UserError) as e:
        read(src, tgt)
    assert str(e.value) == f"parallel corpus is empty: {src} and {tgt} have no lines"


def test_one_empty_file_is_a_misalignment(tmp_path):
    src = write(tmp_path / "a.en", b"")
    tgt = write(tmp_path / "a.de", b"x\n")
    with pytest.raises(UserError, match=r"has 0 lines but .* has 1"):
        read_parallel(src, tgt)


def test_directory_is_not_a_corpus(tmp_path):
    with pytest.raises(UserError) as e:
        read_lines(tmp_path)
    assert str(e.value) == f"corpus path is a directory, not a file: {tmp_path}"


SRC = [[5] * 3, [5] * 0, [5] * 7, [5] * 4, [5] * 2, [5] * 5]
TGT = [[6] * 3, [6] * 2, [6] * 2, [6] * 9, [6] * 0, [6] * 5]


def test_filter_by_length_counts():
    kept, counts = filter_by_length(SRC, TGT, max_len=6, min_len=1)
    assert kept.tolist() == [0, 5]
    # pair 2 (src 7) and pair 3 (tgt 9) too long; pairs 1 and 4 have an empty side
    assert counts == {"kept": 2, "too_long": 2, "too_short": 2}


def test_filter_by_length_bounds_are_inclusive():
    kept, counts = filter_by_length(SRC, TGT, max_len=9, min_len=0)
    assert kept.tolist() == [0, 1, 2, 3, 4, 5]
    assert counts == {"kept": 6, "too_long": 0, "too_short": 0}
    kept, _ = filter_by_length(SRC, TGT, max_len=5, min_len=3)
    assert kept.tolist() == [0, 5]


def test_filter_too_long_wins_over_too_short():
    _, counts = filter_by_length([[1] * 9], [[]], max_len=4, min_len=1)
    assert counts == {"kept": 0, "too_long": 1, "too_short": 0}


def test_filter_accepts_ragged_ids():
    kept, counts = filter_by_length(RaggedIds.from_lists(SRC), RaggedIds.from_lists(TGT), max_len=6)
    assert kept.tolist() == [0, 5] and counts["kept"] == 2
    assert kept.dtype == np.int64


def test_filter_rejects_inverted_bounds():
    with pytest.raises(UserError) as e:
        filter_by_length(SRC, TGT, max_len=2, min_len=3)
    assert str(e.value) == "length filter: need 0 <= min_len <= max_len, got min_len=3, max_len=2"
