"""Sweep files -> trials: names, overrides, validation, skip/resume decisions, the local pool and
its GPU slots, and the exact text of every error. No training here (see test_sweep_run.py)."""

import json
import os
import sys

import pytest
import yaml

from aiayn.builder.cli import main
from aiayn.builder.errors import UserError
from aiayn.builder.model.size import count_params
from aiayn.builder.sweep import runner
from aiayn.builder.sweep.launch import Job, Outcome, check, launch_local, launcher_overrides, run_job, trial_argv
from aiayn.builder.sweep.plan import TrialState, config_hash, expand, load_sweep, split_overrides, state, write_trial_record
from aiayn.schemas.sweep import LocalLauncherSpec, SlurmLauncherSpec
from tests.conftest import EXPERIMENTS, registry

DEMO = (EXPERIMENTS / "demo.yaml").as_posix()


@pytest.fixture
def sweep_file(write):
    """A sweep of a base (the demo), a row file, overrides variants, a grid and two seeds."""
    write("exp/base.yaml", f"extends: {DEMO}\nname: small\n")
    write("exp/rows/wide.yaml", "extends: ../base.yaml\nname: small-wide\ndims: {d_ff: 1024}\nreported: {group: C, ppl: 4.75}\n")
    return write(
        "exp/s.sweep.yaml",
        "name: s\n"
        "base: base.yaml\n"
        "variants:\n"
        "  - {}\n"
        "  - rows/wide.yaml\n"
        "  - [dims.h=2, dims.d_k=64]\n"
        "  - {name: deep, overrides: [dims.N=3]}\n"
        "grid: {dims.P_drop: [0.0, 0.3]}\n"
        "seeds: [1, 2]\n"
        "overrides: [trainer.max_steps=10]\n",
    )


def error_of(fn, *args) -> str:
    with pytest.raises(UserError) as info:
        fn(*args)
    return str(info.value)


def test_trials_are_variants_x_grid_x_seeds(sweep_file):
    trials = expand(load_sweep(sweep_file), sweep_file)
    assert [t.name for t in trials] == [
        f"{variant}-P_drop{p}-seed{seed}"
        for variant in ("small", "small-wide", "small-h2-d_k64", "deep")
        for p in ("0.0", "0.3")
        for seed in (1, 2)
    ]
    assert len({t.config_hash for t in trials}) == 16
    t = trials[9]  # small-h2-d_k64, P_drop 0.0, seed 2
    assert (t.name, t.variant, t.seed, t.experiment) == (
        "small-h2-d_k64-P_drop0.0-seed2",
        "small-h2-d_k64-P_drop0.0",
        2,
        sweep_file.parent / "base.yaml",
    )
    assert t.changes == ("dims.h=2", "dims.d_k=64", "dims.P_drop=0.0")
    assert t.overrides == (
        "reported=null",
        "dims.h=2",
        "dims.d_k=64",
        "dims.P_drop=0.0",
        "trainer.max_steps=10",
        "train.seed=2",
        "name=small-h2-d_k64-P_drop0.0-seed2",
    )
    spec = t.spec
    assert (spec.name, spec.train.seed, spec.trainer.max_steps, spec.dims.h, spec.dims.d_k, spec.dims.P_drop) == (
        t.name,
        2,
        10,
        2,
        64,
        0.0,
    )
    assert spec.reported is None  # a changed experiment is not the paper's row


def test_a_row_file_keeps_its_reported_numbers_without_changes(sweep_file, write):
    path = write("exp/rows.sweep.yaml", "name: r\nbase: base.yaml\nvariants: [rows/wide.yaml, {}]\nseeds: [3]\n")
    wide, base = expand(load_sweep(path), path)
    assert (wide.name, wide.overrides) == ("small-wide-seed3", ("train.seed=3", "name=small-wide-seed3"))
    assert (wide.spec.reported.group, wide.spec.reported.ppl, wide.spec.dims.d_ff) == ("C", 4.75, 1024)
    assert (base.name, base.spec.reported) == ("small-seed3", None)  # the demo is no row of the paper


def test_command_line_overrides_reach_every_trial_after_the_sweeps(sweep_file):
    sweep_overrides, trial_overrides = split_overrides(["sweep.seeds=[7]", "trainer.max_steps=3", "sweep.grid={}"])
    assert (sweep_overrides, trial_overrides) == (["seeds=[7]", "grid={}"], ["trainer.max_steps=3"])
    trials = expand(load_sweep(sweep_file, sweep_overrides), sweep_file, trial_overrides)
    assert [t.name for t in trials] == ["small-seed7", "small-wide-seed7", "small-h2-d_k64-seed7", "deep-seed7"]
    assert all(t.spec.trainer.max_steps == 3 and t.spec.train.seed == 7 for t in trials)
    assert trials[0].overrides == ("trainer.max_steps=10", "trainer.max_steps=3", "train.seed=7", "name=small-seed7")


