"""Training end to end through the CLI on the built-in demo corpus, with a tiny model."""

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from aiayn.builder.cli import main
from aiayn.builder.run.rundir import RunDir
from tests.conftest import EXPERIMENTS, ROOT, load_experiment

DEMO = str(EXPERIMENTS / "demo.yaml")
TINY = [
    "dims.d_model=32",
    "dims.d_ff=64",
    "dims.h=2",
    "dims.d_k=16",
    "dims.d_v=16",
    "dims.N=1",
    "dims.vocab_size=300",
    "data.n_train=400",
    "data.n_valid=12",
    "data.n_test=12",
    "train.tokens_per_step=800",
    "trainer.log_every_n_steps=1",
    "trainer.enable_progress_bar=false",
    "decode.beam=2",
    "decode.max_len_b=5",
]


def tiny(tmp_path: Path, *extra: str) -> list[str]:
    return [*TINY, f"data.cache_dir={tmp_path / 'cache'}", *extra]


def checkpoint_params(path: Path) -> dict[str, torch.Tensor]:
    state = torch.load(path, map_location="cpu", weights_only=False)["state_dict"]
    return {k: v for k, v in state.items() if k.startswith("model.")}


def test_train_writes_a_finished_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = tiny(tmp_path, "trainer.max_steps=12", "trainer.val_check_interval=6", "train.validation.attention_maps_every=1")
    assert main(["train", DEMO, *args]) == 0
    run = tmp_path / "runs" / "demo" / "version_0"
    results = json.loads((run / "results.json").read_text())
    assert results["steps"] == 12 and results["params"] > 0 and results["paper"]["N"] == 1
    assert results["sacrebleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert 0 <= results["bleu"] <= 100 and results["ppl"] > 1
    assert json.loads((run / "status.json").read_text())["status"] == "finished"
    progress = json.loads((run / "progress.json").read_text())  # written at the last step whatever the interval
    assert (progress["step"], progress["max_steps"], progress["eta_s"]) == (12, 12, 0.0)
    assert (run / "tokenizer.json").is_file() and (run / "checkpoints" / "last.ckpt").is_file()
    assert "d_model: 32" in (run / "config.diff.yaml").read_text()
    check_results_equal_evaluate_on_the_validation_split(run, results)

    events = EventAccumulator(str(run), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    events.Reload()
    tags = events.Tags()
    # What a researcher opens TensorBoard for sorts first (upper case before lower), no `epoch` chart
    assert sorted(tags["scalars"]) == [
        "BLEU/valid",
        "PPL/train",
        "PPL/valid",
        "loss/train",
        "loss/valid",
        "lr",
        "train/batch_tokens",
        "train/grad_norm",
        "train/tokens_per_s",
        "valid/chrF",
    ]
    assert [e.step for e in events.Scalars("BLEU/valid")][-1] == 12  # the whole split, once, at the end
    assert tags["tensors"] == ["valid/samples/text_summary"]
    assert any(t.startswith("valid/attention/decoder.layer0.cross") for t in tags["images"])
    (figure,) = events.Images("model")  # the model drawn from its config, when the run started
    assert (figure.step, figure.width) == (0, 800) and figure.height > 600
    loss = [e.value for e in events.Scalars("loss/train")]
    assert sum(loss[-3:]) / 3 < sum(loss[:3]) / 3  # it learns
    lrs = [e.value for e in events.Scalars("lr")]
    schedule = load_experiment(DEMO).train.lr_schedule
    assert lrs[0] == pytest.approx(schedule.factor * 32**-0.5 * schedule.warmup_steps**-1.5)  # eq. (3), step 1


def check_results_equal_evaluate_on_the_validation_split(run: Path, results: dict) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["evaluate", str(run), "--split", "valid", "--json"]) == 0
    report = json.loads(out.getvalue())
    assert report["n_sentences"] == results["n_sentences"] == 12
    assert (report["bleu"], report["chrf"], report["ppl"]) == (results["bleu"], results["chrf"], results["ppl"])
    assert report["signature"] == results["sacrebleu_signature"]
    # what it scored is saved, line by line, for `aiayn results`' paired bootstrap
    hyps, refs = RunDir(run).translations_of("valid")
    assert len(hyps) == len(refs) == 12 and results["seed"] == load_experiment(run / "config.yaml").train.seed
    assert round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2) == results["bleu"]


@pytest.mark.parametrize(
    ("stop", "extra"),
    [
        (3, []),
        (3, ["data.static_shapes.num_buckets=3"]),
        (10, []),  # the epoch's last batch (10 a epoch): the next epoch's iterator is made after the save
        (3, ["trainer.val_check_interval=3"]),  # a validation step: its loader's iterator too
    ],
    ids=["mid_epoch", "static_shapes", "epoch_end", "validation_step"],
)
def test_resume_equals_an_uninterrupted_run(tmp_path, monkeypatch, stop, extra):
    monkeypatch.chdir(tmp_path)
    common = tiny(tmp_path, "trainer.val_check_interval=null", f"train.checkpoint.every_n_train_steps={stop}", *extra)
    total = stop + 3
    assert main(["train", DEMO, *common, f"trainer.max_steps={total}", "--runs", "straight"]) == 0
    assert main(["train", DEMO, *common, f"trainer.max_steps={stop}", "--runs", "split"]) == 0
    split = tmp_path / "split" / "demo" / "version_0"
    assert json.loads((split / "status.json").read_text())["status"] == "finished"
    assert main(["train", DEMO, *common, f"trainer.max_steps={total}", "--runs", "split", "--resume"]) == 0
    straight = checkpoint_params(tmp_path / "straight" / "demo" / "version_0" / "checkpoints" / "last.ckpt")
    resumed = checkpoint_params(split / "checkpoints" / "last.ckpt")
    assert straight.keys() == resumed.keys()
    for name in straight:
        torch.testing.assert_close(resumed[name], straight[name], rtol=0, atol=0, msg=name)
    assert json.loads((split / "results.json").read_text())["steps"] == total


