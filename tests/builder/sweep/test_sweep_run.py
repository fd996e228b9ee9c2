"""`aiayn sweep` end to end on CPU: the shipped demo sweep shortened to a few steps (six real
training processes, two at a time), its re-run skipping all six, the hparams every trial left
for TensorBoard, and a SLURM sweep through submitit's local executor with one broken trial."""

import contextlib
import io
import json
import re
import shutil

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2

from aiayn.builder.cli import main
from aiayn.builder.sweep.plan import expand, load_sweep
from tests.conftest import EXPERIMENTS

# a few steps on a few hundred pairs: what is tested is the plumbing, not the model
SHORT = [
    "trainer.max_steps=4",
    "data.n_train=300",
    "data.n_valid=20",
    "data.n_test=20",
    "dims.vocab_size=200",
    "train.tokens_per_step=500",
    "train.validation.bleu=false",
    "trainer.val_check_interval=null",
    "decode.beam=1",
]
TRIALS = [f"demo-h{h}-seed{s}" for h in (2, 4, 8) for s in (1, 2)]


def sweep(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["sweep", *argv])
    return code, out.getvalue(), err.getvalue()


@pytest.mark.slow
def test_demo_sweep_runs_then_skips_and_leaves_hparams_for_tensorboard(tmp_path, monkeypatch):
    # one test, so that `pytest -n 2` does not run the six trials once per worker; on copies of
    # the shipped files, so that an edit of demo.yaml while the test runs changes nothing
    for name in ("base.yaml", "demo.yaml", "demo.sweep.yaml"):
        shutil.copy(EXPERIMENTS / name, tmp_path / name)
    demo_sweep = tmp_path / "demo.sweep.yaml"
    monkeypatch.setenv("AIAYN_CACHE", str(tmp_path / "cache"))
    runs = tmp_path / "runs"
    planned = {t.name: t.config_hash for t in expand(load_sweep(demo_sweep), demo_sweep, SHORT)}
    code, out, err = sweep(str(demo_sweep), *SHORT, "--runs", str(runs))
    assert code == 0, out + err
    sweep_dir = runs / "demo-heads"
    check_every_trial_finished_and_the_table_has_every_row(sweep_dir, out, planned)
    check_tensorboard_holds_every_trials_hparams_and_final_metrics(sweep_dir)
    check_a_rerun_skips_every_finished_trial(demo_sweep, sweep_dir)


