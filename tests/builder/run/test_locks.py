"""A run directory belongs to one process at a time: `aiayn train` holds an OS lock on it (flock,
released by the kernel however the process ends), a second one is a message naming the holder,
and of two concurrent resumes exactly one trains. The kill tests (tests/builder/train/test_kill.py)
resume after a SIGKILL: no stale lock."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aiayn.builder.cli import main
from aiayn.builder.run.outputs import hold_run, holder, release_run
from tests.builder.train.test_training import DEMO, tiny
from tests.conftest import ROOT

HOLD = "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(120)"


@pytest.fixture
def trained(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                "train",
                DEMO,
                *tiny(tmp_path, "trainer.max_steps=2", "trainer.val_check_interval=null", "train.lr_schedule.warmup_steps=2"),
            ]
        )
        == 0
    )
    return tmp_path / "runs" / "demo" / "version_0"


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_run_in_use_is_refused_naming_its_holder(trained, tmp_path, capsys):
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(trained)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline() == "held\n"
        before = snapshot(trained)
        args = tiny(tmp_path, "trainer.max_steps=4", "trainer.val_check_interval=null", "train.lr_schedule.warmup_steps=2")
        assert main(["train", DEMO, *args, "--resume"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"aiayn train: error: {Path('runs') / 'demo' / 'version_0'} is in use by pid {process.pid} (")
        assert err.endswith("); resume it when it is done (or stop it)\n")
        assert snapshot(trained) == before
    finally:
        process.kill()
        process.wait()
    assert main(["train", DEMO, *args, "--resume"]) == 0  # the holder is gone, and so is its lock


def test_the_lock_is_the_processes_and_leaves_no_file(tmp_path):
    run = tmp_path / "run"
    hold_run(run, doing="x")
    hold_run(run, doing="x")  # held already: fine
    assert list(run.iterdir()) == [] and holder(run).startswith(f"pid {os.getpid()} (")
    release_run(run)
    assert holder(run) == "another process"  # nobody holds it


def test_of_two_concurrent_resumes_exactly_one_trains(trained, tmp_path):
    args = ["train", DEMO, *tiny(tmp_path, "trainer.max_steps=30", "trainer.val_check_interval=null", "train.lr_schedule.warmup_steps=2"),
            "--resume"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    processes = [subprocess.Popen([sys.executable, "-m", "aiayn", *args], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]  # fmt: skip
    done = [(p.wait(timeout=300), p.stderr.read()) for p in processes]
    codes = sorted(code for code, _ in done)
    assert codes == [0, 2], done
    [(_, refused)] = [(code, err) for code, err in done if code == 2]
    assert " is in use by pid " in refused and refused.endswith("); resume it when it is done (or stop it)\n")
    results = json.loads((trained / "results.json").read_text())
    assert results["steps"] == 30 and [s["started_at_step"] for s in results["sessions"]] == [0, 2]


def test_one_sweep_at_a_time_in_a_sweep_directory(tmp_path, capsys):
    """A second sweep would start again the trials the first one queued, in new versions."""
    directory = tmp_path / "runs" / "demo-heads"
    directory.mkdir(parents=True)
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(directory)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline() == "held\n"
        assert main(["sweep", str(ROOT / "experiments" / "demo.sweep.yaml"), "--runs", str(tmp_path / "runs")]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"aiayn sweep: error: {directory} is in use by pid {process.pid} (")
        assert err.endswith("); run the sweep again when it is done (or stop it)\n") and list(directory.iterdir()) == []
    finally:
        process.kill()
        process.wait()
