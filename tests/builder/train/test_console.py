"""What `aiayn train` prints: a few plain lines when the output is not a terminal, each
validation on one line with its numbers, and none of Lightning's banners, tips or warnings."""

import io
import os
import re

import lightning as L
import pytest

import aiayn.builder.train.fit as fitting
from aiayn.builder.cli import main
from aiayn.builder.run.clock import clock
from aiayn.builder.train.progress import ConsoleProgress
from aiayn.builder.train.schedule import noam_lr
from tests.builder.train.test_training import DEMO, tiny
from tests.conftest import load_experiment


def test_train_prints_a_line_per_fifth_and_per_validation(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    # as on a SLURM login node: Lightning's hint to prepend `srun python -c ...` is not for aiayn's users
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "srun").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "bin" / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    args = tiny(tmp_path, "trainer.max_steps=10", "trainer.val_check_interval=5", "trainer.log_every_n_steps=2",
                "trainer.enable_progress_bar=true", "train.validation.bleu_max_sentences=5", "train.lr_schedule.warmup_steps=5")  # fmt: skip
    assert main(["train", DEMO, *args]) == 0
    out, err = capsys.readouterr()
    assert err == ""  # no banner, tip, or deprecation warning
    lines = out.splitlines()
    assert (
        lines[0]
        == "tokenizer: shared BPE of 300 (asked 300; 254 merges, 296 types + 4 specials) -> runs/demo/version_0/tokenizer.json"
    )
    assert lines[1].startswith("train pairs: kept 400 of 400;")
    assert lines[2] == "training demo: 10 steps on cpu"
    status = r"step (\d+)/10  loss \d+\.\d{3}  lr \d\.\d\de-\d\d(  \d+\.\dk tok/s)?  ETA \d+s"
    valid = r"step (\d+)/10  valid  loss \d+\.\d{3}  PPL \d+\.\d\d  BLEU \d+\.\d\d \(valid, first 5 of 12 sentences\)  \d+\.\dk tok/s  ETA \d+s"
    kinds = ["status" if re.fullmatch(status, x) else "valid" if re.fullmatch(valid, x) else x for x in lines[3:-1]]
    assert kinds == ["status", "status", "valid", "status", "status", "status", "valid"]
    steps = [int(re.match(r"step (\d+)", x).group(1)) for x in lines[3:-1]]
    assert steps == [2, 4, 5, 6, 8, 10, 10]
    assert re.fullmatch(
        r"finished in \d+ s: BLEU \d+\.\d\d, PPL \d+\.\d\d on valid \(12 sentences\); runs/demo/version_0", lines[-1]
    )


class Losses(L.Callback):
    """Each batch's (optimizer step after it, summed training loss, target tokens), as trained."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, float, int]] = []

    def on_train_batch_end(self, trainer, task, outputs, batch, batch_idx) -> None:
        self.batches.append((trainer.global_step, float(outputs["loss"]) * batch.n_tgt_tokens, batch.n_tgt_tokens))


def test_each_status_line_has_its_own_steps_numbers(tmp_path, monkeypatch, capsys):
    """log_every_n_steps beyond the run: TensorBoard logs nothing, the console still reports each
    line's own window (the loss since the previous line, the lr of its step), the first line too."""
    monkeypatch.chdir(tmp_path)
    losses, fit = Losses(), fitting.fit
    monkeypatch.setattr(fitting, "fit", lambda *a, callbacks=(), **k: fit(*a, callbacks=[*callbacks, losses], **k))
    args = tiny(tmp_path, "trainer.max_steps=10", "trainer.val_check_interval=4", "trainer.log_every_n_steps=20",
                "trainer.enable_progress_bar=true", "train.validation.bleu_max_sentences=3", "train.lr_schedule.warmup_steps=4")  # fmt: skip
    assert main(["train", DEMO, *args]) == 0
    out, err = capsys.readouterr()
    assert err == ""  # Lightning's warning that the epoch is shorter than the logging interval is not ours
    status = [re.fullmatch(r"step (\d+)/10  loss (\d+\.\d{3})  lr (\S+)  \d+\.\dk tok/s  ETA \d+s", x) for x in out.splitlines()]
    status = [(int(m.group(1)), float(m.group(2)), m.group(3)) for m in status if m]
    assert [step for step, _, _ in status] == [2, 4, 6, 8, 10]
    spec = load_experiment(DEMO, args).train.lr_schedule
    for (step, loss, lr), previous in zip(status, [0] + [s for s, _, _ in status]):
        assert lr == f"{noam_lr(step, d_model=32, warmup_steps=spec.warmup_steps, factor=spec.factor):.2e}"
        window = [(total, n) for at, total, n in losses.batches if previous < at <= step]
        assert loss == pytest.approx(sum(t for t, _ in window) / sum(n for _, n in window), abs=5e-4)


def test_on_a_terminal_the_status_line_is_rewritten_in_place():
    stream = io.StringIO()
    progress = ConsoleProgress(stream, interactive=True)
    progress._status("step 1/10")
    progress._status("step 2/10")
    progress._line("step 2/10  valid")
    assert stream.getvalue() == "\rstep 1/10\x1b[K\rstep 2/10\x1b[K\r\x1b[Kstep 2/10  valid\n"


@pytest.mark.parametrize("seconds, text", [(0.4, "0s"), (59.6, "1m00s"), (245, "4m05s"), (3725, "1h02m")])
def test_clock(seconds, text):
    assert clock(seconds) == text
