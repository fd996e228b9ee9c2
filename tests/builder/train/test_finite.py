"""A setting that validates but makes the model compute NaN stops training at its first steps with
a message naming the sub-layer by its YAML path (exit 2, no run left behind); a model whose
probabilities are NaN is refused by the search, never a traceback."""

import copy
import json

import pytest
import torch

from aiayn.builder.decode.search import beam_search
from aiayn.builder.errors import UserError
from aiayn.builder.train.finite import first_non_finite, non_finite_message, sublayer_path
from tests.builder.cli.test_bad_inputs import TINY, cli
from tests.builder.decode.greedy import greedy
from tests.builder.decode.test_search import make_model
from tests.conftest import EXPERIMENTS, load_experiment
from tests.models import BOS, EOS

DEMO = EXPERIMENTS / "demo.yaml"


def test_an_update_that_throws_the_weights_off_stops_the_run_at_its_second_step(tmp_path):
    code, _, err = cli("train", DEMO, *TINY, "trainer.max_steps=3", "train.lr_schedule.factor=1e30", "train.lr_schedule.warmup_steps=2",
                       f"data.cache_dir={tmp_path / 'cache'}", "--runs", tmp_path / "runs")  # fmt: skip
    assert (code, err) == (
        2, "aiayn train: error: the loss of training step 2 is nan: after 1 update, model.encoder.layer[0] (self_attention; "
        "layer 0 of the encoder) computes non-finite values; lower train.lr_schedule.factor (1e+30), or change its settings\n",
    )  # fmt: skip
    status = json.loads((tmp_path / "runs" / "demo" / "version_0" / "status.json").read_text())  # step 1 was saved
    assert status["status"] == "failed" and status["error"].startswith("the loss of training step 2 is nan")


def test_the_first_sub_layer_that_is_not_finite_is_named_by_its_yaml_path():
    spec = load_experiment(DEMO, ["dims.N=3", "model.decoder.overrides={1: [{type: causal_self_attention, h: 8, d_k: 16, "
                                  "d_v: 16, softcap: 5.0}, {type: feed_forward, d_ff: 256}]}"])  # fmt: skip
    assert sublayer_path(spec, "decoder.layers.1.sublayers.0.sublayer") == "model.decoder.overrides.1[0]"
    assert sublayer_path(spec, "decoder.layers.2.sublayers.2.sublayer") == "model.decoder.layer[2]"
    assert sublayer_path(spec, "decoder.layers.2.sublayers.2.norm") is None
    from aiayn.builder.model.build import build_model

    model = build_model(spec.model).eval()
    with torch.no_grad():
        model.decoder.layers[1].sublayers[0].sublayer.w_o.weight.fill_(3e38)  # finite, its products not
    src, tgt = torch.tensor([[5, 6, 7]]), torch.tensor([[1, 8, 9]])
    culprit = first_non_finite(model, lambda: model(src, tgt))
    assert culprit == "decoder.layers.1.sublayers.0.sublayer"
    assert non_finite_message(spec, 0, float("nan"), model, culprit) == (
        "the loss of training step 1 is nan: model.decoder.overrides.1[0] (causal_self_attention with softcap 5.0; layer 1 of the "
        "decoder) computes non-finite values; change its settings"
    )
    with torch.no_grad():
        model.decoder.layers[1].sublayers[0].sublayer.w_o.weight.fill_(float("inf"))
    assert non_finite_message(spec, 1, float("inf"), model, culprit).startswith(
        "the loss of training step 2 is inf: the update before it made 1 weight tensors non-finite; lower train.lr_schedule.factor"
    )


def test_a_model_that_computes_nan_is_refused_by_the_search():
    model = copy.deepcopy(make_model()).eval()
    with torch.no_grad():
        model.generator.weight.fill_(float("nan"))
    src = torch.tensor([[3, 4, 5]])
    for search in (greedy, beam_search):
        with pytest.raises(UserError, match=r"^the model computes NaN for the next token's probabilities \(its weights are not "):
            search(model, src, bos_id=BOS, eos_id=EOS)
