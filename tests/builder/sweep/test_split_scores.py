"""Tune on one split, compare on another: a search sweep's table compares its final runs on the
test split (their translations cached beside the table, never in the runs), says which split
chose and which compares, and its final seeds are none of its trials'."""

import json
import re

import pytest

from aiayn.builder.cli import main
from aiayn.builder.data.spec import split_texts
from aiayn.builder.decode.checkpoint import load_for_inference
from aiayn.builder.run.rundir import RunDir
from aiayn.builder.sweep.results import write_results
from aiayn.builder.sweep.split_scores import _cache, _digest, translations
from aiayn.schemas.search import FloatParam, SearchSpec
from tests.builder.cli.test_bad_inputs import TINY, cli
from tests.builder.sweep.test_significance import REFS, bleu, corrupt, table_cells
from tests.builder.sweep.test_sweep_results import put
from tests.conftest import EXPERIMENTS
from tests.schemas.test_sweep_schema import field_error, sweep

SEARCH = SearchSpec(params={"train.lr_schedule.factor": FloatParam(low=0.5, high=2.0)}, n_trials=4, sampler="random")


def cache_test_translations(directory, run_dir, hyps) -> None:
    """What `score_runs` leaves for a run: its test translations and the digest of its results."""
    cache = _cache(directory, run_dir, "test")
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.with_suffix(".hyp").write_text("".join(h + "\n" for h in hyps))
    cache.with_suffix(".ref").write_text("".join(r + "\n" for r in REFS))
    cache.with_suffix(".json").write_text(json.dumps({"results": _digest(run_dir)}))


def test_the_valid_winner_can_lose_on_test_and_the_table_shows_both(tmp_path):
    root = tmp_path / "runs" / "tuned"
    # "lucky" was chosen and wins on valid; on test, held out from the choice, "steady" is better
    outputs = {"lucky": (corrupt(7), corrupt(3)), "steady": (corrupt(4), corrupt(6))}  # (valid, test)
    trials = []
    for variant, (valid, test) in outputs.items():
        for seed in (1, 2, 3):
            name = f"{variant}-seed{seed}"
            put(root, name, name, ppl=5.0, bleu=round(bleu(valid), 2), variant=variant, seed=seed)
            run = root / name / "version_0"
            RunDir(run).write_translations("valid", valid, REFS)
            cache_test_translations(root, run, test)
            trials.append(
                {
                    "variant": variant,
                    "seed": seed,
                    "experiment": "/x/demo.yaml",
                    "overrides": [f"train.seed={seed}", f"name={name}"],
                }
            )
    (root / "sweep.json").write_text(
        json.dumps({"name": "tuned", "search": SEARCH.model_dump(mode="json"), "trial_seed": 4, "trials": trials})
    )
    lines = write_results(root, base="lucky").splitlines()
    cells = table_cells(lines)
    mean = lambda cell: float(cell.split(" ± ")[0])  # noqa: E731
    assert mean(cells["lucky"]["BLEU"]) > mean(cells["steady"]["BLEU"])  # valid: the winner
    assert mean(cells["lucky"]["BLEU test"]) < mean(cells["steady"]["BLEU test"])  # test: the loser
    assert cells["steady"]["BLEU test"] == f"{bleu(corrupt(6)):.2f} ± 0.00"
    assert re.fullmatch(r"\+\d+\.\d\d \[\+\d+\.\d\d, \+\d+\.\d\d\] 3/3 \*", cells["steady"]["ΔBLEU [95% CI]"])
    assert (
        "Splits: PPL and BLEU are the validation split's, on which the search chose each variant's settings (by valid "
        "BLEU); the final runs' seeds 1, 2, 3 are none of the search's (its trials trained with seed 4); BLEU test and "
        "ΔBLEU are the test split's."
    ) in lines
    assert any(
        line.startswith("ΔBLEU: the row's BLEU minus that of lucky, the base row, on the same test sentences") for line in lines
    )
    # a run trained further (its results.json rewritten) is no longer read from the cache
    run = root / "steady-seed1" / "version_0"
    assert translations(root, run, "test") is not None
    (run / "results.json").write_text((run / "results.json").read_text().replace('"steps": 100000', '"steps": 100001'))
    assert translations(root, run, "test") is None


def test_trials_never_train_with_a_final_seed():
    assert sweep(seeds=[1, 2, 3], search=SEARCH.model_dump()).trial_seed == 4
    assert sweep(seeds=[5], search={**SEARCH.model_dump(), "trial_seed": 0}).trial_seed == 0
    assert field_error(seeds=[1, 2], search={**SEARCH.model_dump(), "trial_seed": 2}) == (
        (), "search.trial_seed",
        "2 is one of the sweep's seeds [1, 2], so a final run would train a search trial again; give another, or null for "
        "the first seed above them",
    )  # fmt: skip


