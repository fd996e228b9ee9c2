import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS = ROOT / "experiments"
SHARED_DATA = Path(os.environ.get("AIAYN_DATA", ROOT.parent / "shared" / "data"))


@pytest.fixture
def write(tmp_path):
    """write("name.yaml", text) -> the path of a new file under tmp_path."""

    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    return _write


def pytest_configure(config):
    # Two pytest-xdist workers share two cores: one thread each keeps them from thrashing (also
    # in the runs they start: train.cpu_threads=auto reads it; tests of the option unset it)
    import torch

    torch.set_num_threads(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # what the tests expect does not depend on the plugins this machine has installed: aiayn's own
    # blocks alone load, here and in the commands the tests start (a test of a plugin names it)
    os.environ["AIAYN_PLUGINS"] = ""


@pytest.fixture(autouse=True)
def own_registrations():
    """What a test registers is taken back when it ends, passed or failed."""
    from aiayn.builder.registry import scope

    with scope():
        yield