def test_a_launcher_retyped_on_the_command_line_keeps_only_its_new_kinds_keys():
    """table3's SLURM settings run locally, and seeds' local packing on SLURM, as a retyped node in a file."""
    local = load_sweep(EXPERIMENTS / "table3.sweep.yaml", ["launcher.type=local", "launcher.parallel=2"]).launcher
    assert local == LocalLauncherSpec(parallel=2)
    slurm = load_sweep(EXPERIMENTS / "multi30k" / "seeds.sweep.yaml", ["launcher.type=slurm"]).launcher
    assert slurm == SlurmLauncherSpec()


def test_hash_is_the_resolved_experiment():
    a, b = (expand(load_sweep(EXPERIMENTS / "demo.sweep.yaml"), EXPERIMENTS / "demo.sweep.yaml", o) for o in ([], ["dims.N=1"]))
    assert [t.config_hash for t in a] == [config_hash(t.spec) for t in a]
    assert len({t.config_hash for t in a + b}) == 12
    assert [t.config_hash for t in a] == [
        t.config_hash for t in expand(load_sweep(EXPERIMENTS / "demo.sweep.yaml"), EXPERIMENTS / "demo.sweep.yaml")
    ]


# ---- errors ----------------------------------------------------------------------------


def test_unknown_keys_name_their_yaml_path(write):
    path = write(
        "bad.sweep.yaml",
        "name: s\nbase: base.yaml\nvariants:\n  - {name: x, overides: [dims.h=2]}\n  - 3\n"
        "grid: {dims.h: [[1, 2]]}\nlauncher: {type: slurm, partitin: gpu}\nlr: 3\n",
    )
    assert error_of(load_sweep, path) == (
        f"{path} is not a valid sweep (5 errors):\n"
        "  variants[0].overides: unknown key; did you mean 'overrides'?\n"
        "  variants[1]: a variant is an experiment file, a list of overrides, or a mapping with name, experiment and overrides; got 3\n"
        "  grid.dims.h[0]: [1, 2] is none of: bool (input should be a valid boolean); int (input should be a valid integer); float (input should be a valid number); str (input should be a valid string)\n"
        "  launcher.partitin: unknown key; did you mean 'partition'?\n"
        "  lr: unknown key; known keys: name, description, base, variants, grid, seeds, overrides, launcher, search, keep"
    )


def test_cross_field_errors_name_their_path(write):
    path = write("bad.sweep.yaml", "name: s\nbase: base.yaml\nseeds: [2, 2]\n")
    assert (
        error_of(load_sweep, path)
        == f"{path} is not a valid sweep (1 error):\n  seeds: seed 2 is listed more than once; each seed makes one trial"
    )
    path = write("bad2.sweep.yaml", "name: s\nbase: base.yaml\nlauncher: {type: ssh}\n")
    assert (
        error_of(load_sweep, path) == f"{path} is not a valid sweep (1 error):\n  launcher: type 'ssh' is not one of local, slurm"
    )
    path = write("bad3.sweep.yaml", "base: base.yaml\nvariants: [[dims.h=2, train.seed=3]]\n")
    assert error_of(load_sweep, path) == (
        f"{path} is not a valid sweep (2 errors):\n"
        "  name: required key is missing\n"
        "  variants[0].overrides[1]: override 'train.seed=3' sets train.seed, which use the sweep's `seeds: [...]`"
    )


def test_missing_experiment_files(write):
    write("base.yaml", f"extends: {DEMO}\nname: small\n")
    path = write("s.sweep.yaml", "name: s\nbase: base.yaml\nvariants: [{}, table3/nope.yaml]\n")
    sweep = load_sweep(path)
    assert error_of(expand, sweep, path) == f"{path}: variants[1].experiment: {path.parent / 'table3/nope.yaml'} does not exist"
    path = write("t.sweep.yaml", "name: s\nbase: gone.yaml\n")
    assert error_of(expand, load_sweep(path), path) == f"{path}: base: {path.parent / 'gone.yaml'} does not exist"
    assert error_of(load_sweep, path.parent / "none.sweep.yaml") == (
        f"{path.parent / 'none.sweep.yaml'}: does not exist; did you mean {path.parent / 't.sweep.yaml'}?"
    )


def test_invalid_trials_stop_the_sweep_before_anything_runs(write):
    write("base.yaml", f"extends: {DEMO}\nname: small\n")
    path = write("s.sweep.yaml", "name: s\nbase: base.yaml\nvariants: [[dims.h=0], [dims.h=2], [dims.P_drop=1.5]]\n")
    assert error_of(expand, load_sweep(path), path) == (
        f"{path}: 2 of 3 trials are not valid experiments; nothing was run:\n"
        f"  small-h0-seed1: {path.parent / 'base.yaml'} is not a valid experiment (1 error):\n"
        "    dims.h: input should be greater than 0, got 0 (set by the sweep: dims.h=0)\n"
        f"  small-P_drop1.5-seed1: {path.parent / 'base.yaml'} is not a valid experiment (1 error):\n"
        "    dims.P_drop: input should be less than 1, got 1.5 (set by the sweep: dims.P_drop=1.5)"
    )


