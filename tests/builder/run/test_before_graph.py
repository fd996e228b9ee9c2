"""Run directories written before the graph was named (tests/fixtures/before-graph, commit 120ea1a:
`model.source_mask` at the model's top, no `model.graph`) load as the graph they were, and decode
and score to the bytes that commit wrote."""

import shutil

import pytest

from aiayn.builder.cli import main
from aiayn.builder.decode.checkpoint import load_for_inference
from aiayn.builder.graph import graph_of
from aiayn.schemas.graph import DecoderOnlySpec
from tests.conftest import ROOT, registry

FIXTURES = ROOT / "tests" / "fixtures" / "before-graph"


@pytest.fixture
def runs(tmp_path):
    shutil.copytree(FIXTURES, tmp_path / "runs")
    return tmp_path / "runs"


def test_their_configs_read_as_the_graph_they_were(runs):
    prefix = load_for_inference(runs / "prefix" / "version_0", registry()).spec
    lm = load_for_inference(runs / "lm" / "version_0", registry()).spec
    assert prefix.model.graph == DecoderOnlySpec(source_mask="prefix") and prefix.train.source_loss
    assert lm.model.graph == DecoderOnlySpec() and lm.task == "language_model" and prefix.task == "translation"
    assert (graph_of(prefix).name, graph_of(lm).name) == ("decoder-only", "decoder-only")


@pytest.mark.parametrize(
    ("run", "args", "kept"),
    [
        ("prefix", ["translate", "{run}", "-i", "{run}/data/valid.en", "--n-best", "2", "--scores"], "nbest.txt"),
        ("prefix", ["score", "{run}", "--src", "{run}/data/valid.en", "--tgt", "{run}/data/valid.de"], "score.txt"),
        ("lm", ["generate", "{run}", "-p", "a man", "-p", "two", "--greedy", "-n", "5"], "greedy.txt"),
        ("lm", ["generate", "{run}", "-p", "a man", "-p", "two", "--seed", "3", "-n", "5"], "sampled.txt"),
        ("lm", ["score", "{run}", "--text", "{run}/data/valid.en"], "score.txt"),
    ],
)
def test_they_decode_and_score_to_the_bytes_written_then(runs, capsys, run, args, kept):
    folder = runs / run / "version_0"
    assert main([a.replace("{run}", str(folder)) for a in args]) == 0
    assert capsys.readouterr().out == (folder / "outputs" / kept).read_text()


def test_the_old_key_beside_the_new_one_is_one_message(runs, capsys):
    code = main(
        ["validate", str(ROOT / "experiments" / "lm" / "demo.yaml"), "model.source_mask=prefix", "model.graph.source_mask=causal"]
    )
    assert code == 2
    assert capsys.readouterr().err == (
        f"aiayn validate: error: {ROOT / 'experiments' / 'lm' / 'demo.yaml'} is not a valid experiment (1 error):\n"
        "  model.source_mask: is read as graph.source_mask, and graph is given with it; set graph.source_mask alone "
        "(set on the command line: model.source_mask=prefix)\n"
    )
