"""builder.sweep.slurm: reading SLURM's job states from sacct (with accounting) or scontrol
(without), as a sweep waits for its job array; the launcher's tasks per node."""

import os
import subprocess
import sys

from aiayn.builder.sweep.launch import launcher_overrides
from aiayn.builder.sweep.slurm import ACTIVE, expand_ids, parse_sacct, parse_scontrol
from aiayn.schemas.sweep import SlurmLauncherSpec
from tests.schemas.test_sweep_schema import field_error


def test_array_ids_expand_as_slurm_compresses_them():
    assert expand_ids("12_3") == ["12_3"] and expand_ids("12") == ["12"]
    assert expand_ids("12_[0-2%1]") == ["12_0", "12_1", "12_2"]  # sacct: pending tasks, throttled
    assert expand_ids("12_[1,4-5]") == ["12_1", "12_4", "12_5"]
    assert expand_ids("0-2%1", "12") == ["12_0", "12_1", "12_2"]  # scontrol: ArrayTaskId of array 12
    assert expand_ids("3", "12") == ["12_3"]


def test_sacct_lines():
    text = "12_0|COMPLETED\n12_1|CANCELLED by 0\n12_[2-3%2]|PENDING\n13|RUNNING\n"
    assert parse_sacct(text) == {"12_0": "COMPLETED", "12_1": "CANCELLED", "12_2": "PENDING", "12_3": "PENDING", "13": "RUNNING"}


def test_scontrol_lines():
    text = (
        "JobId=14 ArrayJobId=12 ArrayTaskId=1 ArrayTaskThrottle=2 JobName=s JobState=RUNNING Reason=None\n"
        "JobId=12 ArrayJobId=12 ArrayTaskId=2-3%2 ArrayTaskThrottle=2 JobName=s JobState=PENDING Reason=JobArrayTaskLimit\n"
        "JobId=13 ArrayJobId=12 ArrayTaskId=0 JobName=s JobState=COMPLETED Reason=None\n"
        "JobId=20 JobName=single JobState=CANCELLED Reason=None\n"
    )
    assert parse_scontrol(text) == {
        "12_1": "RUNNING",
        "12_2": "PENDING",
        "12_3": "PENDING",
        "12_0": "COMPLETED",
        "20": "CANCELLED",
    }


def test_a_requeued_job_is_still_active_and_an_ended_one_is_not():
    assert {"PENDING", "RUNNING", "REQUEUED", "COMPLETING"} <= ACTIVE
    assert not {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED"} & ACTIVE


def test_tasks_per_node():
    assert SlurmLauncherSpec(gpus_per_node=4).tasks == 4 and SlurmLauncherSpec(gpus_per_node=0).tasks == 1
    assert launcher_overrides(SlurmLauncherSpec(gpus_per_node=0, tasks_per_node=2))[1:] == [
        "trainer.accelerator=cpu",
        "trainer.devices=2",
        "trainer.num_nodes=1",
    ]
    assert field_error(launcher={"type": "slurm", "gpus_per_node": 4, "tasks_per_node": 2}) == (
        ("launcher", "slurm"), "tasks_per_node",
        "is 2 but gpus_per_node is 4; Lightning runs one task per GPU: leave tasks_per_node out, or set it to gpus_per_node",
    )  # fmt: skip


def test_a_time_limit_signal_after_the_trial_does_not_kill_the_jobs_process():
    # submitit's process writes the trial's result after slurm_task: USR1 there (its default
    # action ends a process) made a finished trial a job that FAILED with no result
    code = (
        "import os, signal\n"
        "from aiayn.builder.sweep.slurm import slurm_task\n"
        "with slurm_task() as ended:\n"
        "    os.kill(os.getpid(), signal.SIGUSR1)\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    print('during:', ended.is_set())\n"
        "os.kill(os.getpid(), signal.SIGUSR1)\n"
        "print('after: alive')\n"
    )
    env = {**os.environ, "SLURM_JOB_ID": "7"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert (done.returncode, done.stdout) == (0, "during: True\nafter: alive\n"), done.stderr
