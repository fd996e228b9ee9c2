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


@pytest.hookimpl(trylast=True)  # after -m's deselection: the items are those that will run
def pytest_collection_modifyitems(config, items):
    """The tier's `longest` tests (the manual's two halves) first, each at the head of one of
    pytest-xdist's first chunks: its load scheduler starts each worker on two consecutive tests, so
    [longest, other, longest, other, ...] starts them side by side on two workers, where in file
    order they came last and could land on one worker, one after the other (minutes of CI)."""
    longest = [item for item in items if item.get_closest_marker("longest")]
    others = [item for item in items if not item.get_closest_marker("longest")]
    head = [item for pair in zip(longest, others[: len(longest)]) for item in pair]
    items[:] = head + longest[len(head) // 2 :] + others[len(head) // 2 :]


def registry():
    """aiayn's own blocks, as every test reads experiments (AIAYN_PLUGINS="": no installed plugin's);
    a test that registers blocks of its own extends it (`registry().extended(function)`)."""
    from aiayn.builder.plugins import load_registry

    return load_registry("")


def load_experiment(path, overrides=(), **options):
    """aiayn.builder.run.config.load_experiment with the tests' registry (unless given)."""
    from aiayn.builder.run.config import load_experiment as load

    options.setdefault("registry", registry())
    return load(path, overrides, **options)


def validated_experiment(data, registry_=None):
    """ExperimentSpec.model_validate(data) against the tests' registry (or `registry_`)."""
    from aiayn.schemas.experiment import ExperimentSpec

    return ExperimentSpec.model_validate(data, context=(registry_ or registry()).context)
