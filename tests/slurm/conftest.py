import subprocess

import pytest

from tests.slurm.cluster import Cluster, unavailable


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """A one-node SLURM cluster on this machine for the session; the test skips, saying why,
    where none can start."""
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("slurm")
    try:
        running = Cluster(folder).start()
    except (OSError, RuntimeError, subprocess.CalledProcessError) as e:
        stderr = getattr(e, "stderr", b"") or b""
        pytest.skip(f"the SLURM cluster did not start: {e} {stderr.decode(errors='replace').strip()} (logs in {folder / 'log'})")
    yield running
    running.stop()


@pytest.fixture(autouse=True)
def no_jobs_left(request):
    """After each test, nothing of it runs on (or waits for) the cluster."""
    yield
    if "cluster" in request.fixturenames:
        request.getfixturevalue("cluster").cancel_all()
