"""Sampling filters, registered in the `sampling_filter` slot: aiayn's `typical` and one from
outside aiayn (examples/plugin's min_p.py), each equal, draw for draw, to transformers' warper
(TypicalLogitsWarper, MinPLogitsWarper) on the same logits and seed, and taken by name by the
Python API's translate and generate and by the CLI (`--filter`) without a line of aiayn's source
naming the plugin's."""

import importlib.util
import shutil

import pytest
import torch

from aiayn.builder.cli import main
from aiayn.builder.decode.load import load_run
from aiayn.builder.decode.sampling import Sampling, filters_of
from aiayn.builder.errors import UserError
from tests.conftest import ROOT, registry

FIXTURES = ROOT / "tests" / "fixtures" / "before-graph"


def min_p_module():
    """examples/plugin's min_p.py, read from its file (the tests do not depend on what is installed)."""
    path = ROOT / "examples" / "plugin" / "aiayn_example_plugin" / "min_p.py"
    spec = importlib.util.spec_from_file_location("aiayn_example_plugin_min_p", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def with_min_p():
    return registry().extended(min_p_module().register)


@pytest.mark.parametrize("min_p", [0.0, 0.05, 0.3, 1.0])
def test_min_p_draws_what_transformers_min_p_warper_draws(with_min_p, min_p):
    logits_processing = pytest.importorskip("transformers.generation.logits_process")
    scores = torch.randn(256, 50, generator=torch.Generator().manual_seed(0)) * 3  # (n, V)
    sampling = Sampling(filters=filters_of([{"type": "min_p", "min_p": min_p}], with_min_p))
    theirs = logits_processing.MinPLogitsWarper(min_p=min_p)(None, scores.clone()).softmax(-1)
    torch.testing.assert_close(sampling.probabilities(scores), theirs, rtol=1e-5, atol=1e-7)
    assert torch.equal(sampling.probabilities(scores) > 0, theirs > 0)  # the same tokens kept
    ours = sampling.choose(scores, torch.Generator().manual_seed(7))
    drawn = torch.multinomial(theirs, 1, generator=torch.Generator().manual_seed(7)).squeeze(1)
    assert torch.equal(ours, drawn)


@pytest.mark.parametrize("mass", [0.2, 0.5, 0.9, 0.95])
def test_typical_draws_what_transformers_typical_warper_draws(mass):
    logits_processing = pytest.importorskip("transformers.generation.logits_process")
    scores = torch.randn(256, 50, generator=torch.Generator().manual_seed(1)) * 2  # (n, V)
    sampling = Sampling(filters=filters_of([{"type": "typical", "mass": mass}], registry()))
    theirs = logits_processing.TypicalLogitsWarper(mass=mass)(None, scores.clone()).softmax(-1)
    torch.testing.assert_close(sampling.probabilities(scores), theirs, rtol=1e-5, atol=1e-7)
    assert torch.equal(sampling.probabilities(scores) > 0, theirs > 0)  # the same tokens kept
    ours = sampling.choose(scores, torch.Generator().manual_seed(5))
    assert torch.equal(ours, torch.multinomial(theirs, 1, generator=torch.Generator().manual_seed(5)).squeeze(1))


def test_a_filter_is_refused_by_name(with_min_p):
    known = r" \(sampling filters: typical, min_p\)$"
    with pytest.raises(UserError, match=r"^filters\[1\]: .*'nope'.*" + known):
        filters_of(["min_p", {"type": "nope"}], with_min_p)
    with pytest.raises(UserError, match=r"^filters\[0\]: min_p: Input should be less than or equal to 1" + known):
        filters_of([{"type": "min_p", "min_p": 2}], with_min_p)
    with pytest.raises(UserError, match=r"^--filter: expected a list of sampling filters"):
        filters_of({"type": "min_p"}, with_min_p, "--filter")
    with pytest.raises(UserError, match=r"^filters\[0\]: .*'min_p'.* \(sampling filters: typical\)$"):
        filters_of(["min_p"], registry())  # the plugin not installed


@pytest.fixture
def runs(tmp_path):
    shutil.copytree(FIXTURES, tmp_path / "runs")
    return tmp_path / "runs"


def test_the_api_takes_it_by_name_min_p_1_is_greedy_0_is_no_filter(runs, with_min_p):
    lm = load_run(runs / "lm" / "version_0", registry=with_min_p)
    prompts = ["a man", "two"]
    assert lm.generate(prompts, filters=[{"type": "min_p", "min_p": 1.0}], max_new_tokens=5) == lm.generate(
        prompts, greedy=True, max_new_tokens=5
    )
    assert lm.generate(prompts, filters=[{"type": "min_p", "min_p": 0.0}], seed=3, max_new_tokens=5) == lm.generate(
        prompts, seed=3, max_new_tokens=5
    )
    translator = load_run(runs / "prefix" / "version_0", registry=with_min_p)
    lines = (runs / "prefix" / "version_0" / "data" / "valid.en").read_text().splitlines()
    only_the_best = translator.translate(lines, sampling=True, filters=["min_p"], seed=2, n_best=1)
    assert translator.translate(lines, sampling=True, filters=[{"type": "min_p", "min_p": 1.0}]) == translator.translate(
        lines, beam=1
    )  # the most probable token alone stays: a beam of 1
    assert len(only_the_best) == len(lines)
    with pytest.raises(UserError, match=r"^filters: they shape sampling, and greedy takes the most probable token"):
        lm.generate(prompts, greedy=True, filters=["min_p"])
    with pytest.raises(UserError, match=r"^filters: it shapes sampling; give sampling=True, or drop it$"):
        translator.translate(lines, filters=["min_p"])


def test_the_cli_names_its_flag(runs, capsys):
    run = runs / "lm" / "version_0"
    assert main(["generate", str(run), "-p", "a", "--filter", "min_p"]) == 2
    assert capsys.readouterr().err.startswith("aiayn generate: error: --filter[0]: Input tag 'min_p' found using 'type'")
    assert main(["generate", str(run), "-p", "a man", "--filter", "{type: typical, mass: 0.5}", "-n", "3"]) == 0
    assert capsys.readouterr().out.startswith("a man")
    assert main(["generate", str(run), "-p", "a", "--greedy", "--filter", "min_p"]) == 2
    assert "--greedy takes the most probable token; --filter shapes sampling" in capsys.readouterr().err
