"""Sweeps through a real SLURM (tests/slurm/cluster.py: munged, slurmctld and slurmd on this
machine, no accounting database): one job array, array_parallelism, scancel, scontrol requeue,
the time-limit signal (a step checkpoint, a requeue: bit for bit the run without a limit), and a
2-task job training one run with DDP through Lightning's SLURM environment."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.builder.train.test_training import DEMO, checkpoint_params, tiny
from tests.conftest import ROOT
from tests.slurm.cluster import free_port

pytestmark = pytest.mark.slow

# ~35 ms a step on one core: what is tested is what SLURM does to a trial, not the model
SHORT = [
    "data.n_train=300", "data.n_valid=20", "data.n_test=20", "dims.vocab_size=200", "train.tokens_per_step=500",
    "train.validation.bleu=false", "trainer.val_check_interval=null", "decode.beam=1", "train.checkpoint.keep_last=2",
]  # fmt: skip
LAUNCHER = "{type: slurm, gpus_per_node: 0, cpus_per_task: 1, timeout_min: 10, array_parallelism: 2}"


def start_sweep(tmp_path: Path, cluster, variants: str, *overrides: str, launcher: str = LAUNCHER) -> subprocess.Popen:
    sweep = tmp_path / "s.sweep.yaml"
    sweep.write_text(f"name: s\nbase: {DEMO}\nvariants:\n{variants}launcher: {launcher}\n")
    argv = [sys.executable, "-m", "aiayn", "sweep", str(sweep), *SHORT, *overrides, "--runs", str(tmp_path / "runs")]
    env = {**cluster.env, "AIAYN_CACHE": str(tmp_path / "cache")}
    return subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, timeout: float = 300) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the sweep did not end in {timeout} s:\n{out}\n{err}")
    return proc.returncode, out, err


def wait_for(what, timeout: float = 120, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(every)
    pytest.fail(f"waited {timeout} s for {what.__doc__ or what}")


def trials(tmp_path: Path) -> dict[str, dict]:
    path = tmp_path / "runs" / "s" / "sweep.json"
    return {t["name"]: t for t in json.loads(path.read_text())["trials"]} if path.is_file() else {}


def run_dir(tmp_path: Path, trial: str) -> Path:
    return tmp_path / "runs" / "s" / trial / "version_0"


def job_with_checkpoint(tmp_path: Path, trial: str):
    """The trial's job id, once its run has a step checkpoint and is still training."""
    status = run_dir(tmp_path, trial) / "status.json"
    running = status.is_file() and json.loads(status.read_text())["status"] == "running"
    if running and any((run_dir(tmp_path, trial) / "checkpoints").glob("step*.ckpt")):
        return trials(tmp_path)[trial]["job_id"]
    return None


