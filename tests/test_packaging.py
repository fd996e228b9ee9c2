"""The distribution: one top-level package, `aiayn`, holding every module of the repository's
folders, and aiayn's blocks declared in the entry-point group a plugin uses. The slow tier
installs the wheel (not editable) into a new virtual environment and runs the CLI from it."""

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import EXPERIMENTS, ROOT

FOLDERS = {"aiayn": "aiayn", "blocks": "aiayn/blocks", "builder": "aiayn/builder", "schemas": "aiayn/schemas"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from a copy of the source (a build writes build/ and *.egg-info beside it)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", *FOLDERS):
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy
        copy(ROOT / name, source / name, **({"ignore": shutil.ignore_patterns("__pycache__")} if copy is shutil.copytree else {}))
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(out), str(source)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    [built] = out.glob("aiayn-*.whl")
    return built


def test_the_wheel_holds_aiayn_alone_at_the_top_and_every_module(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"aiayn"}
    modules = {n for n in names if n.endswith(".py")}
    expected = {f"{FOLDERS[p.relative_to(ROOT).parts[0]]}/{p.relative_to(ROOT / p.relative_to(ROOT).parts[0]).as_posix()}"
                for top in FOLDERS for p in (ROOT / top).rglob("*.py")}  # fmt: skip
    assert modules == expected


def test_the_wheel_declares_aiayns_blocks_as_a_plugin_would(wheel):
    [entry_points] = [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[aiayn.blocks]\naiayn = aiayn.builder.model.builtin:register_builtins\n" in text
    assert "[console_scripts]\naiayn = aiayn.builder.cli:main\n" in text


@pytest.mark.slow
def test_the_installed_wheel_validates_and_shows_an_experiment(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())  # fmt: skip
    # the test environment's packages (torch, pydantic, ...) after the new environment's own
    (site / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)]
    done = subprocess.run(install, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    where = subprocess.run([python, "-c", "import aiayn.blocks; print(aiayn.blocks.__file__)"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert where.startswith(str(site)), where  # the wheel's copy, not the repository's folders
    aiayn = venv / "bin" / "aiayn"
    done = subprocess.run(
        [aiayn, "validate", str(EXPERIMENTS / "base.yaml"), "--schema-only"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith(f"{EXPERIMENTS / 'base.yaml'}: ok: base, 63,082,496 parameters")
    done = subprocess.run(
        [aiayn, "show", str(EXPERIMENTS / "big.yaml"), "--json"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert '"params": 214245376' in done.stdout