def test_two_variants_with_one_name(write):
    write("base.yaml", f"extends: {DEMO}\nname: small\n")
    path = write("s.sweep.yaml", "name: s\nbase: base.yaml\nvariants: [{name: a}, {name: a, overrides: [dims.N=1]}]\n")
    assert error_of(expand, load_sweep(path), path) == (
        f"{path}: variants[0] and variants[1] both make a trial named 'a-seed1'; give the variants distinct names with `name:`"
    )


def test_bad_sweep_override(sweep_file):
    assert (
        error_of(load_sweep, sweep_file, ["launcher"])
        == "override sweep.'launcher' is not sweep.KEY=VALUE, e.g. sweep.launcher.parallel=2"
    )


def test_cli_errors_exit_2(sweep_file, capsys):
    assert main(["sweep", str(sweep_file), "sweep.launcher.type=ssh", "--dry-run"]) == 2
    assert capsys.readouterr().err == (
        f"aiayn sweep: error: {sweep_file} is not a valid sweep (1 error):\n  launcher: type 'ssh' is not one of local, slurm "
        "(set on the command line: sweep.launcher.type=ssh)\n"
    )


# ---- what each trial needs -----------------------------------------------------------


def test_skip_resume_or_run(sweep_file, tmp_path):
    trial = expand(load_sweep(sweep_file, ["seeds=[1]", "grid={}", "variants=[{}]"]), sweep_file)[0]
    runs = tmp_path / "runs" / "s"
    assert state(trial, runs, registry()) == TrialState("run", runs / "small-seed1" / "version_0")
    run_dir = runs / "small-seed1" / "version_0"
    run_dir.mkdir(parents=True)
    write_trial_record(trial, run_dir)
    assert json.loads((run_dir.parent / "trial.json").read_text())["config_hash"] == trial.config_hash
    assert state(trial, runs, registry()) == TrialState("run", runs / "small-seed1" / "version_1")  # nothing to resume from
    (run_dir / "checkpoints").mkdir()
    (run_dir / "checkpoints" / "last.ckpt").write_bytes(b"")
    assert state(trial, runs, registry()) == TrialState("resume", run_dir)
    (run_dir / "results.json").write_text("{}")
    assert state(trial, runs, registry()) == TrialState("skip", run_dir)
    changed = expand(load_sweep(sweep_file, ["seeds=[1]", "grid={}", "variants=[{}]"]), sweep_file, ["dims.d_ff=256"])[0]
    assert state(changed, runs, registry()) == TrialState("run", runs / "small-seed1" / "version_1")


def test_a_finished_trial_is_skipped_after_an_upgrade_that_adds_a_field(sweep_file, tmp_path):
    """A release that adds a schema field changes every config hash in trial.json; the run's
    config.yaml, read by this release, still says whether the run trained this trial."""
    trial = expand(load_sweep(sweep_file, ["seeds=[1]", "grid={}", "variants=[{}]"]), sweep_file)[0]
    runs = tmp_path / "runs" / "s"
    run_dir = runs / "small-seed1" / "version_0"
    run_dir.mkdir(parents=True)
    write_trial_record(trial, run_dir)
    record = json.loads((run_dir.parent / "trial.json").read_text())
    (run_dir.parent / "trial.json").write_text(json.dumps({**record, "config_hash": "0123456789abcdef"}))  # an older release's
    (run_dir / "results.json").write_text("{}")
    assert state(trial, runs, registry()) == TrialState("run", runs / "small-seed1" / "version_1")  # no config.yaml: nothing says
    written = trial.spec.model_dump(mode="json")
    del written["model"]["source_eos"]  # as a release before the field wrote it
    (run_dir / "config.yaml").write_text(yaml.safe_dump(written))
    assert state(trial, runs, registry()) == TrialState("skip", run_dir)
    written["model"]["source_eos"] = True  # a value of its own: another experiment
    (run_dir / "config.yaml").write_text(yaml.safe_dump(written))
    assert state(trial, runs, registry()) == TrialState("run", runs / "small-seed1" / "version_1")
    (run_dir / "config.yaml").write_text("model: [unclosed\n")
    assert state(trial, runs, registry()) == TrialState("run", runs / "small-seed1" / "version_1")


