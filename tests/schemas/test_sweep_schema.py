"""The sweep schema: shorthands, the grid's product, launchers, and its errors' exact text."""

import pytest
from pydantic import ValidationError

from aiayn.schemas._base import FieldError
from aiayn.schemas.sweep import LocalLauncherSpec, SlurmLauncherSpec, SweepSpec, VariantSpec


def sweep(**fields) -> SweepSpec:
    return SweepSpec.model_validate({"name": "s", "base": "base.yaml", **fields})


def field_error(**fields) -> tuple[str, str]:
    """(path, message) of the one FieldError the sweep raises."""
    with pytest.raises(ValidationError) as info:
        sweep(**fields)
    (error,) = info.value.errors(include_url=False)
    found = error["ctx"]["error"]
    assert isinstance(found, FieldError)
    return error["loc"], found.path, found.message


def test_variant_shorthands():
    s = sweep(
        variants=["table3/a_h1.yaml", ["dims.h=2", "dims.d_k=256"], {}, None, {"name": "wide", "overrides": ["dims.d_ff=4096"]}]
    )
    assert s.variants == (
        VariantSpec(experiment="table3/a_h1.yaml"),
        VariantSpec(overrides=("dims.h=2", "dims.d_k=256")),
        VariantSpec(),
        VariantSpec(),
        VariantSpec(name="wide", overrides=("dims.d_ff=4096",)),
    )


def test_no_variants_is_the_base_alone():
    assert sweep().all_variants == (VariantSpec(),)
    assert sweep().seeds == (1,)
    assert sweep().launcher == LocalLauncherSpec(parallel=1, gpus_per_trial=None)


def test_grid_points_are_the_product_last_key_fastest():
    s = sweep(grid={"dims.h": [1, 4], "dims.P_drop": [0.0, 0.2], "train.validation.bleu": [False]})
    assert s.grid_points == [
        {"dims.h": 1, "dims.P_drop": 0.0, "train.validation.bleu": False},
        {"dims.h": 1, "dims.P_drop": 0.2, "train.validation.bleu": False},
        {"dims.h": 4, "dims.P_drop": 0.0, "train.validation.bleu": False},
        {"dims.h": 4, "dims.P_drop": 0.2, "train.validation.bleu": False},
    ]
    assert sweep().grid_points == [{}]


def test_launchers_are_tagged_by_type():
    s = sweep(launcher={"type": "slurm", "partition": "gpu", "gpus_per_node": 4, "additional": {"account": "nlp"}})
    assert s.launcher == SlurmLauncherSpec(partition="gpu", gpus_per_node=4, additional={"account": "nlp"})
    assert s.launcher.cluster == "slurm" and s.launcher.nodes == 1
    assert sweep(launcher={"type": "local", "parallel": 3, "gpus_per_trial": 0}).launcher == LocalLauncherSpec(
        parallel=3, gpus_per_trial=0
    )


def test_repeated_seed():
    assert field_error(seeds=[1, 2, 1]) == ((), "seeds", "seed 1 is listed more than once; each seed makes one trial")


def test_no_seeds():
    assert field_error(seeds=[]) == ((), "seeds", "an empty list of seeds would make no trial; give at least one, e.g. [1]")


def test_empty_grid_values():
    assert field_error(grid={"dims.h": []}) == (
        (),
        "grid.dims.h",
        "an empty list of values would make no trial; give at least one",
    )


def test_grid_key_must_be_dotted():
    assert field_error(grid={"dims h": [1]}) == ((), "grid.dims h", "'dims h' is not a dotted key such as dims.h")


def test_seed_and_name_belong_to_the_sweep():
    assert field_error(grid={"train.seed": [1, 2]}) == (
        (),
        "grid.train.seed",
        "the grid sets train.seed, which use the sweep's `seeds: [...]`",
    )
    assert field_error(overrides=["name=x"]) == (
        (),
        "overrides[0]",
        "override 'name=x' sets name, which trials are named by the sweep",
    )
    assert field_error(variants=[["dims.h=2", "train.seed=3"]]) == (
        ("variants", 0),
        "overrides[1]",
        "override 'train.seed=3' sets train.seed, which use the sweep's `seeds: [...]`",
    )


def test_override_must_be_key_value():
    assert field_error(overrides=["trainer.max_steps"]) == (
        (),
        "overrides[0]",
        "override 'trainer.max_steps' is not KEY=VALUE with a dotted key, e.g. dims.h=16",
    )


def test_a_variant_of_another_kind():
    with pytest.raises(ValidationError) as info:
        sweep(variants=[3])
    (error,) = info.value.errors(include_url=False)
    assert error["loc"] == ("variants", 0)
    assert error["msg"] == (
        "Value error, a variant is an experiment file, a list of overrides, or a mapping with name, experiment and overrides; got 3"
    )


def test_unknown_keys_are_errors():
    with pytest.raises(ValidationError) as info:
        sweep(launcher={"type": "local", "paralel": 2})
    assert [e["loc"] for e in info.value.errors()] == [("launcher", "local", "paralel")]


def test_frozen():
    with pytest.raises(ValidationError):
        sweep().name = "other"


def test_what_a_sweep_keeps_is_a_named_choice(tmp_path, capsys):
    from aiayn.builder.cli import main
    from tests.conftest import EXPERIMENTS

    assert sweep().keep == "all" and sweep(keep="last").keep == "last"
    path = tmp_path / "s.sweep.yaml"
    path.write_text(f"name: s\nbase: {EXPERIMENTS / 'demo.yaml'}\nkeep: best\n")
    assert main(["sweep", str(path), "--dry-run"]) == 2
    assert capsys.readouterr().err == (
        f"aiayn sweep: error: {path} is not a valid sweep (1 error):\n  keep: input should be 'all', 'last' or 'none', got 'best'\n"
    )


def test_an_experiment_given_as_a_sweep_says_what_to_do(capsys):
    from aiayn.builder.cli import main
    from tests.conftest import EXPERIMENTS

    path = EXPERIMENTS / "multi30k" / "tiny.yaml"
    assert main(["sweep", str(path), "--dry-run"]) == 2
    assert capsys.readouterr().err == (
        f"aiayn sweep: error: {path} is an experiment, not a sweep: train it with `aiayn train {path}`, or sweep it from a sweep file's `base: tiny.yaml`\n"
    )


def test_a_bad_override_of_the_sweep_is_named(capsys):
    from aiayn.builder.cli import main
    from tests.conftest import EXPERIMENTS

    path = EXPERIMENTS / "multi30k" / "graphs.sweep.yaml"
    assert main(["sweep", str(path), "sweep.seeds=abc", "--dry-run"]) == 2
    assert capsys.readouterr().err == (
        f"aiayn sweep: error: {path} is not a valid sweep (1 error):\n"
        "  seeds: input should be a list, got 'abc' (set on the command line: sweep.seeds=abc)\n"
    )
