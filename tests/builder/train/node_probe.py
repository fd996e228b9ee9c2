"""Run by test_multinode.py under torchrun as `python -m tests.builder.train.node_probe OUT_DIR train EXP [k=v ...]`:
the `aiayn` command line (builder.cli.main), with a callback added to its `fit` that records,
per rank, what the Trainer derived and the final parameters, and the process id (to tell which
rank wrote a file)."""

import json
import os
import sys
from pathlib import Path

import lightning as L
import torch

import aiayn.builder.train.fit as fitting
from aiayn.builder.cli import main


class Probe(L.Callback):
    def __init__(self, out: Path) -> None:
        self.out = out

    def on_train_end(self, trainer: L.Trainer, task: L.LightningModule) -> None:
        rank = trainer.global_rank
        record = {
            "rank": rank, "node_rank": trainer.node_rank, "world": trainer.world_size, "num_nodes": trainer.num_nodes,
            "accumulate": trainer.accumulate_grad_batches, "max_tokens": trainer.datamodule.max_tokens,
            "run_dir": str(Path(trainer.default_root_dir).resolve().parent), "pid": os.getpid(), "step": trainer.global_step,
        }  # fmt: skip
        torch.save({k: v.detach().clone() for k, v in task.model.state_dict().items()}, self.out / f"rank{rank}.pt")
        (self.out / f"rank{rank}.json").write_text(json.dumps(record))


def fit_with_probe(*args, callbacks=(), **kwargs):
    return real_fit(*args, callbacks=[*callbacks, Probe(out)], **kwargs)


if __name__ == "__main__":
    out, argv = Path(sys.argv[1]), sys.argv[2:]
    real_fit, fitting.fit = fitting.fit, fit_with_probe  # builder.cli.train imports fit when it runs
    sys.exit(main(argv))