def test_dry_run_lists_trials_params_and_actions(sweep_file, tmp_path, capsys):
    runs = tmp_path / "runs"
    assert main(["sweep", str(sweep_file), "sweep.grid={}", "sweep.seeds=[1]", "--dry-run", "--runs", str(runs)]) == 0
    trials = expand(load_sweep(sweep_file, ["grid={}", "seeds=[1]"]), sweep_file)
    params = [f"{count_params(t.spec.model):,}" for t in trials]
    # the demo's 1,053,696; d_ff 1024: + 4 x 131,584; h=2 x d_k=64 with d_v=32: 6 x 16,448 fewer; N=3
    assert params == ["1,053,696", "1,580,032", "955,008", "1,516,544"]
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"sweep s ({sweep_file}): 4 trials in {runs / 's'}, launcher local, 1 at a time"
    assert [line.split()[:3] for line in out[2:6]] == [[t.name, p, "run"] for t, p in zip(trials, params)]
    assert out[4].endswith(f"run {runs / 's' / 'small-h2-d_k64-seed1' / 'version_0'}  dims.h=2 dims.d_k=64")
    assert out[6] == "4 to run, 0 to resume, 0 finished (skipped)"
    assert not runs.exists()


# ---- launching -------------------------------------------------------------------------


def test_launcher_overrides():
    assert launcher_overrides(LocalLauncherSpec()) == ["trainer.enable_progress_bar=false"]
    assert launcher_overrides(LocalLauncherSpec(gpus_per_trial=0))[1:] == ["trainer.accelerator=cpu", "trainer.devices=1"]
    assert launcher_overrides(LocalLauncherSpec(gpus_per_trial=2))[1:] == ["trainer.accelerator=gpu", "trainer.devices=2"]
    assert launcher_overrides(SlurmLauncherSpec(gpus_per_node=8, nodes=2))[1:] == [
        "trainer.accelerator=gpu",
        "trainer.devices=8",
        "trainer.num_nodes=2",
    ]


def test_trial_command(tmp_path):
    assert trial_argv(tmp_path / "e.yaml", ["dims.h=2"], tmp_path / "r") == (
        sys.executable, "-m", "aiayn", "train", str(tmp_path / "e.yaml"), "dims.h=2", "--run-dir", str(tmp_path / "r"),
    )  # fmt: skip


def test_a_failed_process_keeps_its_last_stderr_lines(tmp_path):
    code = "import sys; print('out'); print('\\n'.join(f'line {i}' for i in range(30)), file=sys.stderr); sys.exit(3)"
    outcome = run_job(Job("t", (sys.executable, "-c", code), tmp_path / "run", str(tmp_path)))
    assert outcome.returncode == 3
    assert outcome.error == "\n".join(f"line {i}" for i in range(10, 30))
    assert (tmp_path / "run" / "stdout.log").read_text() == "out\n"
    assert (tmp_path / "run" / "stderr.log").read_text().splitlines()[0] == "line 0"
    again = run_job(Job("t", (sys.executable, "-c", "import sys; sys.exit(0)"), tmp_path / "run", str(tmp_path)))
    assert (again.returncode, again.error) == (0, None)
    missing = run_job(Job("t", (str(tmp_path / "no-such-python"),), tmp_path / "run", str(tmp_path)))
    assert missing.returncode is None and missing.error.startswith(f"could not start {tmp_path / 'no-such-python'}: ")


@pytest.mark.skipif(sys.version_info < (3, 11), reason="PYTHONSAFEPATH is Python 3.11's")
def test_a_trial_started_in_a_clone_imports_the_installed_aiayn(tmp_path, monkeypatch):
    """A sweep run from a clone's root with aiayn installed from it (pip install ., not -e): the
    clone's aiayn/ folder, which lacks aiayn.builder, does not hide the installed package from
    the trial (ModuleNotFoundError: No module named 'aiayn.builder' in every trial, before)."""
    (tmp_path / "aiayn").mkdir()
    (tmp_path / "aiayn" / "__init__.py").write_text("")
    (tmp_path / "aiayn" / "__main__.py").write_text("raise SystemExit('the folder run in was imported')\n")
    monkeypatch.delenv("PYTHONSAFEPATH", raising=False)
    argv = (sys.executable, "-m", "aiayn", "validate", str(EXPERIMENTS / "demo.yaml"))
    outcome = run_job(Job("t", argv, tmp_path / "run", str(tmp_path)))
    assert (outcome.returncode, outcome.error) == (0, None)
    assert (tmp_path / "run" / "stdout.log").read_text().startswith(f"{EXPERIMENTS / 'demo.yaml'}: ok: demo, ")


def test_environment_defaults_yield_to_the_users(tmp_path, monkeypatch):
    code = "import os; print(os.environ['OMP_NUM_THREADS'], os.environ['CUDA_VISIBLE_DEVICES'])"
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    run_job(
        Job("t", (sys.executable, "-c", code), tmp_path / "run", str(tmp_path)),
        {"CUDA_VISIBLE_DEVICES": "1"},
        {"OMP_NUM_THREADS": "2"},
    )
    assert (tmp_path / "run" / "stdout.log").read_text() == "5 1\n"