def test_a_job_array_with_a_cancelled_trial_and_its_rerun(tmp_path, cluster):
    variants = "  - {name: a}\n  - {name: b, overrides: [dims.h=2]}\n  - {name: c, overrides: [dims.h=8]}\n"
    proc = start_sweep(tmp_path, cluster, variants, "trainer.max_steps=150", "train.checkpoint.every_n_train_steps=20")
    job = wait_for(lambda: job_with_checkpoint(tmp_path, "b-seed1"))
    subprocess.run(["scancel", job], check=True, env=cluster.env)
    code, out, err = finish(proc)
    record = trials(tmp_path)
    assert code == 1, out + err
    array = record["a-seed1"]["job_id"].split("_")[0]
    assert [record[t]["job_id"] for t in ("a-seed1", "b-seed1", "c-seed1")] == [f"{array}_{i}" for i in range(3)]  # one array
    assert [(record[t]["status"], record[t].get("slurm_state")) for t in ("a-seed1", "b-seed1", "c-seed1")] == [
        ("finished", "COMPLETED"), ("cancelled", "CANCELLED"), ("finished", "COMPLETED"),
    ]  # fmt: skip
    stopped = json.loads((run_dir(tmp_path, "b-seed1") / "status.json").read_text())
    assert stopped["status"] == "interrupted"
    assert record["b-seed1"]["error"] == (
        f"SLURM job {job} ended CANCELLED, with no result; status.json says interrupted at step {stopped['step']}; re-run the sweep to resume it"
    )
    assert (
        err.splitlines()[0]
        == f"aiayn sweep: error: 1 of 3 trials were cancelled (their errors are in {tmp_path / 'runs' / 's' / 'sweep.json'}):"
    )
    assert f"b-seed1: CANCELLED: {record['b-seed1']['error']}" in out
    script = (tmp_path / "runs" / "s" / "submitit" / array / f"{array}_submission.sh").read_text().splitlines()
    assert {"#SBATCH --array=0-2%2", "#SBATCH --requeue", "#SBATCH --signal=USR1@120", "#SBATCH --ntasks-per-node=1"} <= set(
        script
    )
    # array_parallelism 2: two tasks at a time
    tasks = {t: cluster.job(record[t]["job_id"]) for t in ("a-seed1", "b-seed1", "c-seed1")}
    assert {t["ArrayTaskThrottle"] for t in tasks.values()} == {"2"}
    a, b, c = (tasks[t] for t in ("a-seed1", "b-seed1", "c-seed1"))
    assert a["StartTime"] < b["EndTime"] and b["StartTime"] < a["EndTime"]  # a and b ran at once
    assert c["StartTime"] >= min(a["EndTime"], b["EndTime"])  # c waited for one of them

    code, out, err = finish(
        start_sweep(tmp_path, cluster, variants, "trainer.max_steps=150", "train.checkpoint.every_n_train_steps=20")
    )
    assert code == 0, out + err
    assert out.splitlines()[0] == f"sweep s: 3 trials, 2 finished before (skipped), 1 to run -> {tmp_path / 'runs' / 's'}"
    again = trials(tmp_path)
    assert [again[t]["status"] for t in ("a-seed1", "b-seed1", "c-seed1")] == ["skipped", "finished", "skipped"]
    assert again["b-seed1"]["job_id"].split("_")[0] != array and "job_id" not in again["a-seed1"]
    results = json.loads((run_dir(tmp_path, "b-seed1") / "results.json").read_text())
    assert [s["started_at_step"] for s in results["sessions"]] == [0, stopped["step"] // 20 * 20]  # resumed, same run directory
    assert results["steps"] == 150


def test_a_requeued_trial_continues_from_its_checkpoint_to_the_same_parameters(tmp_path, cluster):
    variants = "  - {name: preempted}\n  - {name: undisturbed}\n"  # the same training twice
    proc = start_sweep(tmp_path, cluster, variants, "trainer.max_steps=200", "train.checkpoint.every_n_train_steps=25")
    job = wait_for(lambda: job_with_checkpoint(tmp_path, "preempted-seed1"))
    subprocess.run(["scontrol", "requeue", job], check=True, env=cluster.env)
    code, out, err = finish(proc)
    assert code == 0, out + err
    record = trials(tmp_path)
    assert (record["preempted-seed1"]["status"], record["preempted-seed1"]["slurm_state"]) == ("finished", "COMPLETED")
    assert cluster.job(job)["Restarts"] == "1"
    sessions = json.loads((run_dir(tmp_path, "preempted-seed1") / "results.json").read_text())["sessions"]
    assert len(sessions) == 2 and sessions[1]["started_at_step"] > 0 and sessions[1]["ended_at_step"] == 200
    assert sorted(p.name for p in run_dir(tmp_path, "preempted-seed1").parent.iterdir()) == ["trial.json", "version_0"]
    preempted = checkpoint_params(run_dir(tmp_path, "preempted-seed1") / "checkpoints" / "last.ckpt")
    undisturbed = checkpoint_params(run_dir(tmp_path, "undisturbed-seed1") / "checkpoints" / "last.ckpt")
    assert preempted.keys() == undisturbed.keys()
    assert all(torch.equal(preempted[k], undisturbed[k]) for k in preempted)  # bit for bit


def test_a_trial_signalled_before_its_time_limit_saves_requeues_itself_and_finishes(tmp_path, cluster):
    # a 1-minute limit, signalled 30 s before it (slurmctld may send it up to ~15 s early); about
    # 30 s of training, with no step checkpoint due before the last step: only the save at the
    # end of the step the signal lands in lets the requeued job go on from where it was
    launcher = "{type: slurm, gpus_per_node: 0, cpus_per_task: 1, timeout_min: 1, signal_delay_s: 30}"
    code, out, err = finish(
        start_sweep(
            tmp_path,
            cluster,
            "  - {name: limited}\n",
            "trainer.max_steps=800",
            "train.checkpoint.every_n_train_steps=100000",
            launcher=launcher,
        )
    )
    assert code == 0, out + err
    record = trials(tmp_path)["limited-seed1"]
    assert (record["status"], record["slurm_state"]) == ("finished", "COMPLETED")
    assert int(cluster.job(record["job_id"])["Restarts"]) >= 1
    run = run_dir(tmp_path, "limited-seed1")
    sessions = json.loads((run / "results.json").read_text())["sessions"]
    assert len(sessions) >= 2 and all(s["started_at_step"] > 0 for s in sessions[1:]), sessions
    # each went on from the step its predecessor saved at the signal (training went on until the
    # requeue's SIGTERM), and that step's file is the one kept beside the final step's
    assert all(a["started_at_step"] < b["started_at_step"] <= a["ended_at_step"] for a, b in zip(sessions, sessions[1:])), (
        sessions
    )
    saved = f"step{sessions[-1]['started_at_step']:08d}.ckpt"
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["last.ckpt", saved, "step00000800.ckpt"]
    # and the run is the one it would have been without the limit, bit for bit
    env = {**cluster.env, "AIAYN_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    env = {k: v for k, v in env.items() if not k.startswith("SLURM_")}
    local = subprocess.run(
        [sys.executable, "-m", "aiayn", "train", str(run / "config.yaml"), "--runs", str(tmp_path / "local")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert local.returncode == 0, local.stdout[-2000:] + local.stderr[-3000:]
    limited = checkpoint_params(run / "checkpoints" / "last.ckpt")
    unlimited = checkpoint_params(next((tmp_path / "local").rglob("last.ckpt")))
    assert limited.keys() == unlimited.keys()
    assert all(torch.equal(limited[k], unlimited[k]) for k in limited)


def test_a_two_task_job_trains_one_run_with_ddp(tmp_path, cluster):
    out, run = tmp_path / "probe", tmp_path / "runs" / "demo" / "version_0"
    out.mkdir()
    args = tiny(tmp_path, "trainer.devices=2", "trainer.accelerator=cpu", "trainer.strategy=ddp", "trainer.max_steps=3",
                "trainer.val_check_interval=null", "train.max_tokens_per_batch=200", "--run-dir", str(run))  # fmt: skip
    command = " ".join([sys.executable, "-m", "tests.builder.train.node_probe", str(out), "train", DEMO, *args])
    script = tmp_path / "job.sh"
    # a free port of this machine: the job-id port Lightning derives (15000 + id) may be taken here
    script.write_text(f"#!/bin/bash\nexport PYTHONPATH={ROOT} OMP_NUM_THREADS=1 MASTER_PORT={free_port()}\nsrun {command}\n")
    submitted = subprocess.run(
        ["sbatch", "--parsable", "--ntasks-per-node=2", "--cpus-per-task=1", "--job-name=ddp", f"--output={tmp_path / 'job.log'}", str(script)],
        capture_output=True, text=True, env=cluster.env, cwd=tmp_path, timeout=60, check=True,
    )  # fmt: skip
    job = submitted.stdout.strip()
    state = cluster.wait_until_ended(job, timeout=300)
    log = (tmp_path / "job.log").read_text() if (tmp_path / "job.log").is_file() else "(no job.log)"
    assert state == "COMPLETED", f"job {job} {state}\n{log[-3000:]}"
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [(r["rank"], r["world"], r["step"]) for r in ranks] == [(0, 2, 3), (1, 2, 3)]
    assert ranks[0]["run_dir"] == ranks[1]["run_dir"] == str(run.resolve())
    params = [torch.load(out / f"rank{r}.pt") for r in (0, 1)]
    assert all(torch.equal(params[0][k], params[1][k]) for k in params[0])  # one model on both ranks
    # one run directory, written by rank 0
    assert sorted(p.name for p in (tmp_path / "runs").rglob("version_*")) == ["version_0"]
    writers = {int(p.name.split(".")[-2]) for p in run.glob("events.out.tfevents.*")}
    assert writers == {ranks[0]["pid"]}
    assert json.loads((run / "results.json").read_text())["steps"] == 3
    assert log.count("finished in") == 1


def test_a_search_on_slurm_shares_one_study_between_its_array_of_workers(tmp_path, cluster):
    import optuna

    from aiayn.builder.run.study import storage

    sweep = tmp_path / "s.sweep.yaml"
    sweep.write_text(
        f"name: s\nbase: {DEMO}\nseeds: [1]\n"
        "search:\n  params: {train.lr_schedule.factor: {type: categorical, choices: [1.0, 0.5, 0.25]}}\n"
        "  n_trials: 4\n  sampler: random\n  metric: ppl\n  pruner: {type: none}\n"
        f"launcher: {LAUNCHER}\n"
    )
    argv = [sys.executable, "-m", "aiayn", "sweep", str(sweep), *SHORT, "trainer.max_steps=20", "--runs", str(tmp_path / "runs")]
    proc = subprocess.Popen(
        argv,
        cwd=tmp_path,
        env={**cluster.env, "AIAYN_CACHE": str(tmp_path / "cache")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    code, out, err = finish(proc)
    assert code == 0, out + err
    journal = tmp_path / "runs" / "s" / "study.journal"
    searched = optuna.load_study(study_name="demo", storage=storage(journal)).get_trials(deepcopy=False)
    assert [t.state.name for t in searched] == ["COMPLETE"] * 4 and sorted(t.number for t in searched) == [0, 1, 2, 3]
    workers = {t.user_attrs["worker"] for t in searched}  # the SLURM job of the worker that ran it
    assert len(workers) == 2 and all(w.isdigit() for w in workers), workers
    assert "2 search workers: SLURM jobs " in out
    final = json.loads((tmp_path / "runs" / "s" / "sweep.json").read_text())["trials"]
    assert [(t["name"], t["status"], t["slurm_state"]) for t in final] == [("demo-seed1", "finished", "COMPLETED")]
    best = optuna.load_study(study_name="demo", storage=storage(journal)).best_params["train.lr_schedule.factor"]
    assert f"factor: {best}" in (tmp_path / "runs" / "s" / "demo-seed1" / "version_0" / "config.yaml").read_text()


def test_a_controller_that_does_not_answer_is_the_launchers_failure_and_leaves_nothing(tmp_path, cluster):
    """The same cluster's configuration with the controller's port moved to one nothing listens
    on: sbatch is there, slurmctld does not answer. The sweep says so in one line (what sinfo
    said), exit 2, and makes no folder."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("\n".join(f"SlurmctldPort={free_port()}" if line.startswith("SlurmctldPort=") else line
                              for line in cluster.conf.read_text().splitlines()) + "\n")  # fmt: skip
    sweep = tmp_path / "s.sweep.yaml"
    sweep.write_text(f"name: s\nbase: {DEMO}\nvariants:\n  - {{name: a}}\nlauncher: {LAUNCHER}\n")
    argv = [sys.executable, "-m", "aiayn", "sweep", str(sweep), *SHORT, "--runs", str(tmp_path / "runs")]
    done = subprocess.run(
        argv, cwd=tmp_path, env={**cluster.env, "SLURM_CONF": str(conf)}, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("aiayn sweep: error: the slurm launcher cannot reach SLURM's controller: `sinfo` says: ")
    assert "Unable to contact slurm controller" in done.stderr and len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "runs").exists()
