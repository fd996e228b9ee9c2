"""ExperimentSpec -> lightning.Trainer: Lightning's own arguments, plus what the paper derives.

Everything the Trainer is given is known before it is built: the devices are resolved through
Lightning's accelerator classes, so gradient accumulation and the validation interval (counted
in optimizer steps by the experiment) are passed in, and a machine that cannot run the
experiment is refused with a message naming the `trainer.` key, before anything is written.
"""

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.accelerators import Accelerator, CPUAccelerator, CUDAAccelerator, MPSAccelerator
from lightning.pytorch.callbacks import EarlyStopping
from lightning.pytorch.plugins.environments import SLURMEnvironment
from lightning.pytorch.plugins.io import TorchCheckpointIO

from aiayn.builder.errors import UserError
from aiayn.builder.graph import graph_of
from aiayn.builder.run.atomic import atomic_write
from aiayn.builder.run.rundir import RunDir
from aiayn.builder.train.board import Board
from aiayn.builder.train.checkpoints import StepCheckpoints
from aiayn.builder.train.progress import ConsoleProgress, ProgressFile
from aiayn.builder.train.requeue import RequeueAtStepEnd, in_slurm_job
from aiayn.schemas.experiment import ExperimentSpec
from aiayn.schemas.train import EarlyStoppingSpec
from aiayn.schemas.trainer import TrainerSpec

_ACCELERATORS: dict[str, type[Accelerator]] = {
    "cpu": CPUAccelerator, "gpu": CUDAAccelerator, "cuda": CUDAAccelerator, "mps": MPSAccelerator,
}  # fmt: skip


class AtomicCheckpointIO(TorchCheckpointIO):
    """Writes a checkpoint to a temporary file, then renames it into place: a kill during a
    save leaves the previous checkpoint whole."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
        with atomic_write(Path(path)) as f:
            torch.save(checkpoint, f)


def accelerator(trainer: TrainerSpec) -> type[Accelerator]:
    """The accelerator class `trainer.accelerator` names ("auto": CUDA, else MPS, else CPU), if
    this machine has one."""
    name = trainer.accelerator
    if name == "auto":
        return next(a for a in (CUDAAccelerator, MPSAccelerator, CPUAccelerator) if a.is_available())
    cls = _ACCELERATORS[name]
    if not cls.is_available():
        raise UserError(
            f"trainer.accelerator ({name}): this machine has no {name.upper()} device; "
            "use trainer.accelerator=cpu, or auto to take what is there"
        )
    return cls


def check_strategy(trainer: TrainerSpec) -> None:
    """Lightning (2.6) refuses FSDP on anything but CUDA with a traceback; say it as the experiment's keys."""
    cls = accelerator(trainer)
    if trainer.strategy == "fsdp" and cls is not CUDAAccelerator:
        here = next(name for name, c in _ACCELERATORS.items() if c is cls)
        raise UserError(
            f"trainer.strategy (fsdp): Lightning runs FSDP on CUDA GPUs only, and trainer.accelerator "
            f"({trainer.accelerator}) is {here} here; use trainer.strategy=ddp to train on several {here} processes"
        )


def check_launch(trainer: L.Trainer) -> None:
    """A job started by torchrun or SLURM must have the shape that trainer.devices and
    trainer.num_nodes say; Lightning checks it only once training starts, with a traceback."""
    environment = getattr(trainer.strategy, "cluster_environment", None)
    if environment is None:
        return
    try:
        environment.validate_settings(num_devices=len(trainer.device_ids), num_nodes=trainer.num_nodes)
    except ValueError as e:
        raise UserError(
            f"trainer.devices x trainer.num_nodes do not match the job's launcher: {e} "
            "Set trainer.devices to the processes per node and trainer.num_nodes to the nodes it starts"
        ) from None


def devices_per_node(trainer: TrainerSpec) -> int:
    cls = accelerator(trainer)
    if trainer.devices == "auto":
        return cls.auto_device_count()
    try:
        return len(cls.get_parallel_devices(cls.parse_devices(trainer.devices)))
    except Exception as e:  # Lightning raises TypeError or MisconfigurationException, with its reason
        reason = " ".join(str(e).split())  # Lightning's message, on one line
        raise UserError(f"trainer.devices ({trainer.devices!r}): {reason}") from None


def world_size(spec: ExperimentSpec) -> int:
    return devices_per_node(spec.trainer) * spec.trainer.num_nodes


def batching(spec: ExperimentSpec, world_size: int) -> tuple[int, int]:
    """(tokens per device batch, gradient accumulation) so that world_size x accumulation x
    device batch = train.tokens_per_step, whatever the number of devices."""
    per_step = spec.train.tokens_per_step
    cap = spec.train.max_tokens_per_batch or per_step
    accumulate = math.ceil(per_step / (world_size * cap))
    return math.ceil(per_step / (world_size * accumulate)), accumulate


def early_stopping(spec: EarlyStoppingSpec) -> EarlyStopping:
    """Lightning's EarlyStopping, checked after each validation (not at an epoch's end, which has none)."""
    return EarlyStopping(
        monitor=spec.monitor, patience=spec.patience, min_delta=spec.min_delta, mode="min", check_on_train_epoch_end=False
    )


def build_trainer(spec: ExperimentSpec, run: RunDir, *, callbacks: Sequence[L.Callback] = ()) -> L.Trainer:
    t, ckpt = spec.trainer, spec.train.checkpoint
    check_strategy(t)
    _, accumulate = batching(spec, world_size(spec))
    logger = Board(
        save_dir=str(run.path.parent.parent), name=run.path.parent.name, version=run.path.name, default_hp_metric=False
    )
    checkpoints = StepCheckpoints(
        run,
        every_n_train_steps=ckpt.every_n_train_steps,
        every_n_minutes=ckpt.minutes,
        every_n_epochs=ckpt.every_n_epochs,
        keep_last=ckpt.keep_last,
    )
    stopping = spec.train.early_stopping
    slurm = in_slurm_job()
    trainer = L.Trainer(
        **t.model_dump(exclude={"val_check_interval"}),  # Lightning's own arguments, by their names
        # Lightning counts val_check_interval in batches; the experiment counts optimizer steps
        val_check_interval=t.val_check_interval * accumulate if t.val_check_interval else None,
        accumulate_grad_batches=accumulate,
        max_epochs=-1,
        logger=logger,
        enable_checkpointing=False,  # no ModelCheckpoint: StepCheckpoints writes them
        callbacks=[
            checkpoints,
            *([RequeueAtStepEnd(checkpoints)] if slurm else []),
            graph_of(spec).validation_callback(spec),  # what TensorBoard shows of each validation
            *([early_stopping(stopping)] if stopping else []),
            *([ConsoleProgress()] if t.enable_progress_bar else []),
            ProgressFile(run),  # progress.json: what a sweep's console shows of the run
            *callbacks,
        ],
        # in a SLURM job, RequeueAtStepEnd saves and requeues before the time limit, not Lightning
        plugins=[AtomicCheckpointIO(), *([SLURMEnvironment(auto_requeue=False)] if slurm else [])],
        default_root_dir=str(run.checkpoints),
        use_distributed_sampler=False,  # our token-batch sampler splits batches across ranks itself
    )
    logger.trainer = trainer  # the x axis: its steps done
    check_launch(trainer)
    return trainer
