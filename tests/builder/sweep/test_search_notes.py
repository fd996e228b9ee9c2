"""The search section of results.md on a journal made here: best settings with their edges, the
trials' fates, TPE's start-up named, and importances only above a minimum of finished trials."""

import json

import optuna
import pytest

from aiayn.builder.run.study import storage
from aiayn.builder.sweep.search_notes import edge_note, search_section, startup_note
from aiayn.schemas.search import CategoricalParam, FloatParam, IntParam, SearchSpec

FACTOR = FloatParam(low=0.25, high=4.0, log=True)
WARMUP = IntParam(low=50, high=400, step=50)
SPEC = SearchSpec(params={"train.lr_schedule.factor": FACTOR, "train.lr_schedule.warmup_steps": WARMUP}, n_trials=6)


def test_tpe_shorter_than_its_startup_is_named_a_random_search():
    assert startup_note(SPEC) == (
        "search.sampler: tpe with 6 trials a variant never leaves TPE's 10 random start-up trials: this is a random "
        "search (give n_trials > 10 for TPE to model anything, or say sampler: random)"
    )
    assert startup_note(SPEC.model_copy(update={"n_trials": 11})) is None
    assert startup_note(SPEC.model_copy(update={"sampler": "random"})) is None


@pytest.mark.parametrize(
    "param, value, note",
    [
        (FACTOR, 0.2501, "at the low edge of [0.25, 4]: the best may lie beyond it"),
        (FACTOR, 0.26, "at the low edge of [0.25, 4]: the best may lie beyond it"),  # 0.3% of the log range
        (FACTOR, 0.3, None),  # 6.6% of the log range in
        (FACTOR, 3.95, "at the high edge of [0.25, 4]: the best may lie beyond it"),
        (FloatParam(low=0.0, high=1.0), 0.985, "at the high edge of [0, 1]: the best may lie beyond it"),
        (FloatParam(low=0.0, high=1.0), 0.97, None),
        (WARMUP, 50, "at the low edge of [50, 400]: the best may lie beyond it"),
        (WARMUP, 100, None),
        (WARMUP, 400, "at the high edge of [50, 400]: the best may lie beyond it"),
        (CategoricalParam(choices=("pre", "post")), "pre", None),
    ],
)
def test_a_best_value_at_its_ranges_edge_is_named(param, value, note):
    assert edge_note(param, value) == note


def study_with(journal, name: str, values: list[tuple[float, int, float]], pruned: int = 0) -> None:
    study = optuna.create_study(study_name=name, storage=storage(journal), direction="maximize")
    dists = {"train.lr_schedule.factor": optuna.distributions.FloatDistribution(0.25, 4.0, log=True),
             "train.lr_schedule.warmup_steps": optuna.distributions.IntDistribution(50, 400, step=50)}  # fmt: skip
    for factor, warmup, bleu in values:
        study.add_trial(optuna.trial.create_trial(params={"train.lr_schedule.factor": factor, "train.lr_schedule.warmup_steps": warmup},
                                                  distributions=dists, value=bleu))  # fmt: skip
    for _ in range(pruned):
        study.add_trial(optuna.trial.create_trial(params={"train.lr_schedule.factor": 1.0, "train.lr_schedule.warmup_steps": 100},
                                                  distributions=dists, state=optuna.trial.TrialState.PRUNED))  # fmt: skip


def test_the_search_section(tmp_path):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    (tmp_path / "sweep.json").write_text(json.dumps({"name": "s", "search": SPEC.model_dump(mode="json")}))
    journal = tmp_path / "study.journal"
    study_with(journal, "few", [(0.2501, 200, 12.0), (1.0, 100, 10.0), (2.0, 300, 9.0)], pruned=2)
    study_with(journal, "many", [(0.3 + 0.2 * k, 100 + 50 * (k % 6), 10.0 + (k % 4)) for k in range(12)])
    text = search_section(tmp_path)
    assert text.splitlines()[:13] == [
        "## Search",
        "",
        "Each variant tuned on the validation split's BLEU (maximized): 6 trials a variant, tpe sampler (seed 1), median pruner.",
        "",
        "search.sampler: tpe with 6 trials a variant never leaves TPE's 10 random start-up trials: this is a random search "
        "(give n_trials > 10 for TPE to model anything, or say sampler: random).",
        "",
        "| variant | finished | pruned | failed | best | settings |",
        "|---|---|---|---|---|---|",
        "| few | 3 | 2 | 0 | 12.00 | train.lr_schedule.factor=0.2501, train.lr_schedule.warmup_steps=200 |",
        "| many | 12 | 0 | 0 | 13.00 | train.lr_schedule.factor=0.9, train.lr_schedule.warmup_steps=250 |",
        "",
        "Edges: few's train.lr_schedule.factor=0.2501 is at the low edge of [0.25, 4]: the best may lie beyond it.",
        "",
    ]
    assert text.splitlines()[13].startswith("Importances (Optuna's fANOVA): many: ")
    assert "Importances: not shown for few (3): fewer than 10 finished trials, on which an importance says little." in text
