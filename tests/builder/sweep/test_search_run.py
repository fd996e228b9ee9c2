"""A sweep's search end to end on the demo data (slow tier): two variants tuned by Optuna with
the same budget and the median pruner, two trials at a time sharing one journal; the sweep killed
midway and run again, continuing each study without re-running a finished trial; then each
variant's best settings trained and compared in results.md."""

import json
import os
import signal
import subprocess
import sys
import time

import optuna
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2

from aiayn.builder.run.study import storage
from tests.conftest import EXPERIMENTS

pytestmark = pytest.mark.slow

N_TRIALS, MAX_STEPS = 4, 30
SWEEP = f"""name: tuned
base: {EXPERIMENTS / "demo.yaml"}
variants:
  - {{name: post-norm}}
  - {{name: pre-norm, overrides: [model.encoder.add_norm.placement=pre, model.decoder.add_norm.placement=pre]}}
seeds: [1]
search:
  params:
    train.lr_schedule.factor: {{type: categorical, choices: [1.0, 0.002]}}   # 0.002 learns nothing in 30 steps
    train.lr_schedule.warmup_steps: {{type: int, low: 10, high: 30, step: 10}}
  n_trials: {N_TRIALS}
  sampler: random
  seed: 3
  metric: ppl
  pruner: {{type: median, n_startup_trials: 1}}
overrides: [reported=null, trainer.max_steps={MAX_STEPS}, trainer.val_check_interval=10, train.checkpoint.every_n_train_steps=10,
            data.n_train=300, data.n_valid=20, data.n_test=20, dims.vocab_size=200, train.tokens_per_step=500, decode.beam=1,
            train.validation.bleu=false, train.validation.attention_maps_every=0]
launcher: {{type: local, parallel: 2, gpus_per_trial: 0}}
"""


def finished(journal) -> dict[str, list]:
    if not journal.is_file():
        return {}
    out = {}
    for summary in optuna.get_all_study_summaries(storage(journal)):
        study = optuna.load_study(study_name=summary.study_name, storage=storage(journal))
        out[summary.study_name] = [t for t in study.get_trials(deepcopy=False) if t.state.name in ("COMPLETE", "PRUNED")]
    return out


def test_tune_then_compare_survives_a_kill(tmp_path):
    path = tmp_path / "tuned.sweep.yaml"
    path.write_text(SWEEP)
    directory, journal = tmp_path / "runs" / "tuned", tmp_path / "runs" / "tuned" / "study.journal"
    argv = [sys.executable, "-m", "aiayn", "sweep", str(path), "--runs", str(tmp_path / "runs")]
    env = {**os.environ, "AIAYN_CACHE": str(tmp_path / "cache")}
    first = subprocess.Popen(
        argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 240
    while sum(len(t) for t in finished(journal).values()) < 2 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    os.killpg(first.pid, signal.SIGKILL)  # the sweep and its running trials
    first.wait()
    before = {(name, t.number): t.state.name for name, trials in finished(journal).items() for t in trials}
    assert len(before) >= 2
    stamps = {
        key: (directory / "search" / key[0] / f"trial{key[1]:03d}" / "version_0" / "status.json").stat().st_mtime_ns
        for key in before
    }

    again = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    after = finished(journal)
    assert sorted(after) == ["post-norm", "pre-norm"]
    for name, trials in after.items():
        assert len(trials) == N_TRIALS  # the same budget for each variant, the killed trials not counted
        numbers = [t.number for t in trials]
        assert len(set(numbers)) == len(numbers)
        folders = sorted(p.name for p in (directory / "search" / name).iterdir())
        assert all(f"trial{n:03d}" in folders for n in numbers)  # one run directory per trial number
        for t in trials:
            run = directory / "search" / name / f"trial{t.number:03d}" / "version_0"
            status = json.loads((run / "status.json").read_text())
            if t.state.name == "PRUNED":  # stopped at a validation before the budget's end
                assert status["status"] == "pruned" and status["step"] < MAX_STEPS
            else:
                assert json.loads((run / "results.json").read_text())["ppl"] == pytest.approx(t.value)
            assert not (run / "checkpoints").exists()  # the study keeps the record; nothing resumes a trial
            assert "seed: 2\n" in (run / "config.yaml").read_text()  # none of the final runs' seeds ([1])
    assert any(t.state.name == "PRUNED" for trials in after.values() for t in trials), "the median pruner pruned nothing"
    trial = after["pre-norm"][-1]  # TensorBoard's HParams lists every trial with the settings it tried
    events = EventAccumulator(str(directory / "search" / "pre-norm" / f"trial{trial.number:03d}" / "version_0")).Reload()
    start = plugin_data_pb2.HParamsPluginData.FromString(events.PluginTagToContent("hparams")["_hparams_/session_start_info"])
    hparams = {name.split(" ", 1)[1]: value for name, value in start.session_start_info.hparams.items()}
    assert hparams["train.lr_schedule.factor"].number_value == trial.params["train.lr_schedule.factor"]
    for key, state in before.items():  # finished before the kill: not run again
        run = directory / "search" / key[0] / f"trial{key[1]:03d}" / "version_0"
        assert (run / "status.json").stat().st_mtime_ns == stamps[key]
        assert next(t.state.name for t in after[key[0]] if t.number == key[1]) == state

    # each variant's best settings, trained with the sweep's seed, are the results table's rows
    best = {name: optuna.load_study(study_name=name, storage=storage(journal)).best_params for name in after}
    for name in ("post-norm", "pre-norm"):
        config = (directory / f"{name}-seed1" / "version_0" / "config.yaml").read_text()
        assert f"factor: {best[name]['train.lr_schedule.factor']}" in config
        assert f"warmup_steps: {best[name]['train.lr_schedule.warmup_steps']}" in config
    table = (directory / "results.md").read_text().split("\n\n")[0].splitlines()  # the results table, before its notes
    rows = [line.split(" | ")[0].strip("| ") for line in table if line.startswith("| ")]
    assert rows[1:] == ["post-norm", "pre-norm"]
    report = subprocess.run([sys.executable, "-m", "aiayn", "results", str(directory)], capture_output=True, text=True, env=env)
    assert report.returncode == 0, report.stderr
    lines = report.stdout.splitlines()
    assert "## Search" in lines and any(line.startswith("| post-norm | ") for line in lines)
    assert (
        f"Importances: not shown for post-norm ({sum(t.state.name == 'COMPLETE' for t in after['post-norm'])})" in report.stdout
    )
    assert lines[-1] == f"optuna-dashboard {journal}   # every trial, its curve and the importances"
