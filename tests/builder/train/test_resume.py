"""Resuming cannot rewrite the record: what trains must not change, a run is never cut short, a
longer run is recorded (what changed, at which step), and results.json counts every process's
training time. A typo of an option is an error, not an abbreviation."""

import json
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from aiayn.builder.cli import main
from tests.builder.train.test_training import DEMO, tiny


@pytest.fixture
def trained(tmp_path, monkeypatch) -> Path:
    """A finished run of 3 steps, a step file at each, every step logged."""
    monkeypatch.chdir(tmp_path)
    args = tiny(tmp_path, "trainer.max_steps=3", "trainer.val_check_interval=null", "train.checkpoint.every_n_train_steps=1",
                "trainer.log_every_n_steps=1")  # fmt: skip
    assert main(["train", DEMO, *args]) == 0
    return tmp_path / "runs" / "demo" / "version_0"


def resume(tmp_path: Path, *overrides: str) -> int:
    args = tiny(
        tmp_path, "trainer.val_check_interval=null", "train.checkpoint.every_n_train_steps=1", "trainer.log_every_n_steps=1"
    )
    return main(["train", DEMO, *args, *overrides, "--resume"])


def snapshot(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def test_a_longer_run_continues_at_its_step_and_is_recorded(trained, tmp_path):
    first = json.loads((trained / "results.json").read_text())
    earlier = set(trained.glob("events.out.tfevents.*"))
    assert resume(tmp_path, "trainer.max_steps=5", "decode.beam=1") == 0
    results = json.loads((trained / "results.json").read_text())
    assert (results["steps"], results["paper"]["train_steps"]) == (5, 5)
    one, two = results["sessions"]
    assert (one["started_at_step"], one["ended_at_step"], "changed" in one) == (0, 3, False)
    assert (two["started_at_step"], two["ended_at_step"]) == (3, 5)
    assert two["changed"] == {"trainer.max_steps": [3, 5], "decode.beam": [2, 1]}
    assert one["wall_time_s"] == first["wall_time_s"] and results["wall_time_s"] == round(
        one["wall_time_s"] + two["wall_time_s"], 1
    )
    logged = []
    for path in set(trained.glob("events.out.tfevents.*")) - earlier:  # what the second process wrote
        events = EventAccumulator(str(path))
        events.Reload()
        logged += [e.step for e in events.Scalars("lr")] if "lr" in events.Tags()["scalars"] else []
    assert sorted(logged) == [4, 5]  # from the checkpoint's step on, not from 0


@pytest.mark.parametrize("steps", [2, 3], ids=["shorter", "as_long"])
def test_a_finished_run_is_never_cut_short_and_nothing_is_written(trained, tmp_path, capsys, steps):
    before = snapshot(trained)
    assert resume(tmp_path, f"trainer.max_steps={steps}") == 2
    assert capsys.readouterr().err == (
        f"aiayn train: error: trainer.max_steps ({steps}) would end {Path('runs') / 'demo' / 'version_0'} at or before step 3, "
        "where it finished; a run is never cut short: give trainer.max_steps > 3 to train it further, or train a new run\n"
    )
    assert snapshot(trained) == before


def test_what_trains_cannot_change_on_resume(trained, tmp_path, capsys):
    before = snapshot(trained)
    assert resume(tmp_path, "trainer.max_steps=5", "train.label_smoothing=0.2", "train.seed=7") == 2
    assert capsys.readouterr().err == (
        f"aiayn train: error: {Path('runs') / 'demo' / 'version_0'} was trained otherwise (train.seed: 1 -> 7; "
        "train.label_smoothing: 0.1 -> 0.2); its checkpoints cannot continue as this one: train a new run "
        "(without --resume / --run-dir), or drop the changed settings\n"
    )
    assert snapshot(trained) == before


@pytest.mark.parametrize("args", [["train", DEMO, "--resum"], ["evaluate", "run", "--spli", "valid"], ["export", "run", "--to", "ctranslate2", "out", "--quant", "int8"]],
                         ids=["train", "evaluate", "export"])  # fmt: skip
def test_an_abbreviated_option_is_an_error(args, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(args)
    assert exit_.value.code == 2
    assert f"error: unrecognized arguments: {args[-2] if args[0] != 'train' else args[-1]}" in capsys.readouterr().err


def test_a_save_inside_a_step_keeps_the_rng_where_the_step_began(tmp_path):
    """Lightning's save at SLURM's time-limit signal lands inside a step, after its dropout drew
    from the RNG: the checkpoint holds the RNG of the step's start, which the resumed run replays."""
    import torch

    from aiayn.builder.train.task import TranslationTask
    from tests.conftest import load_experiment, registry

    task = TranslationTask(
        load_experiment(DEMO, tiny(tmp_path)).model_dump(mode="json"), registry=registry()
    )  # global_step 0: no trainer
    task.on_train_batch_start(None, 0)
    began = torch.get_rng_state()
    torch.rand(3)  # the step's dropout
    inside: dict = {}
    task.on_save_checkpoint(inside)
    assert torch.equal(inside["rng"]["torch"], began)
    task._step_start = (-1, began)  # a step that ended (the trainer's step is past it): the RNG as it is now
    after: dict = {}
    task.on_save_checkpoint(after)
    assert torch.equal(after["rng"]["torch"], torch.get_rng_state()) and not torch.equal(after["rng"]["torch"], began)


def test_a_resume_from_an_epochs_checkpoint_logs_at_the_steps_it_trains(tmp_path, monkeypatch):
    """Lightning's own step runs one ahead after a resume from a checkpoint written at an epoch's
    end; the board counts the trainer's steps done, so the second process's scalars continue
    where the first stopped and each validation sits at the step of the checkpoint beside it."""
    monkeypatch.chdir(tmp_path)
    epochs = ["trainer.val_check_interval=null", "train.checkpoint.every_n_train_steps=null", "train.checkpoint.every_n_epochs=1"]
    assert main(["train", DEMO, *tiny(tmp_path, *epochs, "trainer.max_steps=10")]) == 0
    run = tmp_path / "runs" / "demo" / "version_0"
    earlier, saved = set(run.glob("events.out.tfevents.*")), set((run / "checkpoints").glob("step*.ckpt"))
    assert main(["train", DEMO, *tiny(tmp_path, *epochs, "trainer.max_steps=20"), "--resume"]) == 0
    new = sorted(int(p.stem.removeprefix("step")) for p in set((run / "checkpoints").glob("step*.ckpt")) - saved)
    logged: dict[str, list[int]] = {"lr": [], "PPL/valid": []}
    for path in set(run.glob("events.out.tfevents.*")) - earlier:
        events = EventAccumulator(str(path))
        events.Reload()
        for tag in set(logged) & set(events.Tags()["scalars"]):
            logged[tag] += [e.step for e in events.Scalars(tag)]
    assert new == [20]  # the demo's epoch: 10 steps
    assert sorted(logged["lr"]) == list(range(11, 21))
    assert sorted(logged["PPL/valid"]) == new
