"""A variant declared once goes across both graphs: graphs.sweep.yaml with a grid point crosses
the encoder-decoder and decoder-only translation (causal, prefix) with it, each trial valid, the
grid's override reaching the decoder's first layer in either graph."""

from aiayn.builder.sweep.plan import expand, load_sweep, split_overrides
from tests.builder.cli.test_bad_inputs import cli
from tests.conftest import EXPERIMENTS

SWEEP = EXPERIMENTS / "multi30k" / "graphs.sweep.yaml"
CROSS = ['sweep.grid={"model.decoder.layer[0].qk_norm": [false, true]}', "sweep.seeds=[1]"]


def test_a_grid_point_crosses_every_graph_of_the_sweep():
    sweep_overrides, _ = split_overrides(CROSS)
    trials = expand(load_sweep(SWEEP, sweep_overrides), SWEEP)
    graphs = ["encoder-decoder", "decoder-only", "decoder-only-prefix"]
    assert [t.name for t in trials] == [f"{g}-qk_norm{q}-seed1" for g in graphs for q in ("false", "true")]
    for trial in trials:
        model = trial.spec.model
        assert (model.encoder is None) == trial.name.startswith("decoder-only")
        assert model.decoder.layer[0].qk_norm == ("qk_normtrue" in trial.name)
        assert getattr(model.graph, "source_mask", "causal") == ("prefix" if "prefix" in trial.name else "causal")


def test_the_dry_run_lists_the_crossing_with_exact_parameter_counts(tmp_path):
    code, out, err = cli("sweep", SWEEP, *CROSS, "--dry-run", "--runs", tmp_path)
    assert code == 0, err
    counts = {line.split()[0]: line.split()[1] for line in out.splitlines()[2:-1]}
    assert counts == {
        "encoder-decoder-qk_normfalse-seed1": "2,613,504",  # tiny.yaml
        "encoder-decoder-qk_normtrue-seed1": "2,613,760",
        "decoder-only-qk_normfalse-seed1": "2,613,376",  # tiny-decoder-only.yaml: within 0.01%
        "decoder-only-qk_normtrue-seed1": "2,614,016",
        "decoder-only-prefix-qk_normfalse-seed1": "2,613,376",
        "decoder-only-prefix-qk_normtrue-seed1": "2,614,016",
    }
    assert not tmp_path.joinpath("multi30k-graphs").exists()  # a dry run writes nothing
