"""A trained model, exported, translates as aiayn does: on 200 unseen demo sentences the greedy
outputs of CTranslate2 and of transformers' Marian are aiayn's, token for token, and beam-4 outputs
are aiayn's on >= 95% (the runtimes' length penalty is |Y|^alpha, so aiayn decodes with
length_penalty fairseq here; their stopping rules differ in detail). Slow: it trains a small demo."""

import re
import subprocess
import sys

import pytest
import torch

from aiayn.builder.cli import main
from aiayn.builder.data.demo import generate_demo
from aiayn.builder.decode.checkpoint import load_for_inference
from aiayn.builder.decode.translate import padded, translate_texts
from aiayn.builder.export import export
from aiayn.schemas.decode import DecodeSpec
from tests.builder.export.runs import aiayn_outputs, ct2_outputs, hf_outputs
from tests.conftest import EXPERIMENTS, ROOT

pytestmark = pytest.mark.slow

SMALL_DEMO = [
    "dims.d_model=64", "dims.d_ff=256", "dims.h=4", "dims.d_k=16", "dims.d_v=16", "dims.N=2", "dims.vocab_size=500",
    "data.n_valid=12", "data.n_test=12", "train.tokens_per_step=2000", "trainer.max_steps=120",
    "trainer.val_check_interval=null", "train.lr_schedule.factor=1.0", "train.lr_schedule.warmup_steps=60",
    "trainer.enable_progress_bar=false",
]  # fmt: skip
MAX_LEN_B, ALPHA = 50, 0.6


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("trained")
    args = [
        "train",
        str(EXPERIMENTS / "demo.yaml"),
        *SMALL_DEMO,
        f"data.cache_dir={root / 'cache'}",
        "--runs",
        str(root / "runs"),
    ]
    assert main(args) == 0
    [run] = (root / "runs").glob("*/version_0")
    loaded = load_for_inference(run)
    unseen = generate_demo(200, 1, 1, 4321)["train"][0]
    return run, loaded, loaded.src_tokenizer.encode_batch(unseen)


def agreement(a: list[list[int]], b: list[list[int]]) -> float:
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a)


def test_ctranslate2_translates_as_aiayn(trained, tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    run, loaded, sources = trained
    assert main(["export", str(run), "--to", "ctranslate2", str(tmp_path / "ct2")]) == 0
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu")
    greedy = aiayn_outputs(loaded, sources, beam=1, alpha=ALPHA, max_len_b=MAX_LEN_B)
    assert len({tuple(g) for g in greedy}) > 100  # a trained model: varied, non-empty outputs
    assert ct2_outputs(translator, loaded.tgt_tokenizer, sources, beam=1, alpha=ALPHA, max_len_b=MAX_LEN_B) == greedy
    beam = aiayn_outputs(loaded, sources, beam=4, alpha=ALPHA, max_len_b=MAX_LEN_B)
    theirs = ct2_outputs(translator, loaded.tgt_tokenizer, sources, beam=4, alpha=ALPHA, max_len_b=MAX_LEN_B)
    assert agreement(theirs, beam) >= 0.95


def test_marian_translates_as_aiayn(trained, tmp_path):
    transformers = pytest.importorskip("transformers")
    run, loaded, sources = trained
    export(run, "huggingface", tmp_path / "hf")
    hf = transformers.MarianMTModel.from_pretrained(tmp_path / "hf").eval()
    x = padded(sources[:8], 0)
    y = padded([[1, *t] for t in aiayn_outputs(loaded, sources[:8], beam=1, alpha=ALPHA, max_len_b=MAX_LEN_B)], 0)
    with torch.no_grad():
        ours, theirs = loaded.model(x, y), hf(input_ids=x, attention_mask=x.ne(0), decoder_input_ids=y).logits
    torch.testing.assert_close(theirs[y.ne(0)], ours[y.ne(0)], atol=2e-3, rtol=1e-4)  # LayerNorm eps 1e-5 vs 1e-6
    greedy = aiayn_outputs(loaded, sources, beam=1, alpha=ALPHA, max_len_b=MAX_LEN_B)
    assert hf_outputs(hf, sources, beam=1, alpha=ALPHA, max_len_b=MAX_LEN_B) == greedy
    beam = aiayn_outputs(loaded, sources, beam=4, alpha=ALPHA, max_len_b=MAX_LEN_B)
    assert agreement(hf_outputs(hf, sources, beam=4, alpha=ALPHA, max_len_b=MAX_LEN_B), beam) >= 0.95


def test_the_manuals_deploy_examples_print_aiayns_translation(trained, tmp_path):
    """The manual's Python examples (docs/deploy.md), run as written on this model exported as it exports the demo."""
    pytest.importorskip("ctranslate2")
    pytest.importorskip("transformers")
    run, loaded, _ = trained
    section = (ROOT / "docs" / "deploy.md").read_text().split("## Deploy")[1].split("\n## ")[0]
    ct2_example, marian_example = re.findall(r"```python\n(.*?)```", section, re.S)
    export(run, "ctranslate2", tmp_path / "runs" / "deploy" / "ct2")  # where the page's `aiayn export` lines write
    export(run, "huggingface", tmp_path / "runs" / "deploy" / "marian")
    sentence = "she bought three hundred twenty-one books"
    assert sentence in ct2_example and sentence in marian_example
    decode = DecodeSpec(beam=4, alpha=0.6, length_penalty="fairseq", max_len_b=50)
    [expected] = translate_texts(loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer, [sentence], decode)
    for example, printed in ((ct2_example, expected), (marian_example, repr([expected]))):
        done = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout == printed + "\n"
