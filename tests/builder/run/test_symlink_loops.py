"""A path that is a symbolic link leading back to itself, given wherever a verb takes a path (an
experiment, a run, an input, an output, a folder, a path in the YAML), is one message naming it,
exit 2, and nothing is written."""

import pytest

from tests.builder.cli.test_bad_inputs import cli, snapshot
from tests.conftest import EXPERIMENTS

DEMO = str(EXPERIMENTS / "demo.yaml")
LOOP = "a symbolic link on the way to it leads back to itself (a loop); point it at a real file or folder, or remove it"


@pytest.mark.parametrize(
    "argv",
    [
        ["validate", "{loop}"], ["show", "{loop}"], ["train", DEMO, "--runs", "{loop}"], ["translate", "{loop}"],
        ["evaluate", "{loop}"], ["results", "{loop}"], ["sweep", "{loop}"], ["data", "multi30k", "{loop}"],
        ["data", "multi30k", "{tmp}/out", "--from", "{loop}"], ["export", "{loop}", "--to", "ctranslate2", "{tmp}/out"],
        ["average", "{loop}", "-o", "{tmp}/out.ckpt"], ["train", DEMO, "data={{type: files, dir: {loop}}}", "--runs", "{tmp}/runs"],
        ["train", DEMO, "data.tokenizer={{type: file, path: {loop}}}", "--runs", "{tmp}/runs"],
        ["train", DEMO, "init_from={loop}", "--runs", "{tmp}/runs"],
    ],
)  # fmt: skip
def test_a_symbolic_link_to_itself_is_named(tmp_path, argv):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    before = snapshot(tmp_path)
    code, _, err = cli(*(a.format(loop=loop, tmp=tmp_path) for a in argv))
    prefix = "init_from: " if any(a.startswith("init_from=") for a in argv) else ""
    assert (code, err.splitlines()[-1]) == (2, f"aiayn {argv[0]}: error: {prefix}{loop}: {LOOP}"), err
    assert snapshot(tmp_path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["loop"]


def test_an_output_or_an_input_file_that_loops_is_named(tmp_path, monkeypatch):
    from tests.builder.cli.test_bad_inputs import TINY

    code, _, err = cli(
        "train", DEMO, *TINY, "trainer.max_steps=1", f"data.cache_dir={tmp_path / 'cache'}", "--runs", tmp_path / "runs"
    )
    assert code == 0, err
    run = tmp_path / "runs" / "demo" / "version_0"
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    before = snapshot(run)
    for argv in (["translate", run, "--output", loop], ["translate", run, "--input", loop], ["score", run, "--src", loop, "--tgt", loop],
                 ["export", run, "--to", "ctranslate2", loop], ["average", run / "checkpoints" / "last.ckpt", "-o", loop]):  # fmt: skip
        code, _, err = cli(*argv)
        assert (code, err) == (2, f"aiayn {argv[0]}: error: {loop}: {LOOP}\n"), argv
    assert snapshot(run) == before
