"""Checkpoints: safe loading with exact refusals, finding them in run directories, averaging."""

import functools
import os
import pickle
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch

from aiayn.builder.cli import main
from aiayn.builder.data.bpe import train_tokenizer
from aiayn.builder.data.demo import generate_demo
from aiayn.builder.data.tokenizer import Tokenizer
from aiayn.builder.decode.checkpoint import (
    average_checkpoints,
    load_checkpoint,
    load_for_inference,
    resolve_run_or_checkpoint,
    save_checkpoint,
)
from aiayn.builder.errors import UserError
from aiayn.builder.run.rundir import RunDir
from aiayn.builder.train.task import TranslationTask
from tests.conftest import EXPERIMENTS, load_experiment, registry

# the demo experiment, shrunk: one layer of width 16, a 50-token vocabulary, a 12-pair corpus
SMALL = [
    "dims.d_model=16",
    "dims.N=1",
    "dims.vocab_size=50",
    "dims.d_ff=32",
    "dims.h=2",
    "dims.d_k=8",
    "dims.d_v=8",
    "data.n_train=200",
    "data.n_valid=5",
    "data.n_test=7",
    "decode.max_len_b=5",
]
WHAT = "give a .ckpt written by `aiayn train` or `aiayn average`"


def small_experiment(*overrides: str) -> dict[str, Any]:
    return load_experiment(EXPERIMENTS / "demo.yaml", [*SMALL, *overrides]).model_dump(mode="json")


@functools.cache
def demo_tokenizer() -> Tokenizer:
    en, de = generate_demo(200, 5, 7, 1234)["train"]
    return train_tokenizer(en + de, 50)


def save_task_checkpoint(path: Path, experiment: dict[str, Any], *, seed: int, step: int = 0) -> TranslationTask:
    """A checkpoint in Lightning's layout for a freshly initialised TranslationTask."""
    torch.manual_seed(seed)
    task = TranslationTask(experiment, registry=registry())
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "epoch": 0,
            "global_step": step,
            "pytorch-lightning_version": L.__version__,
            "state_dict": task.state_dict(),
            "hparams_name": "kwargs",
            "hyper_parameters": {"experiment": experiment},
        },
        path,
    )
    return task


def make_run(root: Path, *, seed: int = 0, steps: tuple[int, ...] = (), overrides: tuple[str, ...] = ()) -> Path:
    """runs/demo/version_0 with tokenizer.json, checkpoints/last.ckpt and step<n>.ckpt files."""
    run_dir = root / "demo" / "version_0"
    demo_tokenizer().save(run_dir / "tokenizer.json")
    experiment = small_experiment(*overrides)
    for step in steps:
        save_task_checkpoint(run_dir / "checkpoints" / f"step{step:08d}.ckpt", experiment, seed=seed + step, step=step)
    save_task_checkpoint(run_dir / "checkpoints" / "last.ckpt", experiment, seed=seed)
    return run_dir


def weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)["state_dict"]


# ---- safe loading ------------------------------------------------------------------------------