def test_gpu_slots_are_never_shared(tmp_path):
    code = "import os, time; t = time.time(); time.sleep(0.3); print(os.environ['CUDA_VISIBLE_DEVICES'], t, time.time())"
    jobs = [Job(f"t{i}", (sys.executable, "-c", code), tmp_path / f"t{i}", str(tmp_path)) for i in range(5)]
    done = []
    launch_local(
        jobs,
        LocalLauncherSpec(parallel=8, gpus_per_trial=2),
        lambda job, outcome: done.append((job.name, outcome.returncode)),
        gpus=["0", "1", "2", "3", "7"],
    )
    assert sorted(done) == [(f"t{i}", 0) for i in range(5)]
    spans: dict[str, list[tuple[float, float]]] = {}
    for job in jobs:
        gpus, start, end = (tmp_path / job.name / "stdout.log").read_text().split()
        spans.setdefault(gpus, []).append((float(start), float(end)))
    assert set(spans) == {"0,1", "2,3"}  # GPU 7 alone is not a slot of two
    for intervals in spans.values():
        intervals.sort()
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(intervals, intervals[1:]))


def test_trials_per_gpu_packs_small_trials_onto_each_gpu(tmp_path):
    # each waits until all four have started: only a pool that runs them at once succeeds
    code = (
        "import os, pathlib, sys, time; d = pathlib.Path(sys.argv[1]); (d / sys.argv[2]).touch()\n"
        "end = time.time() + 60\n"
        "while len(list(d.glob('t*'))) < 4 and time.time() < end: time.sleep(0.05)\n"
        "print(os.environ['CUDA_VISIBLE_DEVICES'])\n"
        "sys.exit(0 if len(list(d.glob('t*'))) == 4 else 1)"
    )
    (tmp_path / "flags").mkdir()
    jobs = [
        Job(f"t{i}", (sys.executable, "-c", code, str(tmp_path / "flags"), f"t{i}"), tmp_path / f"t{i}", str(tmp_path))
        for i in range(4)
    ]
    done = []
    launcher = LocalLauncherSpec(parallel=8, gpus_per_trial=1, trials_per_gpu=2)
    launch_local(jobs, launcher, lambda job, outcome: done.append(outcome.returncode), gpus=["0", "1"])
    assert done == [0, 0, 0, 0]
    seen = sorted((tmp_path / job.name / "stdout.log").read_text().strip() for job in jobs)
    assert seen == ["0", "0", "1", "1"]  # two trials per GPU, never three


def test_trials_per_gpu_needs_gpus(write, capsys):
    path = write("s.yaml", f"name: s\nbase: {EXPERIMENTS / 'demo.yaml'}\nvariants: [{{name: a}}]\n"
                 "launcher: {type: local, gpus_per_trial: 0, trials_per_gpu: 4}\n")  # fmt: skip
    assert main(["sweep", str(path), "--dry-run"]) == 2
    assert capsys.readouterr().err == (
        f"aiayn sweep: error: {path} is not a valid sweep (1 error):\n"
        "  launcher.trials_per_gpu: packs trials onto GPUs, but gpus_per_trial is 0; "
        "set gpus_per_trial to 1 (or more), or parallel for CPU trials\n"
    )


def test_cpu_trials_see_no_gpu_share_the_cores_and_run_in_parallel(tmp_path, monkeypatch):
    # each waits until both have started: only trials that run at once both succeed
    code = (
        "import os, pathlib, sys, time; d = pathlib.Path(sys.argv[1]); (d / sys.argv[2]).touch()\n"
        "end = time.time() + 60\n"
        "while len(list(d.glob('t*'))) < 2 and time.time() < end: time.sleep(0.05)\n"
        "print(repr(os.environ['CUDA_VISIBLE_DEVICES']), os.environ['OMP_NUM_THREADS'])\n"
        "sys.exit(0 if len(list(d.glob('t*'))) == 2 else 1)"
    )
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    (tmp_path / "flags").mkdir()
    jobs = [
        Job(f"t{i}", (sys.executable, "-c", code, str(tmp_path / "flags"), f"t{i}"), tmp_path / f"t{i}", str(tmp_path))
        for i in range(2)
    ]
    done = []
    launch_local(jobs, LocalLauncherSpec(parallel=2, gpus_per_trial=0), lambda job, outcome: done.append(outcome.returncode))
    assert done == [0, 0]
    assert [(tmp_path / j.name / "stdout.log").read_text() for j in jobs] == ["'' 3\n", "'' 3\n"]  # 6 cores, 2 at once


