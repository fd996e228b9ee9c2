"""A real one-node SLURM cluster for the tests: munged, slurmctld and slurmd of this machine's
slurm-wlm, configured in a temporary folder and started on localhost.

`.ci/run` installs slurm-wlm and munge with apt where it runs as root; elsewhere the tests that
need the cluster skip with the reason `Cluster.unavailable` gives.
"""

import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
COMMANDS = ("sbatch", "scontrol", "scancel", "sinfo", "squeue")


def unavailable() -> str | None:
    """Why no cluster can start here, or None."""
    missing = [
        name for name in (*DAEMONS, *COMMANDS) if shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin") is None
    ]
    if missing:
        return f"no SLURM here ({', '.join(missing)} not found): `apt-get install slurm-wlm munge` as root installs it"
    if os.geteuid() != 0:
        return "a one-node SLURM cluster needs root here (slurmd starts jobs as their user)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _which(name: str) -> str:
    return shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin") or name


class Cluster:
    """start() writes slurm.conf (this host's CPUs and memory as `slurmd -C` reports them),
    starts the daemons and waits until the node is idle; stop() ends them. `env` is what a
    client command needs (SLURM_CONF)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.conf = folder / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.host = socket.gethostname().split(".")[0]
        self._stopping = threading.Event()

    def start(self) -> "Cluster":
        f = self.folder
        for sub in ("state", "spool", "log"):
            (f / sub).mkdir(parents=True, exist_ok=True)
        key = f / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        node = subprocess.run([_which("slurmd"), "-C"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
        if not node.startswith("NodeName="):
            raise RuntimeError(f"slurmd -C printed {node!r}")
        node = node.replace(f"NodeName={node.split()[0].split('=')[1]}", f"NodeName={self.host} NodeAddr=127.0.0.1", 1)
        self.conf.write_text(
            "\n".join([
                "ClusterName=aiayn-test",
                f"SlurmctldHost={self.host}(127.0.0.1)",
                "SlurmUser=root", "SlurmdUser=root",
                f"SlurmctldPort={free_port()}", f"SlurmdPort={free_port()}",
                "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={f / 'munge.sock'}",
                f"StateSaveLocation={f / 'state'}", f"SlurmdSpoolDir={f / 'spool'}",
                f"SlurmctldPidFile={f / 'slurmctld.pid'}", f"SlurmdPidFile={f / 'slurmd.pid'}",
                f"SlurmctldLogFile={f / 'log' / 'slurmctld.log'}", f"SlurmdLogFile={f / 'log' / 'slurmd.log'}",
                "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none",
                "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",  # cores are what jobs share; memory is not counted
                "SchedulerType=sched/backfill", "SchedulerParameters=sched_interval=1,bf_interval=1",
                "ReturnToService=2", "JobRequeue=1",
                "KillWait=5", "MinJobAge=3600", "InactiveLimit=0",
                # no slurmdbd: sacct has no records, and the launcher asks scontrol instead
                "AccountingStorageType=accounting_storage/none", "JobCompType=jobcomp/none",
                f"{node} State=UNKNOWN",
                "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            ]) + "\n"
        )  # fmt: skip
        sock = f / "munge.sock"
        self._run(
            _which("munged"), f"--socket={sock}", f"--key-file={key}", f"--pid-file={f / 'munged.pid'}",
            f"--log-file={f / 'log' / 'munged.log'}", f"--seed-file={f / 'munge.seed'}", "--force",
        )  # fmt: skip
        self._run(_which("slurmctld"), "-f", str(self.conf))
        self._run(_which("slurmd"), "-f", str(self.conf))
        deadline = time.monotonic() + 60
        while self.node_state() != "idle":
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the SLURM node did not come up: {self.node_state()!r}; logs in {f / 'log'}")
            time.sleep(0.5)
        threading.Thread(target=self._start_requeued_jobs, daemon=True).start()
        return self

    def _start_requeued_jobs(self) -> None:
        """slurmctld holds a requeued job for 121 s before it may start again (time for a real
        cluster's nodes to revoke the old job's credential); this one-node cluster starts it at once."""
        while not self._stopping.wait(0.5):
            done = subprocess.run(["squeue", "-h", "-t", "PD", "-o", "%i %r"], capture_output=True, text=True, env=self.env)
            for line in done.stdout.splitlines():
                job_id, _, reason = line.partition(" ")
                if reason.strip() == "BeginTime":
                    subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], capture_output=True, env=self.env)

    def _run(self, *argv: str) -> None:
        subprocess.run(argv, check=True, env=self.env, capture_output=True)

    def node_state(self) -> str:
        done = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, env=self.env)
        return done.stdout.strip() if done.returncode == 0 else ""

    def scontrol(self, *args: str) -> str:
        return subprocess.run(["scontrol", *args], capture_output=True, text=True, check=True, env=self.env).stdout

    def job(self, job_id: str) -> dict[str, str]:
        """scontrol show job, as {field: value}."""
        fields = {}
        for item in self.scontrol("show", "job", "-o", job_id).split():
            key, _, value = item.partition("=")
            fields[key] = value
        return fields

    def wait_until_ended(self, job_id: str, timeout: float) -> str:
        """The job's final state; at the timeout, the job is cancelled and its state and the
        reason it waited are returned instead, for the test's message."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.job(job_id).get("JobState", "")
            if state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "SUSPENDED"):
                return state
            time.sleep(0.5)
        fields = self.job(job_id)
        subprocess.run(["scancel", job_id], capture_output=True, env=self.env)
        return f"still {fields.get('JobState')} after {timeout} s (reason {fields.get('Reason')}); queue:\n{self.queue()}"

    def queue(self) -> str:
        return subprocess.run(["squeue", "-h", "-o", "%i %T %r %C %j"], capture_output=True, text=True, env=self.env).stdout

    def cancel_all(self, timeout: float = 60) -> None:
        """Cancels every job left on the cluster and waits until none is running, so that one
        test's leftovers never hold the node's cores for the next."""
        subprocess.run(["scancel", "--partition=debug"], capture_output=True, env=self.env)
        deadline = time.monotonic() + timeout
        while self.queue().strip() and time.monotonic() < deadline:
            time.sleep(0.5)

    def stop(self) -> None:
        self._stopping.set()
        for name in ("slurmd", "slurmctld", "munged"):
            pid_file = self.folder / f"{name}.pid"
            try:
                os.kill(int(pid_file.read_text()), 15)
            except (OSError, ValueError):
                pass
