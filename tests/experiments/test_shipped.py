"""Every shipped experiment validates, builds, and reports its Table 3 row exactly."""

import json
from functools import partial

import pytest
import torch

from aiayn.builder.cli import main
from aiayn.builder.decode.checkpoint import source_model
from aiayn.builder.model.build import build_model
from aiayn.builder.model.size import count_params
from tests.conftest import EXPERIMENTS, load_experiment, registry

SHIPPED = sorted(p.relative_to(EXPERIMENTS).as_posix() for p in EXPERIMENTS.rglob("*.yaml") if not p.name.endswith(".sweep.yaml"))
V = 37000

# Table 3 of the paper: N, d_model, d_ff, h, d_k, d_v, P_drop, eps_ls, positional, train steps
BASE = dict(
    N=6, d_model=512, d_ff=2048, h=8, d_k=64, d_v=64, P_drop=0.1, eps_ls=0.1, positional="sinusoidal", train_steps=100_000
)
ROWS = {
    "base.yaml": {},
    "big.yaml": dict(d_model=1024, d_ff=4096, h=16, P_drop=0.3, train_steps=300_000),
    "table3/a_h1.yaml": dict(h=1, d_k=512, d_v=512),
    "table3/a_h4.yaml": dict(h=4, d_k=128, d_v=128),
    "table3/a_h16.yaml": dict(h=16, d_k=32, d_v=32),
    "table3/a_h32.yaml": dict(h=32, d_k=16, d_v=16),
    "table3/b_dk16.yaml": dict(d_k=16),
    "table3/b_dk32.yaml": dict(d_k=32),
    "table3/c_n2.yaml": dict(N=2),
    "table3/c_n4.yaml": dict(N=4),
    "table3/c_n8.yaml": dict(N=8),
    "table3/c_dmodel256.yaml": dict(d_model=256, d_k=32, d_v=32),
    "table3/c_dmodel1024.yaml": dict(d_model=1024, d_k=128, d_v=128),
    "table3/c_dff1024.yaml": dict(d_ff=1024),
    "table3/c_dff4096.yaml": dict(d_ff=4096),
    "table3/d_pdrop0.0.yaml": dict(P_drop=0.0),
    "table3/d_pdrop0.2.yaml": dict(P_drop=0.2),
    "table3/d_ls0.0.yaml": dict(eps_ls=0.0),
    "table3/d_ls0.2.yaml": dict(eps_ls=0.2),
    "table3/e_learned.yaml": dict(positional="learned"),
}


def paper_params(N, d_model, d_ff, h, d_k, d_v, positional, **_):
    """The parameter count written out from the paper's description, independently of builder."""
    attention = d_model * h * d_k * 2 + d_model * h * d_v + h * d_v * d_model + (2 * h * d_k + h * d_v + d_model)
    ffn = d_model * d_ff + d_ff + d_ff * d_model + d_model
    norm = 2 * d_model
    encoder_layer = attention + ffn + 2 * norm
    decoder_layer = 2 * attention + ffn + 3 * norm
    learned = 2 * 512 * d_model if positional == "learned" else 0
    return V * d_model + N * (encoder_layer + decoder_layer) + learned


def test_every_table3_row_ships():
    assert len([s for s in SHIPPED if s.startswith("table3/")]) == 18
    assert set(ROWS) <= set(SHIPPED)


def test_paper_totals():
    assert count_params(load_experiment(EXPERIMENTS / "base.yaml").model) == 63_082_496
    assert count_params(load_experiment(EXPERIMENTS / "big.yaml").model) == 214_245_376


def test_the_english_french_models_of_table_2():
    """Table 2's EN-FR models: EN-DE's but for the data, a vocabulary of 32000 and the big model's
    P_drop 0.1; counted exactly (the paper gives no count for them) and against the formula."""
    base, big = (load_experiment(EXPERIMENTS / f"{n}-enfr.yaml") for n in ("base", "big"))
    assert (count_params(base.model), count_params(big.model)) == (60_522_496, 209_125_376)
    vocab = 32000 * 512 - V * 512
    assert count_params(base.model) == paper_params(**BASE) + vocab
    assert (base.data.dir.endswith("wmt14-en-fr"), base.data.tgt_lang, base.reported.bleu, big.reported.bleu) == (
        True,
        "fr",
        38.1,
        41.8,
    )
    assert (big.model.dropout, big.trainer.max_steps, big.train.checkpoint.keep_last) == (0.1, 300_000, 20)
    assert base.reported.group is None and big.reported.group is None  # Table 2's, not rows of Table 3


@pytest.mark.parametrize("name", [r for r in ROWS if r.startswith("table3/a_")])
def test_row_a_keeps_the_parameter_count(name):
    assert count_params(load_experiment(EXPERIMENTS / name).model) == 63_082_496


@pytest.mark.parametrize("name", sorted(ROWS))
def test_show_json_reports_the_row(name, capsys):
    assert main(["show", str(EXPERIMENTS / name), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    expected = {**BASE, **ROWS[name]}
    assert info["paper"] == expected
    assert info["params"] == paper_params(**expected)
    assert info["reported"]["bleu"] > 0


@pytest.fixture(scope="module")
def opus_mt(tmp_path_factory):
    """finetune-opus-mt.yaml's model is its folder's: one made here (tests/builder/formats/opus_mt.py)."""
    pytest.importorskip("transformers")
    from tests.builder.formats.opus_mt import opus_mt_folder

    return opus_mt_folder(tmp_path_factory.mktemp("opus") / "opus-mt-en-de")


@pytest.fixture(scope="module")
def hf_model(tmp_path_factory):
    """lm/finetune-hf.yaml's model is its folder's: a GPT-2 one made here (tests/builder/formats/causal_lm.py)."""
    pytest.importorskip("transformers")
    from tests.builder.formats.causal_lm import hf_folder

    return hf_folder(tmp_path_factory.mktemp("hf") / "gpt2", "gpt2-tied", n_positions=256)


@pytest.mark.parametrize("name", SHIPPED)
def test_builds_with_the_counted_parameters(name, request, monkeypatch):
    if name == "finetune-opus-mt.yaml":
        monkeypatch.setenv("OPUS_MT", str(request.getfixturevalue("opus_mt")))
        monkeypatch.setenv("FINETUNE_DATA", "corpus")
    if name == "lm/finetune-hf.yaml":
        monkeypatch.setenv("HF_MODEL", str(request.getfixturevalue("hf_model")))
    spec = load_experiment(EXPERIMENTS / name, model_of=partial(source_model, registry=registry()))
    model = build_model(spec.model, device="meta")
    assert sum(p.numel() for p in model.parameters()) == count_params(spec.model)


def test_base_builds_for_real_and_runs():
    spec = load_experiment(EXPERIMENTS / "table3/c_n2.yaml", ["dims.vocab_size=100"])
    model = build_model(spec.model).eval()
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])
    logits = model(src, torch.tensor([[1, 10, 11], [1, 12, 0]]))
    assert logits.shape == (2, 3, 100)
    assert sum(p.numel() for p in model.parameters()) == count_params(spec.model)