@pytest.fixture(scope="module")
def trained_root(tmp_path_factory):
    """runs/demo/version_0 of a tiny demo run: a root of runs with one finished run."""
    root = tmp_path_factory.mktemp("split")
    code, _, err = cli(
        "train",
        EXPERIMENTS / "demo.yaml",
        *TINY,
        "trainer.max_steps=2",
        f"data.cache_dir={root / 'cache'}",
        "--runs",
        root / "runs",
    )
    assert code == 0, err
    return root / "runs"


def test_results_scores_the_test_split_once_and_leaves_the_runs_alone(trained_root, capsys):
    run = trained_root / "demo" / "version_0"
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    assert main(["results", str(trained_root), "--split", "test"]) == 0
    out, err = capsys.readouterr()
    assert err.startswith(f"scored {run} on test (12 sentences, step 2) [1/1]")
    cache = trained_root / "scores" / "demo" / "version_0" / "test"
    hyps = cache.with_suffix(".hyp").read_text().splitlines()
    assert len(hyps) == 12 and cache.with_suffix(".ref").read_text().splitlines() == translations(trained_root, run, "test")[1]
    spec = load_for_inference(run).spec
    test_refs, valid_refs = split_texts(spec, "test")[1], split_texts(spec, "valid")[1]
    assert test_refs != valid_refs  # the two splits differ, so the references tell which one was scored
    assert cache.with_suffix(".ref").read_text().splitlines() == test_refs
    assert "| BLEU test |" in out.splitlines()[0]
    stamp = cache.with_suffix(".hyp").stat().st_mtime_ns
    assert main(["results", str(trained_root), "--split", "test"]) == 0
    assert capsys.readouterr().err == ""  # cached: nothing translated again
    assert cache.with_suffix(".hyp").stat().st_mtime_ns == stamp
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    code, _, err = cli("results", trained_root, "--split", "train")
    assert code == 2 and "argument --split: invalid choice: 'train' (choose from 'valid', 'test')" in err


@pytest.mark.parametrize(
    ("name", "damage"),
    [
        ("empty hypotheses", lambda cache: cache.with_suffix(".hyp").write_text("")),
        ("hypotheses cut short", lambda cache: cache.with_suffix(".hyp").write_text("one line\n")),
        ("empty references", lambda cache: cache.with_suffix(".ref").write_text("")),
        ("a record that is a list", lambda cache: cache.with_suffix(".json").write_text("[1]")),
        ("a truncated record", lambda cache: cache.with_suffix(".json").write_text('{"resul')),
    ],
)  # fmt: skip
def test_a_damaged_cache_of_split_scores_is_translated_again(trained_root, capsys, name, damage):
    run = trained_root / "demo" / "version_0"
    assert main(["results", str(trained_root), "--split", "test"]) == 0
    cache = _cache(trained_root, run, "test")
    good = cache.with_suffix(".hyp").read_text()
    damage(cache)
    assert translations(trained_root, run, "test") is None, name
    capsys.readouterr()
    assert main(["results", str(trained_root), "--split", "test"]) == 0
    assert capsys.readouterr().err.startswith(f"scored {run} on test (12 sentences, step 2) [1/1]"), name
    assert cache.with_suffix(".hyp").read_text() == good


def test_a_file_where_the_cache_folder_goes_is_named(trained_root, tmp_path):
    import shutil

    root = tmp_path / "runs"
    shutil.copytree(trained_root, root, ignore=shutil.ignore_patterns("scores"))
    (root / "scores").mkdir()
    (root / "scores" / "demo").write_text("")
    code, out, err = cli("results", root, "--split", "test")
    assert (code, out) == (2, "")
    assert (
        err
        == f"aiayn results: error: {root / 'scores' / 'demo'} is a file where aiayn keeps the split scores' translations (a folder); move it away, or delete it\n"
    )
    (root / "scores" / "demo").unlink()
    (root / "scores" / "demo" / "version_0" / "test.hyp").mkdir(parents=True)
    code, out, err = cli("results", root, "--split", "test")
    assert (
        err
        == f"aiayn results: error: {root / 'scores' / 'demo' / 'version_0' / 'test.hyp'} is a folder where aiayn keeps a file of the split scores; move it away, or delete it\n"
    )
    assert sorted(p.name for p in (root / "scores" / "demo" / "version_0").iterdir()) == ["test.hyp"]  # nothing else written
