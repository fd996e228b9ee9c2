"""JSON that aiayn did not write, read by one reader: nesting deep enough to exhaust Python's
parser, a file past the size limit, bytes that are not UTF-8, and a value of the wrong type are
each one message naming the file (exit 2), from every verb that reads such a file."""

import json

import pytest

from aiayn.builder.run import jsonfile
from aiayn.builder.run.jsonfile import JsonFileError, read_json
from tests.builder.cli.test_bad_inputs import cli
from tests.builder.sweep.test_sweep_results import put
from tests.conftest import EXPERIMENTS

DEEP = "[" * 100_000 + "]" * 100_000
DEPTH = "its arrays or objects nest deeper than Python's JSON parser can follow"


def test_depth_size_bytes_and_syntax_are_json_file_errors(tmp_path, monkeypatch):
    path = tmp_path / "x.json"
    path.write_text(DEEP)
    with pytest.raises(JsonFileError, match=f"^{DEPTH}$"):
        read_json(path)
    path.write_text('{"a": 1}')
    assert read_json(path) == {"a": 1}
    monkeypatch.setattr(jsonfile, "LIMIT", 5)
    with pytest.raises(JsonFileError, match=r"^it is 8 bytes, more than the 5 aiayn reads as JSON$"):
        read_json(path, limit=jsonfile.LIMIT)
    path.write_bytes(b"\xff{}")
    with pytest.raises(JsonFileError, match=r"^'utf-8' codec can't decode byte 0xff in position 0: invalid start byte$"):
        read_json(path)
    path.write_text("{")
    with pytest.raises(JsonFileError, match=r"^Expecting property name enclosed in double quotes: line 1 column 2 \(char 1\)$"):
        read_json(path)


def test_a_results_json_nested_too_deep_is_named(tmp_path):
    put(tmp_path / "runs", "a", "a", ppl=5.0, bleu=20.0)
    results = tmp_path / "runs" / "a" / "version_0" / "results.json"
    results.write_text(DEEP)
    code, _, err = cli("results", tmp_path / "runs")
    assert (code, err) == (
        2, f"aiayn results: error: {results}: not a results.json of `aiayn train`: not valid JSON ({DEPTH}); delete it, or re-run that run\n",
    )  # fmt: skip


def test_a_marian_config_and_a_corpus_record_nested_too_deep_are_named(tmp_path):
    folder = tmp_path / "opus-mt"
    folder.mkdir()
    (folder / "config.json").write_text(DEEP)
    code, _, err = cli("translate", folder)
    assert (code, err) == (
        2, f"aiayn translate: error: {folder / 'config.json'} cannot be read as JSON ({DEPTH}); a Hugging Face model folder's "
        "config.json is a JSON object\n",
    )  # fmt: skip
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            (corpus / f"{split}.{lang}").write_text("a b\n")
    (corpus / "prepared.json").write_text(DEEP)
    code, _, err = cli("train", EXPERIMENTS / "demo.yaml", "data={type: files, dir: " + str(corpus) + ", pipeline: [lowercase]}",
                       "--runs", tmp_path / "runs")  # fmt: skip
    assert code == 2 and err.endswith(
        f"{corpus / 'prepared.json'} cannot be read as JSON ({DEPTH}); write the corpus again with `aiayn data`, or delete "
        f"prepared.json if the text in {corpus} is raw\n"
    ), err
    assert not (tmp_path / "runs").exists()


def test_a_tokenizer_file_nested_too_deep_is_named(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"model": None})[:-1] + ', "x": ' + DEEP + "}")
    code, _, err = cli("train", EXPERIMENTS / "demo.yaml", f"data.tokenizer={{type: file, path: {path}}}", "trainer.max_steps=1",
                       "--runs", tmp_path / "runs")  # fmt: skip
    assert code == 2 and DEPTH in err and str(path) in err and "Traceback" not in err, err
    assert not (tmp_path / "runs").exists()
