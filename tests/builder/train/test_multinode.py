"""Multi-node training, proven on one machine: torchrun started twice, as node 0 and node 1 of
one process each, with torchrun's static rendezvous on 127.0.0.1 (gloo, CPU), each running the
`aiayn train` command line (through tests/builder/train/node_probe.py, which records every rank)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import torch

from aiayn.builder.cli import main
from tests.builder.train.test_training import DEMO, checkpoint_params, tiny
from tests.conftest import ROOT

NODE = ["trainer.num_nodes=2", "trainer.devices=1", "trainer.accelerator=cpu", "trainer.strategy=ddp"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid: int) -> list[int]:
    """The processes started under `pid` (torchrun's workers run in sessions of their own)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM the agent (it stops its workers), then SIGKILL whatever is left."""
    if proc.poll() is not None:
        return
    tree = descendants(proc.pid)
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run_nodes(tmp_path: Path, out: Path, args: list[str], *, timeout: float = 240) -> list[tuple[int, str]]:
    """Start both nodes' torchrun; (exit code, output) of each once both ended, or were stopped
    at the timeout (a negative code)."""
    port, env = free_port(), {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    procs, deadline = [], time.monotonic() + timeout
    try:
        for node in (0, 1):
            rendezvous = ["--nnodes", "2", "--nproc-per-node", "1", "--node-rank", str(node),
                          "--master-addr", "127.0.0.1", "--master-port", str(port)]  # fmt: skip
            command = [
                sys.executable,
                "-m",
                "torch.distributed.run",
                *rendezvous,
                "-m",
                "tests.builder.train.node_probe",
                str(out),
            ]
            with (tmp_path / f"node{node}.log").open("w") as log:
                procs.append(subprocess.Popen([*command, "train", DEMO, *args], cwd=tmp_path, env=env, stdout=log, stderr=log))
        for proc in procs:
            proc.wait(timeout=max(deadline - time.monotonic(), 1))
    except subprocess.TimeoutExpired:
        pass  # stopped below; the caller sees the codes and the logs
    finally:
        for proc in procs:
            stop(proc)
    return [(proc.returncode, (tmp_path / f"node{node}.log").read_text()) for node, proc in enumerate(procs)]


def test_two_nodes_train_one_model_in_one_run_directory(tmp_path):
    out, run = tmp_path / "probe", tmp_path / "runs" / "demo" / "version_0"
    out.mkdir()
    args = tiny(tmp_path, *NODE, "trainer.max_steps=3", "trainer.val_check_interval=null", "train.max_tokens_per_batch=200",
                "train.checkpoint.every_n_train_steps=2", "--run-dir", str(Path("runs") / "demo" / "version_0"))  # fmt: skip
    (code0, log0), (code1, log1) = run_nodes(tmp_path, out, args)
    assert (code0, code1) == (0, 0), f"node 0:\n{log0[-3000:]}\nnode 1:\n{log1[-3000:]}"
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [(r["rank"], r["node_rank"], r["world"], r["num_nodes"]) for r in ranks] == [(0, 0, 2, 2), (1, 1, 2, 2)]
    # 800 tokens per step over 2 devices x 2 nodes... of 200 tokens: accumulate 2 (1 node would take 4)
    assert [(r["accumulate"], r["max_tokens"], r["step"]) for r in ranks] == [(2, 200, 3), (2, 200, 3)]
    assert ranks[0]["run_dir"] == ranks[1]["run_dir"] == str(run.resolve())
    params = [torch.load(out / f"rank{r}.pt") for r in (0, 1)]
    assert params[0].keys() == params[1].keys()
    assert all(torch.equal(params[0][k], params[1][k]) for k in params[0])  # bit for bit: one model
    saved = checkpoint_params(run / "checkpoints" / "last.ckpt")
    assert all(torch.equal(saved[f"model.{k}"], v) for k, v in params[0].items())
    # one run directory, written by rank 0: its results, checkpoints and TensorBoard events only
    assert sorted(p.name for p in (tmp_path / "runs").rglob("version_*")) == ["version_0"]
    assert json.loads((run / "results.json").read_text())["steps"] == 3
    assert json.loads((run / "status.json").read_text())["status"] == "finished"
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [
        "last.ckpt",
        "step00000002.ckpt",
        "step00000003.ckpt",
    ]  # the final step too
    writers = {int(p.name.split(".")[-2]) for p in run.glob("events.out.tfevents.*")}
    assert writers == {ranks[0]["pid"]}
    assert "finished in" in log0 and "finished in" not in log1


def test_processes_started_apart_need_one_run_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["train", DEMO, *tiny(tmp_path, *NODE)]) == 2
    assert capsys.readouterr().err == (
        "aiayn train: error: trainer.num_nodes=2: the processes of this job start apart and would each number their "
        f"own new run directory; give them all the same one with --run-dir {Path('runs') / 'demo' / 'version_0'} "
        "(or --resume to continue the latest run)\n"
    )
    monkeypatch.setenv("WORLD_SIZE", "4")  # as Lightning's own launcher leaves it in rank 0: no matter
    assert main(["train", DEMO, *tiny(tmp_path), "trainer.max_steps=1", "--runs", str(tmp_path / "one")]) == 0
    assert sorted(p.name for p in (tmp_path / "one" / "demo").iterdir()) == ["version_0"]
    capsys.readouterr()
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")  # torchrun's 4 processes, on a single node
    assert main(["train", DEMO, *tiny(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("aiayn train: error: WORLD_SIZE=4: the processes of this job start apart")
    assert not (tmp_path / "runs").exists()


def test_a_job_shaped_unlike_the_trainer_is_a_message(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for key, value in {"RANK": "0", "GROUP_RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "WORLD_SIZE": "2",
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "TORCHELASTIC_RUN_ID": "none"}.items():  # fmt: skip
        monkeypatch.setenv(key, value)  # what torchrun --nnodes 2 --nproc-per-node 1 gives its worker
    assert main(["train", DEMO, *tiny(tmp_path, "trainer.accelerator=cpu", "trainer.strategy=ddp"), "--run-dir", "run"]) == 2
    assert capsys.readouterr().err == (
        "aiayn train: error: trainer.devices x trainer.num_nodes do not match the job's launcher: You set `devices=1` "
        "and `num_nodes=1` in Lightning, but the product (1 * 1) does not match the world size (2). Set "
        "trainer.devices to the processes per node and trainer.num_nodes to the nodes it starts\n"
    )
    assert not (tmp_path / "run").exists()


def test_fsdp_on_cpu_is_a_message(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["train", DEMO, *tiny(tmp_path, "trainer.devices=2", "trainer.strategy=fsdp")]) == 2
    assert capsys.readouterr().err == (
        "aiayn train: error: trainer.strategy (fsdp): Lightning runs FSDP on CUDA GPUs only, and trainer.accelerator "
        "(cpu) is cpu here; use trainer.strategy=ddp to train on several cpu processes\n"
    )
    assert not (tmp_path / "runs").exists()
