"""ExperimentSpec -> lightning.Trainer: Lightning's own arguments, plus what the paper derives."""

import math
import os
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.plugins.io import TorchCheckpointIO

from builder.callbacks import ValidationTranslations
from schemas.experiment import ExperimentSpec


class AtomicCheckpointIO(TorchCheckpointIO):
    """Writes a checkpoint to a temporary file, then renames it into place: a kill during a
    save leaves the previous checkpoint whole."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                torch.save(checkpoint, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def batching(spec: ExperimentSpec, world_size: int) -> tuple[int, int]:
    """(tokens per device batch, gradient accumulation) so that world_size x accumulation x
    device batch = train.tokens_per_step, whatever the number of devices."""
    per_step = spec.train.tokens_per_step
    cap = spec.train.max_tokens_per_batch or per_step
    accumulate = math.ceil(per_step / (world_size * cap))
    return math.ceil(per_step / (world_size * accumulate)), accumulate


def build_trainer(spec: ExperimentSpec, run_dir: Path, *, version: int, callbacks: list[L.Callback] = ()) -> L.Trainer:
    t, ckpt = spec.trainer, spec.train.checkpoint
    logger = TensorBoardLogger(save_dir=str(run_dir.parent.parent), name=run_dir.parent.name, version=version, default_hp_metric=False)
    checkpoints = ModelCheckpoint(
        dirpath=run_dir / "checkpoints",
        filename="step{step:08d}",
        auto_insert_metric_name=False,
        monitor="step",
        mode="max",
        save_top_k=ckpt.keep_last,
        save_last=True,
        every_n_train_steps=ckpt.every_n_train_steps,
        train_time_interval=timedelta(minutes=ckpt.minutes) if ckpt.minutes else None,
    )
    trainer = L.Trainer(
        accelerator=t.accelerator,
        devices=t.devices,
        strategy=t.strategy,
        num_nodes=t.num_nodes,
        precision=t.precision,
        max_steps=t.max_steps,
        max_epochs=-1,
        max_time=t.max_time,
        val_check_interval=None,  # set below, once accumulation is known
        check_val_every_n_epoch=None,
        log_every_n_steps=t.log_every_n_steps,
        gradient_clip_val=t.gradient_clip_val,
        num_sanity_val_steps=t.num_sanity_val_steps,
        limit_val_batches=t.limit_val_batches,
        deterministic=t.deterministic,
        enable_progress_bar=t.enable_progress_bar,
        logger=logger,
        callbacks=[checkpoints, ValidationTranslations(), *callbacks],
        plugins=[AtomicCheckpointIO()],
        default_root_dir=str(run_dir),
        use_distributed_sampler=False,  # our token-batch sampler splits batches across ranks itself
    )
    _, accumulate = batching(spec, trainer.world_size)
    trainer.accumulate_grad_batches = accumulate
    # Lightning counts val_check_interval in batches; the experiment counts optimizer steps.
    if t.val_check_interval:
        trainer.val_check_interval = t.val_check_interval * accumulate
    return trainer