class RunsCode:
    """Unpickling this runs a shell command: what a malicious checkpoint does."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_a_checkpoint_that_would_run_code_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {"experiment": RunsCode(marker)}}, path)
    refused = f"{os.system.__module__}.system"  # posix.system
    with pytest.raises(UserError) as e:
        load_checkpoint(path)
    assert str(e.value) == (
        f"{path} is not a safe aiayn checkpoint: loading it would import {refused}, and aiayn loads "
        "only tensors and plain data (torch.load with weights_only=True); do not load checkpoints "
        "from sources you do not trust"
    )
    plain = tmp_path / "evil.pkl"
    plain.write_bytes(pickle.dumps(RunsCode(marker)))
    with pytest.raises(UserError) as e:
        load_checkpoint(plain)
    assert str(e.value) == f"{plain} is not an aiayn checkpoint: torch.load cannot read it; {WHAT}"
    assert not marker.exists()


@pytest.mark.parametrize(
    "content",
    [bytes(range(256)) * 4, b"hello, world\n", b"", b"root:x:0:0:root:/root:/bin/bash\n"],
    ids=["random-bytes", "text", "empty", "passwd-line"],  # the last: an IndexError inside the unpickler
)
def test_a_file_that_is_not_a_checkpoint_is_refused(tmp_path, content):
    path = tmp_path / "model.ckpt"
    path.write_bytes(content)
    with pytest.raises(UserError) as e:
        load_checkpoint(path)
    assert str(e.value) == f"{path} is not an aiayn checkpoint: torch.load cannot read it; {WHAT}"


def test_checkpoint_contents_are_checked(tmp_path):
    path = tmp_path / "x.ckpt"
    cases = [
        ([1, 2], f"{path} is not an aiayn checkpoint: it holds a list, not a dict; {WHAT}"),
        ({"state_dict": {}}, f"{path} is not an aiayn checkpoint: it has no hyper_parameters['experiment']; {WHAT}"),
        (
            {"hyper_parameters": {"experiment": {"name": "x"}}, "state_dict": {"w": torch.zeros(1)}},
            f"{path} is not an aiayn checkpoint: it has no model weights (state_dict 'model.*'); {WHAT}",
        ),
    ]
    for content, message in cases:
        torch.save(content, path)
        with pytest.raises(UserError) as e:
            load_checkpoint(path)
        assert str(e.value) == message
    missing = tmp_path / "nope.ckpt"
    with pytest.raises(UserError, match=f"^checkpoint not found: {missing}$"):
        load_checkpoint(missing)


def test_a_lightning_checkpoint_loads_with_weights_only(tmp_path):
    """Optimizer, scheduler, loop and callback state and the "rng" ByteTensor are all allowed."""
    import numpy as np

    from aiayn.builder.data.collate import TranslationCollator
    from aiayn.builder.data.dataset import Example

    experiment = small_experiment("trainer.max_steps=2")
    task = TranslationTask(experiment, registry=registry())
    pair = Example(0, np.array([5, 6, 7], np.int32), np.array([8, 9], np.int32))
    loader = torch.utils.data.DataLoader(
        [[pair, pair]] * 2, batch_size=None, collate_fn=TranslationCollator(pad_id=0, bos_id=1, eos_id=2)
    )
    trainer = L.Trainer(
        max_steps=2,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        callbacks=[L.pytorch.callbacks.ModelCheckpoint(dirpath=tmp_path / "checkpoints", save_last=True)],
    )
    trainer.fit(task, train_dataloaders=loader)
    ckpt = load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    assert {"optimizer_states", "lr_schedulers", "loops", "callbacks", "rng"} <= ckpt.keys()
    assert ckpt["hyper_parameters"]["experiment"] == experiment


# ---- run directories ---------------------------------------------------------------------------


def test_resolve_run_directories_and_files(tmp_path):
    run = make_run(tmp_path)
    last = run / "checkpoints" / "last.ckpt"
    assert resolve_run_or_checkpoint(run) == (last, RunDir(run))
    assert resolve_run_or_checkpoint(last) == (last, RunDir(run))
    later = tmp_path / "demo" / "version_10"
    (later / "checkpoints").mkdir(parents=True)
    (later / "checkpoints" / "last.ckpt").write_bytes(last.read_bytes())
    (tmp_path / "demo" / "version_9").mkdir()
    assert resolve_run_or_checkpoint(tmp_path / "demo") == (later / "checkpoints" / "last.ckpt", RunDir(later))
    loose = tmp_path / "loose.ckpt"
    loose.write_bytes(last.read_bytes())
    assert resolve_run_or_checkpoint(loose) == (loose, None)

    with pytest.raises(UserError) as e:
        resolve_run_or_checkpoint(tmp_path / "missing")
    assert str(e.value) == (
        f"{tmp_path / 'missing'} does not exist: give a run directory (runs/<name>/version_<n>), a .ckpt file or a Hugging Face folder (Marian, GPT-2, Llama)"
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserError) as e:
        resolve_run_or_checkpoint(empty)
    assert str(e.value) == (
        f"{empty} is not a run directory: it has no checkpoints/ and no version_<n>/ runs; give a run "
        "directory (runs/<name>/version_<n>), a .ckpt file or a Hugging Face folder (Marian, GPT-2, Llama)"
    )
    (later / "checkpoints" / "last.ckpt").unlink()
    with pytest.raises(UserError) as e:
        resolve_run_or_checkpoint(later)
    assert str(e.value) == (
        f"{later} has no checkpoint to load ({later / 'checkpoints' / 'last.ckpt'} does not exist); has it trained yet?"
    )


def test_load_for_inference_rebuilds_the_model(tmp_path):
    run = make_run(tmp_path, seed=3)
    torch.manual_seed(3)
    task = TranslationTask(small_experiment(), registry=registry())
    loaded = load_for_inference(run)
    assert not loaded.model.training
    assert loaded.spec.name == "demo" and loaded.spec.model.d_model == 16
    assert loaded.src_tokenizer is loaded.tgt_tokenizer and loaded.src_tokenizer == demo_tokenizer()
    for name, value in task.model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[name], value), name


def test_load_for_inference_messages(tmp_path):
    run = make_run(tmp_path)
    loose = tmp_path / "elsewhere" / "model.ckpt"
    loose.parent.mkdir()
    loose.write_bytes((run / "checkpoints" / "last.ckpt").read_bytes())
    with pytest.raises(UserError) as e:
        load_for_inference(loose)
    assert str(e.value) == (
        f"no tokenizer for {loose}: looked for tokenizer.json (or tokenizer.src.json and tokenizer.tgt.json) "
        f"in {loose.parent} and {tmp_path}; give the run directory instead, or copy the run's "
        "tokenizer.json next to the checkpoint"
    )
    other = train_tokenizer(["abcdefghijklmnopqrstuvwxyz " * 3] * 10, 80)
    assert other.vocab_size == 57
    other.save(run / "tokenizer.json")
    with pytest.raises(UserError) as e:
        load_for_inference(run)
    assert str(e.value) == (
        f"{run / 'checkpoints' / 'last.ckpt'}: the source tokenizer has 57 entries but the model's vocabulary "
        "has 50; the tokenizer belongs to another run"
    )


# ---- averaging ---------------------------------------------------------------------------------


def test_averaging_identical_checkpoints_gives_the_same_parameters(tmp_path):
    run = make_run(tmp_path)
    last = run / "checkpoints" / "last.ckpt"
    out = tmp_path / "avg.ckpt"
    save_checkpoint(average_checkpoints([last, last, last]), out)
    ckpt = load_checkpoint(out)
    assert ckpt.keys() == {"state_dict", "hyper_parameters", "hparams_name", "aiayn"}
    assert ckpt["aiayn"]["format"] == 1 and ckpt["aiayn"]["averaged_from"] == [str(last)] * 3
    assert ckpt["aiayn"]["tokenizers"] == {"tokenizer.json": (run / "tokenizer.json").read_text()}
    original = weights(last)
    assert ckpt["state_dict"].keys() == original.keys()
    for name, value in original.items():
        assert ckpt["state_dict"][name].dtype == value.dtype
        torch.testing.assert_close(ckpt["state_dict"][name], value, rtol=0, atol=1e-7, msg=name)
    # the tied embedding is one tensor in the file, as in the model
    tied = [ckpt["state_dict"][f"model.{k}"] for k in ("src_embed.token.table.weight", "generator.weight")]
    assert tied[0] is tied[1]


def test_averaging_two_checkpoints_gives_their_exact_mean(tmp_path):
    run = make_run(tmp_path, steps=(100, 200))
    a, b = (run / "checkpoints" / f"step{s:08d}.ckpt" for s in (100, 200))
    mean = average_checkpoints([a, b])["state_dict"]
    wa, wb = weights(a), weights(b)
    assert not torch.equal(wa["model.generator.weight"], wb["model.generator.weight"])
    for name in wa:
        assert torch.equal(mean[name], (wa[name].float() + wb[name].float()) / 2), name


def test_averaged_checkpoint_is_accepted_anywhere(tmp_path):
    run = make_run(tmp_path, steps=(1, 2, 3))
    out = tmp_path / "elsewhere" / "avg.ckpt"
    assert main(["average", "--last", "2", str(run), "-o", str(out)]) == 0
    assert load_checkpoint(out)["aiayn"]["averaged_from"] == [str(run / "checkpoints" / f"step{s:08d}.ckpt") for s in (2, 3)]
    loaded = load_for_inference(out)  # no run directory around it: the tokenizer is stored inside
    assert loaded.src_tokenizer == demo_tokenizer() and loaded.checkpoint == out


def test_last_k_takes_the_newest_steps(tmp_path, capsys):
    run = make_run(tmp_path, steps=(20, 100, 3))
    assert [p.name for p in RunDir(run).step_checkpoints()] == [f"step{s:08d}.ckpt" for s in (3, 20, 100)]
    assert main(["average", "--last", "4", str(run), "-o", str(tmp_path / "a.ckpt")]) == 2
    assert capsys.readouterr().err == (
        f"aiayn average: error: --last 4: {run / 'checkpoints'} has only 3 step checkpoints "
        "(step00000003.ckpt, step00000020.ckpt, step00000100.ckpt); ask for at most 3, or keep more "
        "(train.checkpoint.keep_last)\n"
    )


def test_averaging_refuses_different_shapes_and_experiments(tmp_path):
    a = make_run(tmp_path / "a") / "checkpoints" / "last.ckpt"
    why = {
        "dims.d_ff=64": "parameter encoder.layers.0.sublayers.1.sublayer.w_1.weight has shape (32, 16) in the first and (64, 16) in the second",
        "dims.P_drop=0.3": "their models differ at model.dropout (0.1 and 0.3)",
        "name=other": "they belong to different experiments ('demo' and 'other')",
    }
    for i, (override, reason) in enumerate(why.items()):
        b = make_run(tmp_path / str(i), overrides=(override,)) / "checkpoints" / "last.ckpt"
        with pytest.raises(UserError) as e:
            average_checkpoints([a, b])
        assert str(e.value) == f"cannot average {a} and {b}: {reason}; average checkpoints of one run"


def test_a_plugin_record_is_data_quoted_for_the_shell_and_inert_on_the_terminal():
    from aiayn.builder.errors import missing_plugins_message

    assert missing_plugins_message("m.ckpt", {"relu": "relu-scores==1.0+local"}) == (
        "m.ckpt was trained with 'relu' of relu-scores==1.0+local, which is not installed here: pip install relu-scores==1.0+local"
    )
    # a version with an epoch (PEP 440's 1!2.0): quoted, so that an interactive shell's ! expands no history
    assert missing_plugins_message("m.ckpt", {"relu": "relu-scores==1!2.0"}).endswith(": pip install 'relu-scores==1!2.0'")
    assert missing_plugins_message("m.ckpt", {"x": "$(touch pwned)==1.0"}) == (
        "m.ckpt was trained with 'x' of $(touch pwned)==1.0, which is not installed here; its record '$(touch pwned)==1.0' names "
        "no distribution pip can install (name==version): install the plugin that registers those types"
    )
    message = missing_plugins_message("m.ckpt", {"a\x1b[2Jb": "evil\nname==1\u202e"})
    assert message == (
        "m.ckpt was trained with 'a\\x1b[2Jb' of evil\\nname==1\\u202e, which is not installed here; its record "
        "'evil\\nname==1\\u202e' names no distribution pip can install (name==version): install the plugin that registers those types"
    )
    assert message.isprintable()
