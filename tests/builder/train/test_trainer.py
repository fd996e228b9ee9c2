"""Batching arithmetic and atomic checkpoint writes."""

import pytest
import torch

from aiayn.builder.train.trainer import AtomicCheckpointIO, batching
from tests.conftest import EXPERIMENTS, load_experiment


@pytest.mark.parametrize(
    "world, cap, expected",
    [(1, None, (25000, 1)), (8, 3125, (3125, 1)), (1, 3125, (3125, 8)), (2, 3125, (3125, 4)), (3, 3125, (2778, 3))],
)
def test_global_batch_does_not_depend_on_devices(world, cap, expected):
    spec = load_experiment(EXPERIMENTS / "base.yaml", [f"train.max_tokens_per_batch={cap if cap else 'null'}"])
    per_device, accumulate = batching(spec, world)
    assert (per_device, accumulate) == expected
    assert world * accumulate * per_device >= spec.train.tokens_per_step > world * accumulate * (per_device - 1)


def test_a_failed_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    io, path = AtomicCheckpointIO(), tmp_path / "last.ckpt"
    io.save_checkpoint({"step": 1, "w": torch.ones(3)}, path)

    def killed(obj, f, *args, **kwargs):
        f.write(b"partial")
        raise KeyboardInterrupt  # as if the job were killed in the middle of writing

    monkeypatch.setattr(torch, "save", killed)
    with pytest.raises(KeyboardInterrupt):
        io.save_checkpoint({"step": 2, "w": torch.zeros(3)}, path)
    monkeypatch.undo()
    restored = torch.load(path, weights_only=True)
    assert restored["step"] == 1 and torch.equal(restored["w"], torch.ones(3))
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"]  # no temporary file left behind