def test_too_few_gpus(tmp_path, monkeypatch):
    jobs = [Job("t", (sys.executable, "-c", "pass"), tmp_path / "t", str(tmp_path))]
    with pytest.raises(UserError) as info:
        launch_local(jobs, LocalLauncherSpec(gpus_per_trial=2), lambda *a: None, gpus=["0"])
    assert (
        str(info.value)
        == "launcher.gpus_per_trial is 2 but 1 GPU(s) are visible (0); lower gpus_per_trial, or set it to 0 to train on CPU"
    )
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(UserError) as info:
        check(LocalLauncherSpec(gpus_per_trial=1))
    assert (
        str(info.value)
        == "launcher.gpus_per_trial is 1 but 0 GPU(s) are visible (none); lower gpus_per_trial, or set it to 0 to train on CPU"
    )
    check(LocalLauncherSpec(gpus_per_trial=0))


# ---- the shipped sweep files -----------------------------------------------------------

ROWS = sorted(p.name for p in (EXPERIMENTS / "table3").glob("*.yaml"))


def test_table3_sweep_is_base_every_row_and_big():
    path = EXPERIMENTS / "table3.sweep.yaml"
    sweep = load_sweep(path)
    assert sorted(v.experiment.removeprefix("table3/") for v in sweep.variants[1:-1]) == ROWS
    trials = expand(sweep, path)
    assert [t.name for t in trials][:3] == ["base-seed1", "table3-a-h1-seed1", "table3-a-h4-seed1"]
    assert [t.name for t in trials][-2:] == ["table3-e-learned-seed1", "big-seed1"]
    assert len(trials) == 20 and all(t.changes == () for t in trials)
    assert [t.spec.reported.group for t in trials] == ["base"] + ["A"] * 4 + ["B"] * 2 + ["C"] * 7 + ["D"] * 4 + ["E", "big"]
    assert sweep.launcher == SlurmLauncherSpec(timeout_min=2880, gpus_per_node=8, cpus_per_task=8, mem_gb=64)


def test_multi30k_sweep_has_the_same_rows():
    path = EXPERIMENTS / "multi30k" / "table3.sweep.yaml"
    if not (EXPERIMENTS / "multi30k" / "base.yaml").is_file():
        pytest.skip("experiments/multi30k/base.yaml is not written yet")
    sweep = load_sweep(path)
    assert sorted(v.experiment.removeprefix("table3/") for v in sweep.variants[1:]) == ROWS
    trials = expand(sweep, path)
    assert len(trials) == 19 * 3 and trials[0].experiment == path.parent / "base.yaml"  # three seeds a row
    assert sweep.seeds == (1, 2, 3)
    assert all(t.spec.data.dir.endswith("multi30k") for t in trials)
    assert sweep.launcher == LocalLauncherSpec(parallel=8, gpus_per_trial=1, trials_per_gpu=4)


def test_demo_sweep_is_three_head_counts_at_constant_compute():
    path = EXPERIMENTS / "demo.sweep.yaml"
    trials = expand(load_sweep(path), path)
    assert [t.name for t in trials] == [f"demo-h{h}-seed{s}" for h in (2, 4, 8) for s in (1, 2)]
    assert [(t.spec.dims.h, t.spec.dims.d_k, t.spec.dims.d_v) for t in trials[::2]] == [(2, 64, 64), (4, 32, 32), (8, 16, 16)]
    assert {count_params(t.spec.model) for t in trials} == {1_053_696}
    assert all(t.spec.reported is None and t.spec.trainer.accelerator == "cpu" for t in trials)


# ---- the runner, with a stand-in launcher ----------------------------------------------