def check_every_trial_finished_and_the_table_has_every_row(sweep_dir, out, planned):
    record = json.loads((sweep_dir / "sweep.json").read_text())
    assert [(t["name"], t["status"], t["returncode"]) for t in record["trials"]] == [(name, "finished", 0) for name in TRIALS]
    assert out.splitlines()[0] == f"sweep demo-heads: 6 trials, 0 finished before (skipped), 6 to run -> {sweep_dir}"
    for name in TRIALS:
        trial = json.loads((sweep_dir / name / "trial.json").read_text())
        assert (trial["config_hash"], trial["run_dir"]) == (planned[name], "version_0")
        results = json.loads((sweep_dir / name / "version_0" / "results.json").read_text())
        assert (results["name"], results["steps"], results["paper"]["train_steps"], results["reported"]) == (name, 4, 4, None)
    lines = (sweep_dir / "results.md").read_text().splitlines()
    head, *rows = (
        [c.strip() for c in line.strip("|").split("|")] for line in lines if line.startswith("|") and "---" not in line
    )
    cells = {row[0]: dict(zip(head, row)) for row in rows}
    assert (
        list(cells) == ["demo-h2", "demo-h4", "demo-h8"] and "group" not in head and "paper BLEU" not in head
    )  # none in any row
    for name, h in (("demo-h2", 2), ("demo-h4", 4), ("demo-h8", 8)):
        row = cells[name]
        assert [row["h"], row["d_k"], row["d_v"], row["steps"], row["runs"], row["params ×10⁶"]] == [
            str(h),
            str(128 // h),
            str(128 // h),
            "4",
            "2",
            "0.95",
        ]
        assert row["model"] == f"[figure](figures/{name}.svg)"  # the variant's model, beside its row
        assert f"h={h}, d_k={128 // h}, d_v={128 // h}" in (sweep_dir / "figures" / f"{name}.svg").read_text()
        ppl, ppl_std = (float(x) for x in row["PPL"].split(" ± "))
        bleu, bleu_std = (float(x) for x in row["BLEU"].split(" ± "))
        assert 1.0 < ppl < 1000.0 and ppl_std >= 0.0 and 0.0 <= bleu <= 100.0 and bleu_std >= 0.0
    # measured from the sweep's own base (demo.yaml unchanged: demo-h4), over both seeds and the sentences
    assert cells["demo-h4"]["ΔBLEU [95% CI]"] == ""
    for name in ("demo-h2", "demo-h8"):
        # two seeds: never starred (‡), whatever the interval says
        assert re.fullmatch(r"[+-]\d+\.\d\d \[[+-]\d+\.\d\d, [+-]\d+\.\d\d\] [0-2]/2 ‡", cells[name]["ΔBLEU [95% CI]"])
    assert any(line.startswith("ΔBLEU: the row's BLEU minus that of demo-h4, the base row,") for line in lines)
    assert (sweep_dir / "results.csv").read_text().count("\n") == 4
    assert (sweep_dir / "results.png").read_bytes()[:4] == b"\x89PNG"


def check_a_rerun_skips_every_finished_trial(demo_sweep, sweep_dir):
    code, out, _ = sweep(str(demo_sweep), *SHORT, "--runs", str(sweep_dir.parent), "--dry-run")
    assert code == 0
    assert [line.split()[2:4] for line in out.splitlines()[2:8]] == [["skip", "(finished)"]] * 6
    code, out, err = sweep(str(demo_sweep), *SHORT, "--runs", str(sweep_dir.parent))
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == f"sweep demo-heads: 6 trials, 6 finished before (skipped), 0 to run -> {sweep_dir}"
    assert sorted(p.name for p in sweep_dir.glob("*/version_*")) == ["version_0"] * 6
    assert {t["status"] for t in json.loads((sweep_dir / "sweep.json").read_text())["trials"]} == {"skipped"}
    # another config of the same trials is not finished: it would run, in version_1
    code, out, _ = sweep(str(demo_sweep), *SHORT, "trainer.max_steps=5", "--runs", str(sweep_dir.parent), "--dry-run")
    assert out.splitlines()[-1] == "6 to run, 0 to resume, 0 finished (skipped)"
    assert out.splitlines()[2].split()[3].endswith("demo-h2-seed1/version_1")


def check_tensorboard_holds_every_trials_hparams_and_final_metrics(sweep_dir):
    for name in TRIALS:
        run_dir = sweep_dir / name / "version_0"
        results = json.loads((run_dir / "results.json").read_text())
        events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
        events.Reload()
        content = events.PluginTagToContent("hparams")["_hparams_/session_start_info"]
        start = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
        hparams = {k: v.string_value or v.number_value for k, v in start.hparams.items()}
        h = int(name.split("-")[1][1:])
        columns = [
            "N",
            "d_model",
            "d_ff",
            "h",
            "d_k",
            "d_v",
            "P_drop",
            "eps_ls",
            "positional",
            "train_steps",
            "params",
            "name",
            "seed",
        ]
        values = [
            "2",
            "128",
            "512",
            str(h),
            str(128 // h),
            str(128 // h),
            pytest.approx(0.1),
            pytest.approx(0.1),
            "sinusoidal",
            "4",
            str(results["params"]),
            name,
            name[-1],
        ]  # integers as text: TensorBoard shows 512.00
        names = [f"{i:02d} {column}" for i, column in enumerate(columns)]  # TensorBoard sorts by name: Table 3's order
        assert hparams == dict(zip(names, values))
        experiment = plugin_data_pb2.HParamsPluginData.FromString(events.PluginTagToContent("hparams")["_hparams_/experiment"])
        assert [(i.name, i.display_name) for i in experiment.experiment.hparam_infos] == list(zip(names, columns))
        assert [m.name.tag for m in experiment.experiment.metric_infos] == ["PPL/valid", "BLEU/valid"]
        assert [m.display_name for m in experiment.experiment.metric_infos] == [
            "PPL (valid, 20 sentences)",
            "BLEU (valid, 20 sentences)",
        ]
        assert events.Scalars("BLEU/valid")[-1].value == pytest.approx(results["bleu"], abs=1e-4)
        assert events.Scalars("PPL/valid")[-1].value == pytest.approx(results["ppl"], rel=1e-4)
        assert events.Scalars("BLEU/valid")[-1].step == 4
        end = plugin_data_pb2.HParamsPluginData.FromString(events.PluginTagToContent("hparams")["_hparams_/session_end_info"])
        assert end.session_end_info.status == api_pb2.STATUS_SUCCESS


def test_submitit_runs_trials_and_a_broken_one_is_reported(tmp_path, write, monkeypatch):
    monkeypatch.setenv("AIAYN_CACHE", str(tmp_path / "cache"))
    path = write(
        "slurm.sweep.yaml",
        f"name: via-submitit\nbase: {EXPERIMENTS / 'demo.yaml'}\n"
        "variants:\n  - {name: ok}\n  - {name: broken, overrides: [data.max_len=1]}   # valid, fails once data is read\n"
        "launcher: {type: slurm, cluster: local, gpus_per_node: 0, cpus_per_task: 1, timeout_min: 10}\n",
    )
    runs = tmp_path / "runs"
    code, out, err = sweep(str(path), *SHORT, "--runs", str(runs))
    sweep_dir = runs / "via-submitit"
    reason = (
        f"aiayn train: error: data: the length filter removed all 300 training pairs of {sweep_dir}/broken-seed1/version_0/data/train.en "
        "(300 longer than max_len=1, 0 shorter than min_len=1 tokens); raise max_len or lower min_len"
    )
    assert code == 1
    assert err == (
        f"aiayn sweep: error: 1 of 2 trials failed (their errors are in {sweep_dir / 'sweep.json'}):\n"
        f"  broken-seed1 (exit 2): {reason}\n"
        f"    log: {sweep_dir / 'broken-seed1' / 'version_0' / 'stderr.log'}\n"
    )
    ok, broken = json.loads((sweep_dir / "sweep.json").read_text())["trials"]
    assert (ok["name"], ok["status"], ok["returncode"]) == ("ok-seed1", "finished", 0)
    assert (broken["name"], broken["status"], broken["returncode"]) == ("broken-seed1", "failed", 2)
    assert broken["error"].splitlines()[-1] == reason
    assert reason in (sweep_dir / "broken-seed1" / "version_0" / "stderr.log").read_text()
    assert ok["job_id"] != broken["job_id"] and (sweep_dir / "submitit" / ok["job_id"]).is_dir()
    assert f"FAILED (exit 2): {reason}" in out
    rows = (sweep_dir / "results.md").read_text().splitlines()[2:]
    assert [r.strip("|").split("|")[0].strip() for r in rows if r.startswith("|")] == ["ok"]  # no group: its column left out


def test_a_shared_init_from_that_is_not_there_starts_no_trial(tmp_path, monkeypatch):
    """aiayn validate refuses it at once; the sweep's own up-front check does too, once, for
    every trial that would start from it (before a run directory or sweep.json is written)."""
    for name in ("base.yaml", "demo.yaml", "demo-gqa.yaml", "demo-gqa.sweep.yaml"):
        shutil.copy(EXPERIMENTS / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)  # demo-gqa.yaml's init_from: runs/demo, which is not there
    code, out, err = sweep("demo-gqa.sweep.yaml", "--runs", "sweeps")
    assert (code, out) == (2, "")
    assert err == (
        "aiayn sweep: error: 3 trials start from runs/demo, and nothing was started: init_from: runs/demo does not exist; give a "
        "run directory (runs/<name>/version_<n>), a .ckpt file or a Hugging Face folder (Marian, GPT-2, Llama)\n"
    )
    assert not (tmp_path / "sweeps").exists()
    code, _, err = sweep("demo-gqa.sweep.yaml", "--runs", "sweeps", "--dry-run")
    assert code == 2 and "nothing was started" in err
