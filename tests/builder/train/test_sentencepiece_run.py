"""`aiayn train experiments/demo.yaml data.tokenizer.type=sentencepiece` trains and translates, and
`aiayn show` says how the text is tokenized; init_from refuses a tokenizer of another kind."""

import io
import json
import sys

import pytest

from aiayn.builder.cli import main
from aiayn.builder.data.spm import SentencePieceTokenizer
from aiayn.builder.data.tokenizer import load_run_tokenizers
from aiayn.builder.run.rundir import RunDir
from tests.builder.train.test_training import DEMO, tiny
from tests.conftest import registry

pytest.importorskip("sentencepiece")


def test_the_demo_trains_and_translates_with_sentencepiece(tmp_path, monkeypatch, capsys):
    runs = tmp_path / "runs"
    args = tiny(
        tmp_path,
        "data.tokenizer.type=sentencepiece",
        "trainer.max_steps=4",
        "trainer.val_check_interval=null",
        "--runs",
        str(runs),
    )
    assert main(["train", DEMO, *args]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert (
        "tokenizer: SentencePiece unigram (300 pieces asked a model): joint: one sentencepiece tokenizer and one vocabulary"
        in out
    )
    run = RunDir(runs / "demo" / "version_0")
    src, tgt = load_run_tokenizers(run, registry())
    assert isinstance(src, SentencePieceTokenizer) and src is tgt
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"she bought three books\n"), encoding="utf-8"))
    assert main(["translate", str(run.path)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
    # a fine-tune that states another kind of tokenizer than the one it takes from its source
    assert main(["train", DEMO, *tiny(tmp_path, f"init_from={run.path}", "data.tokenizer.type=bpe", "--runs", str(runs))]) == 2
    assert capsys.readouterr().err == (
        f"aiayn train: error: data.tokenizer.type is bpe, but init_from's source {run.path} tokenizes with sentencepiece, and the "
        "run takes its tokenizer (init_from.tokenizer: source); drop data.tokenizer to take the source's, or set "
        "init_from.tokenizer: own to train one of this kind (the embeddings then meet ids they did not learn)\n"
    )
    assert [p.name for p in (runs / "demo").iterdir()] == ["version_0"]  # nothing written


@pytest.mark.parametrize(("overrides", "said"), [
    ([], "BPE, joint: one model and one vocabulary for both sides"),
    (["data.tokenizer.type=sentencepiece", "data.tokenizer.joint=false"], "SentencePiece unigram, a model a side over one vocabulary (opus-mt's way)"),
    (["model.embedding.shared_vocab=false", "model.embedding.share=none"], "BPE, a model and a vocabulary a side"),
])  # fmt: skip
def test_show_says_which_layout(overrides, said, capsys):
    assert main(["show", DEMO, *overrides, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokenizer"] == said