def test_runner_skips_resumes_runs_and_reports(sweep_file, tmp_path, monkeypatch, capsys):
    """Trial 1 finished before, trial 2 has a checkpoint, trial 3 is new and fails, trial 4
    exits 0 without finishing; the launcher is a stand-in that records what it was given."""
    overrides = ["sweep.grid={}", "sweep.seeds=[1]"]
    trials = expand(load_sweep(sweep_file, ["grid={}", "seeds=[1]"]), sweep_file)
    runs = tmp_path / "runs"
    sweep_dir = runs / "s"
    finished, resumable = (sweep_dir / t.name / "version_0" for t in trials[:2])
    for trial, run_dir in zip(trials, (finished, resumable)):
        (run_dir / "checkpoints").mkdir(parents=True)
        (run_dir / "checkpoints" / "last.ckpt").write_bytes(b"")
        write_trial_record(trial, run_dir)
    paper = {
        "N": 2,
        "d_model": 128,
        "d_ff": 512,
        "h": 4,
        "d_k": 32,
        "d_v": 32,
        "P_drop": 0.1,
        "eps_ls": 0.1,
        "positional": "sinusoidal",
        "train_steps": 10,
    }
    results = {"params": 1, "paper": paper, "reported": None, "steps": 10, "bleu": 1.5, "ppl": 9.0}
    (finished / "results.json").write_text(json.dumps({**results, "name": trials[0].name}))
    given = []

    def launch(jobs, launcher, on_done):
        for job in jobs:
            given.append((job.name, job.run_dir, job.argv[4:]))
            if job.name == trials[1].name:
                sessions = [{"started_at_step": 0}, {"started_at_step": 4, "ended_at_step": 10, "wall_time_s": 0.6}]
                done = {**results, "name": job.name, "bleu": 2.5, "wall_time_s": 2.4, "sessions": sessions}
                (job.run_dir / "results.json").write_text(json.dumps(done))
                on_done(job, Outcome(0, 1.0, None))
            elif job.name == trials[2].name:
                on_done(job, Outcome(2, 1.0, "Traceback ...\nValueError: boom"))
            else:
                (job.run_dir / "status.json").write_text('{"status": "interrupted", "step": 3}')
                on_done(job, Outcome(0, 1.0, None))

    monkeypatch.setattr(runner, "launch_local", launch)
    assert main(["sweep", str(sweep_file), *overrides, "--runs", str(runs)]) == 1
    assert [(name, run_dir) for name, run_dir, _ in given] == [
        (trials[1].name, resumable),  # `aiayn train --run-dir` resumes from its last.ckpt
        (trials[2].name, sweep_dir / trials[2].name / "version_0"),
        (trials[3].name, sweep_dir / trials[3].name / "version_0"),
    ]
    assert given[1][2] == (
        str(trials[2].experiment),
        *trials[2].overrides,
        "trainer.enable_progress_bar=false",
        "--run-dir",
        str(given[1][1]),
    )
    record = json.loads((sweep_dir / "sweep.json").read_text())["trials"]
    assert [(t["status"], t.get("bleu")) for t in record] == [
        ("skipped", 1.5),
        ("finished", 2.5),
        ("failed", None),
        ("failed", None),
    ]
    assert record[2]["error"] == "Traceback ...\nValueError: boom"
    assert (
        record[3]["error"]
        == "exited 0 without results.json: status.json says interrupted at step 3; re-run the sweep to resume it"
    )
    captured = capsys.readouterr()
    assert captured.out.splitlines()[0] == f"sweep s: 4 trials, 1 finished before (skipped), 3 to run -> {sweep_dir}"
    assert captured.out.splitlines()[1:4] == [
        f"[1/3] {trials[1].name}: finished in 1 s (1 s of it training): BLEU 2.50, PPL 9.00",  # this session's training
        f"[2/3] {trials[2].name}: FAILED (exit 2): ValueError: boom",
        f"[3/3] {trials[3].name}: FAILED (exit 0): exited 0 without results.json: status.json says interrupted at step 3; re-run the sweep to resume it",
    ]
    assert captured.err == (
        f"aiayn sweep: error: 2 of 4 trials failed (their errors are in {sweep_dir / 'sweep.json'}):\n"
        f"  {trials[2].name} (exit 2): ValueError: boom\n"
        f"    log: {sweep_dir / trials[2].name / 'version_0' / 'stderr.log'}\n"
        f"  {trials[3].name} (exit 0): exited 0 without results.json: status.json says interrupted at step 3; re-run the sweep to resume it\n"
        f"    log: {sweep_dir / trials[3].name / 'version_0' / 'stderr.log'}\n"
    )
    assert (sweep_dir / "results.md").read_text().count("\n") == 6  # header, rule, the two finished trials, the BLEU signature


