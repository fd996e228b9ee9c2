"""A run directory written by aiayn 0.1 (tests/fixtures/release-0.1, made before the `aiayn`
namespace, the norm spec and the registry) still translates as it did, evaluates, exports and
resumes."""

import json
import shutil

import pytest
import torch

from aiayn.builder.cli import main
from aiayn.builder.decode.checkpoint import load_for_inference
from tests.builder.export.runs import aiayn_outputs, ct2_outputs
from tests.conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "release-0.1" / "version_0"


@pytest.fixture
def run(tmp_path):
    copy = tmp_path / "runs" / "release-0.1" / "version_0"
    shutil.copytree(FIXTURE, copy)
    return copy


def test_it_translates_its_validation_split_as_release_0_1_did(run, capsys):
    assert main(["translate", str(run), "--input", str(run / "data" / "valid.en")]) == 0
    assert capsys.readouterr().out == (FIXTURE / "translations" / "valid.hyp").read_text()


def test_it_evaluates_with_the_perplexity_release_0_1_reported(run, capsys):
    assert main(["evaluate", str(run), "--split", "valid", "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    recorded = json.loads((FIXTURE / "results.json").read_text())
    assert scores["ppl"] == pytest.approx(recorded["ppl"], rel=1e-6)
    assert scores["bleu"] == recorded["bleu"]


def test_it_exports_to_ctranslate2_token_for_token(run, tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    assert main(["export", str(run), "--to", "ctranslate2", str(tmp_path / "ct2")]) == 0
    loaded = load_for_inference(run)
    sources = loaded.src_tokenizer.encode_batch((run / "data" / "valid.en").read_text().splitlines())
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu")
    ours = aiayn_outputs(loaded, sources, beam=1, alpha=0.6, max_len_b=5)
    assert ct2_outputs(translator, loaded.tgt_tokenizer, sources, beam=1, alpha=0.6, max_len_b=5) == ours


def test_it_resumes_from_its_last_checkpoint(run):
    before = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert before["global_step"] == 2
    assert main(["train", str(run / "config.yaml"), "trainer.max_steps=4", "--run-dir", str(run)]) == 0
    assert json.loads((run / "results.json").read_text())["steps"] == 4
    after = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert after["global_step"] == 4 and after["state_dict"].keys() == before["state_dict"].keys()
    assert sorted(p.name for p in (run / "checkpoints").glob("last*")) == ["last.ckpt"]  # moved, yet no last-v1.ckpt
