"""Values nested a few hundred to a few thousand levels deep, wherever a user gives them: an
experiment or sweep file, an override, --mbr's settings (CLI and Python), a run's config.yaml. Each
is one message naming where, exit 2 (a RecursionError from OmegaConf, pydantic or YAML before)."""

import pytest

from aiayn.builder.decode.mbr import utility_spec
from aiayn.builder.errors import UserError
from aiayn.builder.run.config import read_run_config
from aiayn.builder.run.nesting import MAX_NESTING, nesting
from tests.builder.cli.test_bad_inputs import cli
from tests.conftest import EXPERIMENTS, registry

DEPTHS = [MAX_NESTING + 1, 300, 1000, 5000]
WHY = f"its values nest more than {MAX_NESTING} levels deep (lists or mappings inside each other)"


def deep(n: int) -> str:
    return "[" * n + "]" * n


def test_nesting_is_counted_without_recursion():
    value: list = []
    for _ in range(100_000):
        value = [value]
    assert nesting(value) == MAX_NESTING + 1  # counted up to the limit and one past it, however deep
    assert (nesting(3), nesting([]), nesting({"a": [1, {"b": 2}]}), nesting([[[]]])) == (0, 1, 3, 3)


@pytest.mark.parametrize("n", DEPTHS)
def test_deep_files_and_overrides_are_named(tmp_path, n):
    experiment = tmp_path / "deep.yaml"
    experiment.write_text(f"extends: {EXPERIMENTS / 'demo.yaml'}\nnotes: {deep(n)}\n")
    assert cli("validate", experiment)[::2] == (2, f"aiayn validate: error: {experiment}: {WHY}\n")
    sweep = tmp_path / "deep.sweep.yaml"
    sweep.write_text(f"base: {EXPERIMENTS / 'demo.yaml'}\nseeds: {deep(n)}\n")
    assert cli("sweep", sweep, "--dry-run")[::2] == (2, f"aiayn sweep: error: {sweep}: {WHY}\n")
    assert cli("validate", EXPERIMENTS / "demo.yaml", f"dims.h={deep(n)}")[::2] == (
        2, f"aiayn validate: error: override dims.h=... (on the command line): {WHY}\n"
    )  # fmt: skip
    config = tmp_path / "config.yaml"
    config.write_text(f"name: x\nmodel: {deep(n)}\n")
    with pytest.raises(UserError, match=rf"^{config}: cannot read the run's config \(its values nest more than 64 "):
        read_run_config(config)


@pytest.mark.parametrize("n", DEPTHS)
def test_deep_mbr_settings_are_named(n):
    code, _, err = cli("translate", EXPERIMENTS / "demo.yaml", "--mbr", f"{{type: chrf, word_order: {deep(n)}}}", "--n-best", "2")
    assert (code, err) == (2, f"aiayn translate: error: --mbr: {WHY}; give a type (chrf) or '{{type: chrf, word_order: 2}}'\n")
    value: list = []
    for _ in range(n):
        value = [value]
    with pytest.raises(UserError) as e:
        utility_spec({"type": "chrf", "word_order": value}, registry())
    assert str(e.value) == f"mbr: {WHY}"
