"""A training process killed with SIGKILL (in a step, or in the middle of writing a checkpoint)
leaves a run that `aiayn train --resume` continues from its last complete checkpoint. The kill in
a save is deterministic and quick (default tier); the kill at a random moment is the slow tier's."""

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from tests.conftest import EXPERIMENTS, ROOT

TINY = [
    "dims.d_model=32", "dims.d_ff=64", "dims.h=2", "dims.d_k=16", "dims.d_v=16", "dims.N=1", "dims.vocab_size=300",
    "data.n_train=400", "data.n_valid=12", "data.n_test=12", "train.tokens_per_step=800",
    "trainer.enable_progress_bar=false", "trainer.val_check_interval=null", "decode.beam=1", "decode.max_len_b=5",
    "train.checkpoint.every_n_train_steps=1", "train.checkpoint.keep_last=2", "trainer.max_steps=8",
]  # fmt: skip

# `aiayn train`, whose N-th torch.save writes part of the file and then kills the process
KILLED_IN_A_SAVE = textwrap.dedent("""
    import os, signal, sys, torch
    from aiayn.builder.cli import main
    saves, real = [0], torch.save
    def save(obj, f, *args, **kwargs):
        saves[0] += 1
        if saves[0] == int(os.environ["KILL_AT_SAVE"]):
            f.write(b"half a checkpoint")
            f.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return real(obj, f, *args, **kwargs)
    torch.save = save
    sys.exit(main(sys.argv[1:]))
""")


def command(tmp_path: Path, *extra: str) -> list[str]:
    return [
        "train",
        str(EXPERIMENTS / "demo.yaml"),
        *TINY,
        f"data.cache_dir={tmp_path / 'cache'}",
        "--runs",
        str(tmp_path / "runs"),
        *extra,
    ]


def environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **extra}


def resume_and_finish(tmp_path: Path, *extra: str, steps: int = 8) -> dict:
    run = tmp_path / "runs" / "demo" / "version_0"
    last = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)  # whole: it loads
    done = subprocess.run([sys.executable, "-m", "aiayn", *command(tmp_path, *extra, "--resume")], env=environment(),
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((run / "results.json").read_text())
    assert results["steps"] == steps and json.loads((run / "status.json").read_text())["status"] == "finished"
    return last


def test_killed_while_writing_a_checkpoint(tmp_path):
    script = tmp_path / "killed.py"
    script.write_text(KILLED_IN_A_SAVE)
    # a step's checkpoint is one torch.save (last.ckpt is its copy): save 3 is step 3's, half written when killed
    killed = subprocess.run([sys.executable, str(script), *command(tmp_path)], env=environment(KILL_AT_SAVE="3"),
                            capture_output=True, text=True, timeout=600)  # fmt: skip
    assert killed.returncode == -signal.SIGKILL
    status = json.loads((tmp_path / "runs" / "demo" / "version_0" / "status.json").read_text())
    assert status["status"] == "running"  # as a kill leaves it: nothing recorded the end
    last = resume_and_finish(tmp_path)
    assert last["global_step"] == 2  # the last complete checkpoint, not the half-written one
    assert not list((tmp_path / "runs" / "demo" / "version_0" / "checkpoints").glob(".*.tmp"))  # cleaned on resume


@pytest.mark.slow
def test_killed_at_a_random_moment(tmp_path):
    longer = "trainer.max_steps=60"  # long enough that the kill lands in training, asserted below
    process = subprocess.Popen([sys.executable, "-m", "aiayn", *command(tmp_path, longer)], env=environment(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    run = tmp_path / "runs" / "demo" / "version_0"
    deadline = time.monotonic() + 300
    while not (run / "checkpoints" / "last.ckpt").is_file() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(random.Random(os.getpid()).uniform(0.0, 0.5))
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL  # it died of the kill, not of finishing first
    assert not (run / "results.json").exists()
    killed_at = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["global_step"]
    assert 1 <= killed_at < 60
    resume_and_finish(tmp_path, longer, steps=60)
