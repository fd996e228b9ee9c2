"""builder/sweep/progress.py: the sweep's console shows each running trial's step and ETA from its
progress.json, one line a trial, rewritten in place on a terminal, printed now and then elsewhere."""

import io
import time

from aiayn.builder.run.rundir import RunDir
from aiayn.builder.sweep.launch import Job
from aiayn.builder.sweep.progress import TrialLines

UP = "\x1b[F\x1b[K"  # up a line, cleared


def jobs(tmp_path, *names):
    made = []
    for name in names:
        (tmp_path / name).mkdir()
        made.append(Job(name, ("true",), tmp_path / name, str(tmp_path)))
    return made


def test_a_line_for_each_running_trial_in_the_sweeps_order(tmp_path):
    a, b, c, d = jobs(tmp_path, "a-seed1", "b-seed1", "c-seed1", "d-seed1")
    since = time.time()
    RunDir(b.run_dir).write_progress(1340, 5000, 725.4)
    RunDir(a.run_dir).write_progress(12, 100000, None)  # no pace yet
    RunDir(d.run_dir).write_progress(7, 8, 1.0)
    lines = TrialLines([a, b, c, d], io.StringIO(), interactive=False, since=since)
    lines.end("d-seed1")  # ended: its last progress.json is not a running trial's
    assert lines.lines() == ["  a-seed1: step 12/100,000", "  b-seed1: step 1,340/5,000, ETA 12m05s"]
    stale = TrialLines([a, b], io.StringIO(), interactive=False, since=time.time() + 60)
    assert stale.lines() == []  # written before the sweep started: a run of an earlier sweep


def test_on_a_terminal_the_lines_are_rewritten_and_an_ended_trial_goes_above_them(tmp_path):
    a, b = jobs(tmp_path, "a-seed1", "b-seed1")
    since = time.time()
    for job in (a, b):
        RunDir(job.run_dir).write_progress(10, 100, 90.0)
    out = io.StringIO()
    lines = TrialLines([a, b], out, interactive=True, since=since)
    lines.draw()
    RunDir(a.run_dir).write_progress(20, 100, 80.0)
    lines.draw()
    lines.end("b-seed1")
    lines.say("[1/2] b-seed1: finished in 9 s (8 s of it training): BLEU 1.00")
    first = "  a-seed1: step 10/100, ETA 1m30s\n  b-seed1: step 10/100, ETA 1m30s\n"
    second = UP * 2 + "  a-seed1: step 20/100, ETA 1m20s\n  b-seed1: step 10/100, ETA 1m30s\n"
    said = UP * 2 + "[1/2] b-seed1: finished in 9 s (8 s of it training): BLEU 1.00\n"
    assert out.getvalue() == first + second + said + "  a-seed1: step 20/100, ETA 1m20s\n"


def test_elsewhere_the_lines_are_printed_as_they_are_and_nothing_is_rewritten(tmp_path):
    [a] = jobs(tmp_path, "a-seed1")
    since = time.time()
    RunDir(a.run_dir).write_progress(3, 4, 2.0)
    out = io.StringIO()
    lines = TrialLines([a], out, interactive=False, since=since, plain_every_s=0.01)
    with lines.shown():
        deadline = time.monotonic() + 30
        while out.getvalue().count("\n") < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        lines.say("[1/1] a-seed1: finished")
    text = out.getvalue()
    assert "\x1b" not in text and "  a-seed1: step 3/4, ETA 2s\n" in text and "[1/1] a-seed1: finished\n" in text
