"""Checkpoints on their steps: a step file at every multiple of every_n_train_steps whatever the
epoch length (Lightning's ModelCheckpoint put off a save that fell on an epoch's last batch to
the next validation), and at the final step; keep_last of them kept; the newest averaged."""

import json
import os
from pathlib import Path

import pytest
import torch

from aiayn.builder.cli import main
from tests.builder.train.test_training import DEMO, checkpoint_params, tiny

EPOCH_OF = {2: "data.n_train=40", 3: "data.n_train=100", 5: "data.n_train=200"}  # batches per epoch at 800 tokens a step


def steps_in(run: Path) -> dict[str, int]:
    """{file name: the global step stored in it (None in a slim, averaged one)} of the run's checkpoints."""
    return {p.name: torch.load(p, weights_only=True).get("global_step") for p in sorted((run / "checkpoints").glob("*.ckpt"))}


@pytest.mark.parametrize("epoch", [2, 3], ids=["epoch_divides_interval", "epoch_does_not"])
def test_a_step_file_on_every_multiple_and_at_the_final_step(tmp_path, monkeypatch, epoch):
    monkeypatch.chdir(tmp_path)
    args = tiny(tmp_path, EPOCH_OF[epoch], "trainer.max_steps=10", "trainer.val_check_interval=3",
                "train.checkpoint.every_n_train_steps=4", "train.checkpoint.keep_last=10")  # fmt: skip
    assert main(["train", DEMO, *args]) == 0
    run = tmp_path / "runs" / "demo" / "version_0"
    assert steps_in(run) == {"last.ckpt": 10, "step00000004.ckpt": 4, "step00000008.ckpt": 8, "step00000010.ckpt": 10}


def test_keep_last_leaves_that_many_and_average_takes_the_newest(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = tiny(tmp_path, EPOCH_OF[5], "trainer.max_steps=9", "trainer.val_check_interval=5",
                "train.checkpoint.every_n_train_steps=2", "train.checkpoint.keep_last=2", "train.average_last=2")  # fmt: skip
    assert main(["train", DEMO, *args]) == 0
    run = tmp_path / "runs" / "demo" / "version_0"
    assert steps_in(run) == {"averaged.ckpt": None, "last.ckpt": 9, "step00000008.ckpt": 8, "step00000009.ckpt": 9}
    assert json.loads((run / "results.json").read_text())["averaged_checkpoints"] == ["step00000008.ckpt", "step00000009.ckpt"]
    capsys.readouterr()
    assert main(["average", "--last", "2", str(run), "-o", str(tmp_path / "mean.ckpt")]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        f"  {run / 'checkpoints' / n}" for n in ("step00000008.ckpt", "step00000009.ckpt")
    ]
    a, b = (
        checkpoint_params(run / "checkpoints" / "step00000008.ckpt"),
        checkpoint_params(run / "checkpoints" / "step00000009.ckpt"),
    )
    mean = checkpoint_params(tmp_path / "mean.ckpt")
    for k in a:
        torch.testing.assert_close(mean[k], (a[k] + b[k]) / 2)


def test_a_run_that_averaged_is_evaluated_translated_and_exported_as_its_average(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = tiny(tmp_path, EPOCH_OF[3], "trainer.max_steps=4", "trainer.val_check_interval=null",
                "train.checkpoint.every_n_train_steps=2", "train.average_last=2")  # fmt: skip
    assert main(["train", DEMO, *args]) == 0
    run = tmp_path / "runs" / "demo" / "version_0"
    results = json.loads((run / "results.json").read_text())
    mean = "the mean of step00000002.ckpt, step00000004.ckpt"
    capsys.readouterr()
    assert main(["evaluate", str(run), "--split", "valid", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["checkpoint"], report["model"]) == (str(run / "checkpoints" / "averaged.ckpt"), mean)
    assert (report["bleu"], report["ppl"]) == (results["bleu"], results["ppl"])  # what results.json reports
    (tmp_path / "in.txt").write_text("three books\n")
    assert main(["translate", str(run), "--input", str(tmp_path / "in.txt")]) == 0
    assert capsys.readouterr().err == f"aiayn translate: translated with {run / 'checkpoints' / 'averaged.ckpt'} ({mean})\n"
    pytest.importorskip("ctranslate2")
    assert main(["export", str(run), "--to", "ctranslate2", str(tmp_path / "ct2")]) == 0
    assert (
        capsys.readouterr().out
        == f"exported {run / 'checkpoints' / 'averaged.ckpt'} ({mean}) to {tmp_path / 'ct2'} (CTranslate2)\n"
    )


def test_last_is_a_second_name_of_the_newest_step_file_not_a_copy(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = tiny(tmp_path, EPOCH_OF[5], "trainer.max_steps=4", "trainer.val_check_interval=null",
                "train.checkpoint.every_n_train_steps=2", "train.checkpoint.keep_last=1")  # fmt: skip
    assert main(["train", DEMO, *args]) == 0
    checkpoints = tmp_path / "runs" / "demo" / "version_0" / "checkpoints"
    last, newest = os.stat(checkpoints / "last.ckpt"), os.stat(checkpoints / "step00000004.ckpt")
    assert (last.st_ino, last.st_nlink) == (newest.st_ino, 2)  # one file on disk, two names
    (checkpoints / "step00000004.ckpt").unlink()  # pruned, as keep_last would: last.ckpt lives on
    assert steps_in(checkpoints.parent) == {"last.ckpt": 4}


def test_last_is_a_copy_where_the_filesystem_has_no_hard_links(tmp_path, monkeypatch):
    from aiayn.builder.train import checkpoints

    source, target = tmp_path / "step.ckpt", tmp_path / "last.ckpt"
    source.write_bytes(b"weights")
    target.write_bytes(b"older")
    monkeypatch.setattr(checkpoints.os, "link", lambda a, b: (_ for _ in ()).throw(OSError(95, "Operation not supported")))
    checkpoints.link_or_copy(source, target)
    assert target.read_bytes() == b"weights" and os.stat(target).st_ino != os.stat(source).st_ino
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt", "step.ckpt"]  # no temporary left


@pytest.mark.parametrize(
    "keep, left",
    [("all", ["averaged.ckpt", "last.ckpt", "step00000002.ckpt"]), ("last", ["averaged.ckpt", "last.ckpt"]), ("none", None)],
)
def test_a_finished_run_keeps_what_the_sweep_says(tmp_path, keep, left):
    from aiayn.builder.run.rundir import RunDir

    run = RunDir(tmp_path)
    run.checkpoints.mkdir()
    for name in ("averaged.ckpt", "last.ckpt", "step00000002.ckpt"):
        (run.checkpoints / name).write_bytes(b"x")
    run.drop_checkpoints(keep)
    assert (sorted(p.name for p in run.checkpoints.iterdir()) if run.checkpoints.exists() else None) == left
