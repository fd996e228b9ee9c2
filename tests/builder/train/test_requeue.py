"""builder/train/requeue.py without a cluster: in a process Lightning takes for a SLURM task, the
time-limit signal (USR1) landing inside a step's forward is answered at that step's end with
its step checkpoint, once, and training goes on (SLURM's SIGTERM after the requeue ends it;
tests/slurm/ runs the whole of it on a real cluster)."""

import os
import signal
import subprocess
import sys

import lightning as L
import pytest
import torch

from aiayn.builder.run.rundir import RunDir
from aiayn.builder.train.fit import fit
from aiayn.builder.train.requeue import RequeueAtStepEnd, in_slurm_job, slurm_job_id
from tests.builder.train.test_training import DEMO, tiny
from tests.conftest import ROOT, load_experiment

ONE_TASK = {"SLURM_NTASKS": "1", "SLURM_NTASKS_PER_NODE": "1", "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
            "SLURM_NODEID": "0", "SLURM_JOB_NAME": "unit", "SLURM_NODELIST": "localhost"}  # fmt: skip


class SignalInsideStep(L.Callback):
    """Sends this process USR1 between the forward and the backward of optimizer step `step` + 1."""

    def __init__(self, step: int) -> None:
        self.step, self.sent_at = step, None

    def on_before_backward(self, trainer: L.Trainer, task: L.LightningModule, loss: torch.Tensor) -> None:
        if trainer.global_step == self.step and self.sent_at is None:
            self.sent_at = trainer.global_step
            os.kill(os.getpid(), signal.SIGUSR1)


@pytest.mark.parametrize("accumulate", [[], ["train.max_tokens_per_batch=400"]], ids=["one_batch", "two_micro_batches"])
def test_the_signal_is_answered_at_the_steps_end_with_its_checkpoint(tmp_path, monkeypatch, capsys, accumulate):
    for key, value in ONE_TASK.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)  # no job to requeue: scontrol is not called
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    assert in_slurm_job() and slurm_job_id() is None
    spec = load_experiment(DEMO, tiny(tmp_path, "trainer.max_steps=8", "train.checkpoint.every_n_train_steps=100", *accumulate))
    run = RunDir(tmp_path / "runs" / "demo" / "version_0")
    before = signal.getsignal(signal.SIGUSR1)
    sender = SignalInsideStep(4)  # with two micro-batches a step, inside the first: the step ends after the second
    fit(spec, run, experiment_path=DEMO, resume=False, callbacks=[sender])
    assert sender.sent_at == 4
    assert "SLURM's time-limit signal: saved step 5, requeueing job None" in capsys.readouterr().out
    # the step the signal landed in, saved at its end; the final step's; nothing inside a step
    assert [p.name for p in run.step_checkpoints()] == ["step00000005.ckpt", "step00000008.ckpt"]
    assert not run.hpc_checkpoints()
    saved = torch.load(run.checkpoints / "step00000005.ckpt", map_location="cpu", weights_only=False)
    assert saved["global_step"] == 5
    assert signal.getsignal(signal.SIGUSR1) == before  # the handler was the fit's alone


def test_no_callback_outside_slurm(monkeypatch, tmp_path):
    for key in ONE_TASK:
        monkeypatch.delenv(key, raising=False)
    from aiayn.builder.train.trainer import build_trainer

    spec = load_experiment(DEMO, tiny(tmp_path))
    trainer = build_trainer(spec, RunDir(tmp_path / "runs" / "demo" / "version_0"))
    assert not in_slurm_job() and not any(isinstance(c, RequeueAtStepEnd) for c in trainer.callbacks)


def test_the_signal_during_the_final_evaluation_is_ignored(tmp_path, monkeypatch):
    for key, value in ONE_TASK.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    from aiayn.builder.decode import metrics

    evaluate, sent = metrics.evaluate_texts, []

    def signalled_evaluation(*args, **kwargs):
        sent.append(True)
        os.kill(os.getpid(), signal.SIGUSR1)  # by default it would end this process
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(metrics, "evaluate_texts", signalled_evaluation)  # what the graph's final evaluation calls
    spec = load_experiment(DEMO, tiny(tmp_path, "trainer.max_steps=2"))
    run = RunDir(tmp_path / "runs" / "demo" / "version_0")
    before = signal.getsignal(signal.SIGUSR1)
    results = fit(spec, run, experiment_path=DEMO, resume=False)
    assert sent and results is not None and results["steps"] == 2 and run.results_file.is_file()
    assert signal.getsignal(signal.SIGUSR1) == before


# `aiayn train` in a process of its own, SLURM's signal sent to it while it starts (after the CLI
# began, before the fit): by default USR1 would end the process with exit -10
SIGNAL_IN_START_UP = """
import os, signal, sys
from aiayn.builder.cli import main
from aiayn.builder.train import fit

def check_data_files(spec):
    os.kill(os.getpid(), signal.SIGUSR1)
    return checked(spec)

checked, fit.check_data_files = fit.check_data_files, check_data_files
sys.exit(main(sys.argv[1:]))
"""


def test_the_signal_in_the_start_up_is_answered_at_the_first_steps_end(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(ONE_TASK, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")  # no SLURM_JOB_ID: no job to requeue
    args = tiny(tmp_path, "trainer.max_steps=3", "train.checkpoint.every_n_train_steps=100", "--runs", str(tmp_path / "runs"))
    done = subprocess.run([sys.executable, "-c", SIGNAL_IN_START_UP, "train", DEMO, *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "SLURM's time-limit signal: saved step 1, requeueing job None" in done.stdout
    run = RunDir(tmp_path / "runs" / "demo" / "version_0")
    assert [p.name for p in run.step_checkpoints()] == ["step00000001.ckpt", "step00000003.ckpt"]