def test_resume_without_a_run_is_a_message(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["train", DEMO, *tiny(tmp_path), "--resume"]) == 2
    assert capsys.readouterr().err == (
        f"aiayn train: error: --resume: no run of 'demo' under {Path('runs') / 'demo'} has a checkpoint; train it first, without --resume\n"
    )


def test_bad_data_fails_clearly_and_leaves_no_run_behind(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.en").write_text("a b\nc d\n")
    (data / "train.de").write_text("x y\n")
    for split in ("valid", "test"):
        (data / f"{split}.en").write_text("a\n")
        (data / f"{split}.de").write_text("x\n")
    args = [*tiny(tmp_path), "data.type=files", f"data.dir={data}"]
    assert main(["train", DEMO, *args]) == 2
    err = capsys.readouterr().err
    assert f"{data / 'train.en'}" in err and f"{data / 'train.de'}" in err and "Traceback" not in err
    assert list((tmp_path / "runs").glob("demo/version_*")) == []  # nothing to mistake for a run


def test_ddp_two_cpu_processes(tmp_path):
    run_dir, out = tmp_path / "runs" / "demo" / "version_0", tmp_path / "probe"
    out.mkdir()
    args = tiny(tmp_path, "trainer.max_steps=3", "trainer.val_check_interval=3", "trainer.devices=2", "trainer.strategy=ddp",
                "trainer.accelerator=cpu", "train.checkpoint.every_n_train_steps=3", "train.validation.bleu=false")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    probe = Path(__file__).with_name("ddp_probe.py")
    done = subprocess.run(
        [sys.executable, str(probe), DEMO, str(run_dir), str(out), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world"] for r in ranks] == [2, 2]
    seen = [{i for batch in r["batches"] for i in batch} for r in ranks]
    assert seen[0] and seen[1] and not seen[0] & seen[1]  # disjoint examples
    assert len(ranks[0]["batches"]) == len(ranks[1]["batches"])
    assert ranks[0]["param_sum"] == ranks[1]["param_sum"] and ranks[0]["param_abs"] == ranks[1]["param_abs"]
    # the validation loss is gathered from both ranks' shards: one process on the whole split agrees
    [validation] = ranks[0]["validations"]
    out_ = io.StringIO()
    with contextlib.redirect_stdout(out_):
        assert main(["evaluate", str(run_dir / "checkpoints" / "step00000003.ckpt"), "--split", "valid", "--json"]) == 0
    assert validation["step"] == 3 and validation["ppl"] == pytest.approx(json.loads(out_.getvalue())["ppl"], rel=1e-4)
    # only rank 0 wrote: one run directory, one results.json, its events and checkpoints
    assert sorted(p.name for p in (tmp_path / "runs" / "demo").iterdir()) == ["version_0"]
    assert (run_dir / "results.json").is_file() and (run_dir / "checkpoints" / "last.ckpt").is_file()
    assert not (tmp_path / "lightning_logs").exists()


def test_average_last_evaluates_and_keeps_the_mean_of_the_last_checkpoints(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = tiny(tmp_path, "trainer.max_steps=12", "trainer.val_check_interval=null",
                "train.checkpoint.every_n_train_steps=4", "train.average_last=2")  # fmt: skip
    assert main(["train", DEMO, *args]) == 0
    run = tmp_path / "runs" / "demo" / "version_0"
    results = json.loads((run / "results.json").read_text())
    assert results["averaged_checkpoints"] == ["step00000008.ckpt", "step00000012.ckpt"]
    a, b = (checkpoint_params(run / "checkpoints" / name) for name in results["averaged_checkpoints"])
    averaged = checkpoint_params(run / "checkpoints" / "averaged.ckpt")
    assert averaged.keys() == a.keys()
    for k in a:
        torch.testing.assert_close(averaged[k], (a[k] + b[k]) / 2)
    capsys.readouterr()
    assert main(["evaluate", str(run / "checkpoints" / "averaged.ckpt"), "--split", "valid", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["bleu"], report["ppl"]) == (results["bleu"], results["ppl"])  # results.json is the average's


def test_average_last_needs_the_checkpoints_kept(capsys):
    assert main(["validate", DEMO, "train.average_last=5"]) == 2
    assert capsys.readouterr().err == (
        f"aiayn validate: error: {DEMO} is not a valid experiment (1 error):\n"
        "  train.average_last: averages the last 5 checkpoints but train.checkpoint.keep_last keeps 3; "
        "set train.checkpoint.keep_last to at least 5 (set on the command line: train.average_last=5)\n"
    )
