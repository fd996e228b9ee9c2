"""schemas.search: a sweep's `search:` block and each bad input's message, naming its YAML path."""

import pytest

from aiayn.builder.errors import UserError
from aiayn.builder.sweep.plan import load_sweep
from aiayn.schemas.search import SearchSpec
from tests.conftest import EXPERIMENTS
from tests.schemas.test_sweep_schema import field_error, sweep

FACTOR = {"train.lr_schedule.factor": {"type": "float", "low": 0.25, "high": 4.0, "log": True}}


def search(**fields) -> dict:
    return {"params": FACTOR, **fields}


def test_a_search_block():
    s = sweep(
        search=search(params={**FACTOR, "train.lr_schedule.warmup_steps": {"type": "int", "low": 50, "high": 400, "step": 50}})
    )
    assert (s.search.n_trials, s.search.sampler, s.search.metric, s.search.direction, s.search.pruner.type) == (
        8,
        "tpe",
        "bleu",
        "maximize",
        "median",
    )
    assert SearchSpec.model_validate(search(metric="ppl")).direction == "minimize"
    grid = SearchSpec.model_validate(
        {"params": {"a.b": {"type": "categorical", "choices": ["post", "pre"]}, "c.d": {"type": "int", "low": 1, "high": 5, "step": 2}},
         "sampler": "grid", "pruner": {"type": "none"}}
    )  # fmt: skip
    assert grid.grid() == {"a.b": ["post", "pre"], "c.d": [1, 3, 5]}


@pytest.mark.parametrize(
    ("block", "where", "message"),
    [
        (search(params={"train.lr_schedule.factor": {"type": "float", "low": 4.0, "high": 0.25}}), ("search", "params", "train.lr_schedule.factor", "float"), ("low", "4.0 is above high (0.25); give low <= high")),
        (search(params={"train.lr_schedule.factor": {"type": "float", "low": 0.0, "high": 1.0, "log": True}}), ("search", "params", "train.lr_schedule.factor", "float"), ("low", "is 0.0, but a log scale needs low > 0")),
        (search(params={"a.b": {"type": "int", "low": 1, "high": 9, "step": 2, "log": True}}), ("search", "params", "a.b", "int"), ("step", "is 2, but a log scale takes no step (Optuna's rule); drop one of them")),
        (search(sampler="grid", pruner={"type": "none"}), ("search",), ("params.train.lr_schedule.factor", "the grid sampler needs values to enumerate: make it categorical, or an int with a step")),
        (search(params={"a.b": {"type": "categorical", "choices": [1, 2]}}, sampler="grid"), ("search",), ("pruner", "is median, but the grid sampler runs every point: a pruned point is never revisited; set pruner: {type: none}, or use the tpe or random sampler")),
        (search(params={"train.seed": {"type": "int", "low": 1, "high": 3}}), (), ("search.params.train.seed", "the search sets train.seed, which use the sweep's `seeds: [...]`")),
        (search(params={"a.b": {"type": "int", "low": 50, "high": 375, "step": 50}}), ("search", "params", "a.b", "int"),
         ("step", "50 does not divide high - low (325), so the range would end at 350, not 375 (Optuna shortens it); set high to 350 or 400")),
    ],
)  # fmt: skip
def test_bad_search_blocks(block, where, message):
    assert field_error(search=block) == (where, *message)


