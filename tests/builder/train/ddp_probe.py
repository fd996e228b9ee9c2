"""Run by test_training.py as `python ddp_probe.py EXPERIMENT RUN_DIR OUT_DIR [k=v ...]`:
trains through builder.train.fit with a callback that records, per rank, the examples of
every batch, the validation metrics it logged (rank 0), and a checksum of the parameters at the
end. Lightning's DDP launcher re-runs this same command line for the other ranks."""

import json
import sys
from pathlib import Path

import lightning as L
import torch

from aiayn.builder.run.rundir import RunDir
from aiayn.builder.train.fit import fit
from tests.conftest import load_experiment


class Probe(L.Callback):
    def __init__(self, out: Path) -> None:
        self.out, self.batches, self.validations = out, [], []

    def on_train_batch_start(self, trainer, task, batch, batch_idx):
        self.batches.append(batch.ids.tolist())

    def on_validation_end(self, trainer, task):
        if trainer.is_global_zero:
            metrics = trainer.callback_metrics
            self.validations.append(
                {"step": trainer.global_step, "ppl": float(metrics["PPL/valid"]), "loss": float(metrics["loss/valid"])}
            )

    def on_train_end(self, trainer, task):
        params = torch.cat([p.detach().flatten().double() for p in task.model.parameters()])
        record = {
            "rank": trainer.global_rank,
            "world": trainer.world_size,
            "batches": self.batches,
            "param_sum": params.sum().item(),
            "param_abs": params.abs().sum().item(),
            "validations": self.validations,
        }
        (self.out / f"rank{trainer.global_rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    experiment, run_dir, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    spec = load_experiment(experiment, sys.argv[4:])
    run_dir.mkdir(parents=True, exist_ok=True)
    fit(spec, RunDir(run_dir), experiment_path=Path(experiment), resume=False, callbacks=[Probe(out)])
