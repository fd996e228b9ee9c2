"""Sharing the machine: OpenMP's threads wait quietly (set before torch loads), and a CPU run on
auto threads takes the cores other processes leave free, at its start and again while it trains."""

import itertools
import os
import subprocess
import sys

import pytest
import torch

import aiayn.builder.run.cpu as cpu
import aiayn.builder.train.threads as threads
from aiayn.builder.cli import main
from tests.builder.train.test_training import DEMO, tiny
from tests.conftest import ROOT


def test_quiet_waits_unless_the_user_chose():
    env = {}
    cpu.quiet_waits(env)
    assert env == {"OMP_WAIT_POLICY": "PASSIVE"}
    for mine in ({"OMP_WAIT_POLICY": "ACTIVE"}, {"GOMP_SPINCOUNT": "300000"}):
        env = dict(mine)
        cpu.quiet_waits(env)
        assert env == mine


def test_the_cli_sets_the_wait_policy_before_torch_is_loaded():
    """libgomp reads OMP_WAIT_POLICY once, when torch loads it: translate's module imports torch."""
    spy = (
        "import sys, os\n"
        "import aiayn.builder.cli as cli\n"
        "quiet = cli.quiet_waits\n"
        "def spy(env):\n"
        "    print('torch loaded' if 'torch' in sys.modules else 'torch not loaded yet')\n"
        "    quiet(env)\n"
        "cli.quiet_waits = spy\n"
        "code = cli.main(['translate', 'no-such-run'])\n"
        "print(code, os.environ.get('OMP_WAIT_POLICY'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in cpu.WAIT_VARIABLES}
    done = subprocess.run([sys.executable, "-c", spy], env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True)
    assert done.stdout.splitlines() == ["torch not loaded yet", "2 PASSIVE"], done.stderr


@pytest.mark.parametrize(
    "others, cores, expected",
    [(0.0, 2, 2), (0.5, 2, 2), (0.7, 2, 1), (1.0, 2, 1), (1.9, 2, 1), (3.0, 2, 1), (0.0, 8, 8), (2.7, 8, 5), (7.9, 8, 1)],
)
def test_threads_are_the_cores_others_leave_free(others, cores, expected):
    assert cpu.threads_beside(others, cores) == expected


def test_the_others_are_the_machines_busy_time_less_this_processs():
    before, after = cpu.CpuTimes(busy=100.0, own=10.0, wall=50.0), cpu.CpuTimes(busy=108.0, own=14.0, wall=54.0)
    assert after.others_since(before) == pytest.approx(1.0)  # 8 busy core-seconds in 4 s, 4 of them ours
    assert cpu.CpuTimes(busy=101.0, own=14.0, wall=54.0).others_since(before) == 0.0  # never below none
    now = cpu.CpuTimes.now()
    assert now is not None and now.busy > 0  # /proc/stat is read on Linux


def fake_clock(monkeypatch, others: list[float], every: float = 10.0) -> None:
    """CpuTimes.now() returns instants `every` seconds apart in which the other processes kept
    `others[k]` cores busy (this process none), then none."""
    times, busy = iter(range(0, 10_000, int(every))), [0.0]
    load = itertools.chain([0.0], others, itertools.repeat(0.0))

    def now():
        busy[0] += next(load) * every
        return cpu.CpuTimes(busy=busy[0], own=0.0, wall=float(next(times)))

    monkeypatch.setattr(cpu.CpuTimes, "now", staticmethod(now))
    monkeypatch.setattr(cpu.time, "sleep", lambda s: None)


def test_auto_is_the_sweeps_share_else_the_free_cores_per_process(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5}, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert threads.cpu_threads("auto") == 2 and threads.cpu_threads(5) == 5
    monkeypatch.delenv("OMP_NUM_THREADS")
    fake_clock(monkeypatch, [0.0, 0.0, 0.0, 0.0])
    assert [threads.cpu_threads("auto", processes_here=n) for n in (1, 2, 4, 8)] == [6, 3, 1, 1]
    fake_clock(monkeypatch, [2.0])  # another process keeps two cores busy
    assert threads.cpu_threads("auto") == 4


class Machine:
    """What AdaptiveThreads reads of a trainer: a CPU run of one process."""

    class strategy:
        class root_device:
            type = "cpu"

    device_ids = [0]


def test_a_training_gives_cores_to_a_later_process_and_takes_them_back(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    calls: list[int] = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    fake_clock(monkeypatch, [0.0, 0.9, 1.0, 0.1], every=5.0)  # alone, then another run for 10 s, then alone
    callback = threads.AdaptiveThreads(every_s=5.0)
    callback.on_train_start(Machine, None)
    for _ in range(4):
        callback.on_train_batch_end(Machine, None, None, None, 0)
    assert calls == [1, 2] and callback.threads == 2


def test_a_run_starts_on_the_free_cores_and_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(threads, "auto_threads", lambda processes_here=1: 1)  # another process holds a core
    monkeypatch.setattr(torch, "set_num_threads", lambda n: calls.append(n))
    calls: list[int] = []
    assert main(["train", DEMO, *tiny(tmp_path, "trainer.max_steps=1", "trainer.val_check_interval=null")]) == 0
    assert calls[0] == 1
    assert "cpu: 1 of 2 threads: other processes keep the rest of the cores busy; looked at again every 5 s " \
           "(train.cpu_threads=N holds the count at N, as a run that must repeat bit for bit needs)" in capsys.readouterr().out  # fmt: skip
    assert (
        main(["train", DEMO, *tiny(tmp_path, "trainer.max_steps=1", "trainer.val_check_interval=null", "train.cpu_threads=2")])
        == 0
    )
    assert calls[-1] == 2 and "cpu:" not in capsys.readouterr().out