def test_an_unknown_distribution_names_the_choices(tmp_path, capsys):
    from aiayn.builder.cli import main

    path = tmp_path / "s.sweep.yaml"
    path.write_text(
        "name: s\nbase: base.yaml\nsearch:\n  params:\n    train.lr_schedule.factor: {type: loguniform, low: 0.1, high: 1}\n"
    )
    assert main(["sweep", str(path), "--dry-run"]) == 2
    assert capsys.readouterr().err == (
        f"aiayn sweep: error: {path} is not a valid sweep (1 error):\n"
        "  search.params.train.lr_schedule.factor: type 'loguniform' is not one of float, int, categorical\n"
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("search: {params: {train.lr_schedule.factr: {type: float, low: 0.1, high: 1.0}}}",
         "search.params.train.lr_schedule.factr: train.lr_schedule.factr: unknown key; did you mean 'factor'? (set by the search: train.lr_schedule.factr=0.1)"),
        ("search: {params: " + str(FACTOR).replace("'", "") + "}\noverrides: [train.validation.bleu=false]",
         "search.metric: bleu, but demo logs no validation BLEU (train.validation.bleu: false); set it true, or search on ppl"),
        ("search: {params: " + str(FACTOR).replace("'", "") + "}\noverrides: [trainer.val_check_interval=null]",
         "search.pruner: median reads the metric at each validation, but demo validates only at the end (trainer.val_check_interval: null); set an interval, or pruner: {type: none}"),
        ("search: {params: " + str(FACTOR).replace("'", "") + "}\noverrides: [train.lr_schedule.factor=2]",
         "search.params.train.lr_schedule.factor: the override train.lr_schedule.factor=2 sets it too; the search chooses it: drop the override"),
        # a later choice, the high end of a range, a combination: each is a setting a trial may draw
        ("search: {params: {model.positional.type: {type: categorical, choices: [sinusoidal, learnd]}}, pruner: {type: none}}",
         "search.params.model.positional.type: model.positional: type 'learnd' is not one of sinusoidal, learned, none; did you "
         "mean 'learned'? (set by the search: model.positional.type=learnd)"),
        ("search: {params: {dims.P_drop: {type: float, low: 0.1, high: 1.0}}, pruner: {type: none}}",
         "search.params.dims.P_drop: dims.P_drop: input should be less than 1, got 1.0 (set by the search: dims.P_drop=1.0)"),
        ("search:\n  params:\n    dims.h: {type: categorical, choices: [4, 3]}\n    'model.encoder.layer[0].kv_heads': {type: categorical, choices: [1, 2]}\n  pruner: {type: none}",
         "search.params.model.encoder.layer[0].kv_heads: model.encoder.layer[0].kv_heads: 2 does not divide h (3): each K/V head "
         "serves h / kv_heads query heads; use one of [1, 3] (set by the search: model.encoder.layer[0].kv_heads=2) (with dims.h=3)"),
        # a pruner that no validation before a trial's last step lets act
        ("search: {params: " + str(FACTOR).replace("'", "") + "}\noverrides: [trainer.max_steps=300, trainer.val_check_interval=300]",
         "search.pruner: median can stop a trial only at a validation before its last step, but demo (train.lr_schedule.factor=0.25) "
         "validates every 300 of its 300 steps, so no trial is ever pruned; lower trainer.val_check_interval below 300, or set "
         "pruner: {type: none}"),
        ("search: {params: " + str(FACTOR).replace("'", "") + ", pruner: {type: median, n_warmup_steps: 200}}\n"
         "overrides: [trainer.max_steps=300, trainer.val_check_interval=150]",
         "search.pruner: median can stop a trial only at a validation before its last step, but demo (train.lr_schedule.factor=0.25) "
         "validates every 150 of its 300 steps after its 200 warm-up steps, so no trial is ever pruned; lower "
         "trainer.val_check_interval below 300 or search.pruner.n_warmup_steps, or set pruner: {type: none}"),
    ],
)  # fmt: skip
def test_a_search_that_cannot_run_is_a_message_before_anything_runs(tmp_path, capsys, extra, message):
    from aiayn.builder.cli import main
    from tests.conftest import EXPERIMENTS

    path = tmp_path / "s.sweep.yaml"
    path.write_text(f"name: s\nbase: {EXPERIMENTS / 'demo.yaml'}\n{extra}\n")
    assert main(["sweep", str(path), "--dry-run", "--runs", str(tmp_path / "runs")]) == 2
    assert capsys.readouterr().err == f"aiayn sweep: error: {path}: {message}\n"
    assert not (tmp_path / "runs").exists()


def test_the_command_line_sets_a_searched_parameter_by_its_dotted_name():
    path = EXPERIMENTS / "demo.search.sweep.yaml"
    params = load_sweep(path, [
        "search.params.train.lr_schedule.factor.low=0.5",
        "search.params.train.lr_schedule.warmup_steps={type: int, low: 40, high: 80, step: 20}",
    ]).search.params  # fmt: skip
    assert (params["train.lr_schedule.factor"].low, params["train.lr_schedule.factor"].high) == (0.5, 2.0)
    assert (params["train.lr_schedule.warmup_steps"].low, params["train.lr_schedule.warmup_steps"].high) == (40, 80)
    with pytest.raises(UserError) as info:
        load_sweep(path, ["search.params.train.lr_schedule.warmup.low=3"])
    assert str(info.value) == (
        "override sweep.search.params.train.lr_schedule.warmup.low=3: a searched parameter's name is a dotted key of "
        "the experiment, so an override can set only those the sweep file searches (train.lr_schedule.factor, "
        "train.lr_schedule.warmup_steps), as sweep.search.params.NAME.low=... or NAME={...}; add a new one in the file"
    )
