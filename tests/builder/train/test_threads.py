"""train.cpu_threads: how many threads a CPU run uses, and one line when the machine is busy."""

import os

import pytest
import torch

import aiayn.builder.train.threads as threads
from aiayn.builder.cli import main
from tests.builder.train.test_training import DEMO, tiny


def test_auto_is_the_sweeps_share_else_the_usable_cores_per_process(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5}, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert threads.cpu_threads("auto") == 2 and threads.cpu_threads(5) == 5
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert [threads.cpu_threads("auto", processes_here=n) for n in (1, 2, 4, 8)] == [6, 3, 1, 1]


@pytest.mark.parametrize("load, given, says", [(9.5, 4, True), (3.0, 4, False), (9.5, 1, False)], ids=["busy", "idle", "one_thread"])
def test_a_busy_machine_gets_one_line_naming_the_option(monkeypatch, load, given, says):
    monkeypatch.setattr(os, "getloadavg", lambda: (load, 0.0, 0.0))
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    expected = (
        "note: this machine's load (9.5) already exceeds its 4 cores, so 4 threads will wait on each other; "
        "beside another busy process a CPU run is often many times faster with train.cpu_threads=1"
    )
    assert threads.busy_note(given) == (expected if says else None)


def test_a_run_uses_its_threads_and_says_so_on_a_busy_machine(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(os, "getloadavg", lambda: (64.0, 0.0, 0.0))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(torch, "set_num_threads", lambda n: calls.append(n))
    calls: list[int] = []
    assert main(["train", DEMO, *tiny(tmp_path, "trainer.max_steps=1", "trainer.val_check_interval=null", "train.cpu_threads=2")]) == 0
    assert calls == [2]
    assert "note: this machine's load (64.0) already exceeds its 2 cores, so 2 threads" in capsys.readouterr().out
    assert main(["train", DEMO, *tiny(tmp_path, "trainer.max_steps=1", "trainer.val_check_interval=null", "train.cpu_threads=1")]) == 0
    assert calls == [2, 1] and "note:" not in capsys.readouterr().out