def test_a_slurm_sweep_needs_sbatch_before_anything_is_made(sweep_file, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    runs = tmp_path / "runs"
    assert main(["sweep", str(sweep_file), "sweep.launcher={type: slurm}", "sweep.grid={}", "--runs", str(runs)]) == 2
    assert capsys.readouterr().err == (
        "aiayn sweep: error: the slurm launcher needs `sbatch` on PATH; run `aiayn sweep` on a SLURM login node, "
        "or set sweep.launcher.cluster=local to run the jobs on this machine through submitit\n"
    )
    assert not runs.exists()


def fake_slurm(folder, **scripts: str) -> str:
    """A PATH whose first folder holds `name` scripts (sbatch, sinfo) printing what a SLURM whose
    controller does not answer prints."""
    folder.mkdir()
    for name, body in scripts.items():
        (folder / name).write_text(f"#!/bin/sh\n{body}\n")
        (folder / name).chmod(0o755)
    return f"{folder}:{os.environ['PATH']}"


UNREACHABLE = "Unable to contact slurm controller (connect failure)"


def test_a_slurm_whose_controller_does_not_answer_is_named_before_anything_is_made(sweep_file, tmp_path, monkeypatch, capsys):
    path = fake_slurm(tmp_path / "bin", sbatch="exit 1", sinfo=f"echo 'slurm_load_partitions: {UNREACHABLE}' >&2; exit 1")
    monkeypatch.setenv("PATH", path)
    runs = tmp_path / "runs"
    assert main(["sweep", str(sweep_file), "sweep.launcher={type: slurm}", "sweep.grid={}", "--runs", str(runs)]) == 2
    assert capsys.readouterr().err == (
        f"aiayn sweep: error: the slurm launcher cannot reach SLURM's controller: `sinfo` says: slurm_load_partitions: {UNREACHABLE}; "
        "is slurmctld up (`scontrol ping`)? Nothing was submitted or written; run the sweep again once it answers, or set "
        "sweep.launcher.cluster=local\n"
    )
    assert not runs.exists()


def test_a_submission_slurm_refuses_is_the_launchers_failure_and_leaves_nothing(sweep_file, tmp_path, monkeypatch, capsys):
    """The controller answered sinfo, then sbatch failed (it went down between): submitit's
    FailedJobError is reported as the launcher's failure, and the trial folders go again."""
    path = fake_slurm(
        tmp_path / "bin",
        sinfo="echo debug",
        srun="exit 0",
        sbatch=f"echo 'sbatch: error: Batch job submission failed: {UNREACHABLE}' >&2; exit 1",
    )
    monkeypatch.setenv("PATH", path)
    runs = tmp_path / "runs"
    assert main(["sweep", str(sweep_file), "sweep.launcher={type: slurm}", "sweep.grid={}", "--runs", str(runs)]) == 2
    assert capsys.readouterr().err == (
        f"aiayn sweep: error: the slurm launcher could not submit the sweep's jobs: sbatch: error: Batch job submission failed: "
        f"{UNREACHABLE}; nothing was submitted\n"
    )
    assert not runs.exists()


def test_a_failed_submission_undoes_only_what_it_made(sweep_file, tmp_path, monkeypatch, capsys):
    """A trial the sweep would resume (its checkpoint from an earlier launch) is left byte for
    byte as it was when the launcher fails; the folders made for the new trials go."""
    from aiayn.builder.sweep.runner import plan_sweep

    runs = tmp_path / "runs"
    settings = ["sweep.launcher={type: slurm}", "sweep.grid={}"]
    plan = plan_sweep(sweep_file, settings, runs)
    trial = plan.trials[0]
    run_dir = plan.directory / trial.name / "version_0"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "checkpoints" / "last.ckpt").write_bytes(b"the weights of two hours")
    (run_dir / "status.json").write_text('{"status": "interrupted", "step": 5}')
    write_trial_record(trial, run_dir)
    assert state(trial, plan.directory, registry()).action == "resume"
    before = {str(p.relative_to(runs)): p.read_bytes() for p in sorted(runs.rglob("*")) if p.is_file()}
    path = fake_slurm(tmp_path / "bin", sinfo="echo debug", srun="exit 0",
                      sbatch=f"echo 'sbatch: error: Batch job submission failed: {UNREACHABLE}' >&2; exit 1")  # fmt: skip
    monkeypatch.setenv("PATH", path)
    assert main(["sweep", str(sweep_file), *settings, "--runs", str(runs)]) == 2
    assert capsys.readouterr().err.endswith("; nothing was submitted\n")
    after = {str(p.relative_to(runs)): p.read_bytes() for p in sorted(runs.rglob("*")) if p.is_file()}
    assert after == before
    assert sorted(p.name for p in plan.directory.iterdir()) == [trial.name]


@pytest.mark.parametrize("name", ["demo.search.sweep.yaml", "multi30k/tuned.sweep.yaml"])
def test_the_shipped_searches_plan(name, tmp_path, capsys):
    assert main(["sweep", str(EXPERIMENTS / name), "--dry-run", "--runs", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("first a search: ") and " over train.lr_schedule.factor [" in out[-1]
    assert "log, train.lr_schedule.warmup_steps [" in out[-1]
    assert not any(tmp_path.iterdir())


def test_the_dry_run_shows_what_each_file_variant_and_the_search_overrides_change(tmp_path, capsys):
    """A variant given as a file shows its own settings (Table 3's rows, big); an override of the
    search's ranges shows in the search's line."""
    assert main(["sweep", str(EXPERIMENTS / "table3.sweep.yaml"), "--dry-run", "--runs", str(tmp_path)]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[2:22]}
    assert rows["base-seed1"].endswith("/base-seed1/version_0")  # the base: nothing changed
    assert rows["table3-a-h1-seed1"].endswith("version_0          a_h1.yaml: dims.h=1 dims.d_k=512 dims.d_v=512")
    assert rows["table3-e-learned-seed1"].endswith("e_learned.yaml: model.positional.type=learned model.positional.max_len=512")
    assert " big.yaml: dims.d_model=1024 dims.d_ff=4096 dims.h=16 dims.P_drop=0.3 " in rows["big-seed1"]
    sweep = EXPERIMENTS / "demo.search.sweep.yaml"
    low = "sweep.search.params.train.lr_schedule.factor.low=0.5"
    assert main(["sweep", str(sweep), "--dry-run", "--runs", str(tmp_path), low]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert " over train.lr_schedule.factor [0.5, 2] log, train.lr_schedule.warmup_steps [20, 100] step 20 (tpe" in last
