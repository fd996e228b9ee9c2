"""Trainer options as they act on a run: gradient clipping changes the update as clip_grad_norm_
does, max_time stops a run (finished, its final step saved), SIGTERM leaves an interrupted run
that resumes, and val_check_interval counts optimizer steps under gradient accumulation."""

import json
import os
import signal
import subprocess
import sys
import time

import lightning as L
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import aiayn.builder.train.fit as fitting
from aiayn.builder.cli import main
from aiayn.builder.model.loss import batch_loss
from aiayn.builder.train.task import TranslationTask
from tests.builder.train.test_training import DEMO, checkpoint_params, tiny
from tests.conftest import ROOT, load_experiment, registry


class Recorder(L.Callback):
    """The initial weights and every batch, as the run trained on them."""

    def __init__(self) -> None:
        self.initial: dict[str, torch.Tensor] = {}
        self.batches: list = []

    def on_train_start(self, trainer, task) -> None:
        self.initial = {k: v.detach().clone() for k, v in task.model.state_dict().items()}

    def on_train_batch_start(self, trainer, task, batch, batch_idx) -> None:
        self.batches.append(batch)


def replay(spec, initial, batches, clip: float | None) -> dict[str, torch.Tensor]:
    """The run's steps done by hand: the task's optimizer and schedule, clip_grad_norm_ between
    backward and step."""
    task = TranslationTask(spec.model_dump(mode="json"), registry=registry())
    task.model.load_state_dict(initial)
    configured = task.configure_optimizers()
    optimizer, schedule = configured["optimizer"], configured["lr_scheduler"]["scheduler"]
    for batch in batches:
        optimizer.zero_grad()
        loss, _, _ = batch_loss(task.model, batch, eps=spec.train.label_smoothing, pad_id=0, loss=task.criterion)
        (loss / batch.n_tgt_tokens).backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(task.model.parameters(), clip)
        optimizer.step()
        schedule.step()
    return {f"model.{k}": v for k, v in task.model.state_dict().items()}


def test_gradient_clipping_changes_the_update_as_clip_grad_norm_does(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    recorder, fit = Recorder(), fitting.fit
    monkeypatch.setattr(fitting, "fit", lambda *a, callbacks=(), **k: fit(*a, callbacks=[*callbacks, recorder], **k))
    args = tiny(
        tmp_path, "trainer.max_steps=3", "trainer.val_check_interval=null", "dims.P_drop=0.0", "trainer.gradient_clip_val=0.05"
    )
    assert main(["train", DEMO, *args]) == 0
    trained = checkpoint_params(tmp_path / "runs" / "demo" / "version_0" / "checkpoints" / "last.ckpt")
    spec = load_experiment(DEMO, args)
    clipped, unclipped = (replay(spec, recorder.initial, recorder.batches, clip) for clip in (0.05, None))
    for k in trained:
        torch.testing.assert_close(trained[k], clipped[k], rtol=1e-5, atol=1e-6, msg=k)
    assert any(not torch.allclose(trained[k], unclipped[k], rtol=1e-4, atol=1e-5) for k in trained)  # clipping mattered


def test_max_time_stops_a_run_that_then_counts_as_finished(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # the steps and the status say max_time stopped it, not the seconds it took (a loaded machine's are any number):
    # two seconds hold tens to hundreds of the tiny model's steps, never the 5,000 that would end it otherwise
    args = tiny(tmp_path, "trainer.max_steps=5000", "trainer.max_time=00:00:00:02", "trainer.val_check_interval=null",
                "train.checkpoint.every_n_train_steps=1000", "train.lr_schedule.warmup_steps=10")  # fmt: skip
    assert main(["train", DEMO, *args]) == 0
    run = tmp_path / "runs" / "demo" / "version_0"
    steps = json.loads((run / "results.json").read_text())["steps"]
    assert 0 < steps < 5000 and json.loads((run / "status.json").read_text())["status"] == "finished"
    assert (run / "checkpoints" / f"step{steps:08d}.ckpt").is_file()  # the step max_time stopped at is saved


def test_sigterm_leaves_an_interrupted_run_that_resumes(tmp_path):
    args = ["train", DEMO, *tiny(tmp_path, "trainer.max_steps=50", "trainer.val_check_interval=null",
                                 "train.checkpoint.every_n_train_steps=1", "train.lr_schedule.warmup_steps=10"), "--runs", str(tmp_path / "runs")]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "aiayn", *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    run = tmp_path / "runs" / "demo" / "version_0"
    deadline = time.monotonic() + 120
    while not (run / "checkpoints" / "last.ckpt").is_file() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err[-3000:]  # interrupted, as Ctrl-C
    status = json.loads((run / "status.json").read_text())
    assert status["status"] == "interrupted" and 1 <= status["step"] < 50 and not (run / "results.json").exists()
    assert main([*args, "--resume"]) == 0
    results = json.loads((run / "results.json").read_text())
    assert results["steps"] == 50 and [s["started_at_step"] for s in results["sessions"]] == [0, status["step"]]


def test_val_check_interval_counts_optimizer_steps_under_accumulation(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # 800 tokens a step in batches of 200: 4 batches a step
    args = tiny(tmp_path, "trainer.max_steps=4", "trainer.val_check_interval=2", "train.max_tokens_per_batch=200",
                "train.validation.bleu=false", "train.lr_schedule.warmup_steps=4")  # fmt: skip
    assert main(["train", DEMO, *args]) == 0
    events = EventAccumulator(str(tmp_path / "runs" / "demo" / "version_0"))
    events.Reload()
    assert [e.step for e in events.Scalars("loss/valid")] == [2, 4]
