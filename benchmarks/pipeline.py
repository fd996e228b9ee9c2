"""`python benchmarks/train_step.py --pipeline --preset P`: how much of the raw step's speed
`aiayn train` keeps. Both run the same experiment on the same data: the raw step (forward, loss,
backward, Adam on batches already on the device) and builder.train.fit with its data loading,
logging and checkpoints, timed by a callback from step `--warmup` to the end.

Presets: demo (experiments/demo.yaml); multi30k (experiments/multi30k/base.yaml); base (that
Multi30k experiment at the paper's base dims, as the speed issue measured it). The Multi30k
presets read $AIAYN_DATA/multi30k.
"""

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import lightning as L
import torch
from common import ROOT
from train_step import device_name, measure, sync, to_device

from aiayn import load_experiment
from aiayn.builder.data.spec import make_datamodule
from aiayn.builder.model.loss import batch_loss
from aiayn.builder.registry import registry_of
from aiayn.builder.run.rundir import RunDir
from aiayn.builder.train.fit import fit
from aiayn.builder.train.task import TranslationTask
from aiayn.builder.train.trainer import batching, world_size

EXPERIMENTS = {
    "demo": ("demo.yaml", []),
    "multi30k": ("multi30k/base.yaml", []),
    "base": ("multi30k/base.yaml", ["dims.N=6", "dims.d_model=512", "dims.d_ff=2048", "dims.h=8", "dims.d_k=64", "dims.d_v=64"]),
}


class StepTimer(L.Callback):
    """Wall time and tokens from the end of step `skip` to the end of training."""

    def __init__(self, skip: int) -> None:
        self.skip = skip
        self.start: tuple[float, int] | None = None
        self.end: tuple[float, int] | None = None

    def on_train_batch_end(self, trainer: L.Trainer, task: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if trainer.global_step == self.skip and self.start is None:
            sync(task.device)
            self.start = (time.perf_counter(), task.tokens_seen)

    def on_train_end(self, trainer: L.Trainer, task: Any) -> None:
        sync(task.device)
        self.end = (time.perf_counter(), task.tokens_seen)


def raw_step(spec: Any, device: torch.device, batches: list[Any], args: argparse.Namespace) -> float:
    """Tokens per second of forward, loss, backward and Adam as TranslationTask does them."""
    task = TranslationTask(spec.model_dump(mode="json"), registry=registry_of(spec)).to(device).train()
    task.compile_for(device)  # as fit compiles it (train.compile)
    optimizer = torch.optim.Adam(task.model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
    bf16 = spec.trainer.precision.startswith("bf16")

    def step(batch: Any) -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            if task.compiled_loss is not None:
                loss = task.compiled_loss(batch)[0] / batch.n_tgt_tokens
            else:
                loss = (
                    batch_loss(task.model, batch, eps=spec.train.label_smoothing, pad_id=0, loss=task.criterion)[0]
                    / batch.n_tgt_tokens
                )
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    on_device = [to_device(b, device) for b in batches]
    seconds = statistics.median(measure(step, on_device, device, args.warmup, args.steps))
    return statistics.fmean(b.n_src_tokens + b.n_tgt_tokens for b in batches) / seconds


def pipeline(args: argparse.Namespace, device: torch.device) -> None:
    name, dims = EXPERIMENTS[args.preset]
    cuda = device.type == "cuda"
    overrides = [
        *dims, f"trainer.max_steps={args.steps * 10}", "trainer.val_check_interval=null",
        "trainer.enable_progress_bar=false", "train.validation.bleu=false",
        f"trainer.accelerator={'gpu' if cuda else 'cpu'}", "trainer.devices=1",
        f"trainer.precision={'bf16-mixed' if cuda and not args.fp32 else '32-true'}",
        *([f"train.compile={args.mode}"] if args.compile else []),
        *([f"data.static_shapes.num_buckets={args.static_shapes}"] if args.static_shapes else []),
    ]  # fmt: skip
    spec = load_experiment(ROOT / "experiments" / name, overrides)
    with tempfile.TemporaryDirectory() as work:
        run = RunDir(Path(work) / "run" / "version_0")
        data = make_datamodule(spec, Path(work) / "probe", max_tokens=batching(spec, world_size(spec))[0])
        data.setup("fit")
        batches = [b for _, b in zip(range(20), data.train_dataloader())]
        raw = raw_step(spec, device, batches, args)
        timer = StepTimer(args.warmup)
        start = time.perf_counter()
        fit(spec, run, experiment_path=ROOT / "experiments" / name, resume=False, callbacks=[timer])
        total = time.perf_counter() - start
    (t0, n0), (t1, n1) = timer.start, timer.end  # type: ignore[misc]
    end_to_end = (n1 - n0) / (t1 - t0)
    print(f"{args.preset}: {name} {' '.join(dims)}; {device} ({device_name(device)}), {spec.trainer.precision}, compile {spec.train.compile}, static shapes {spec.data.static_shapes}; "
          f"{spec.trainer.max_steps} steps of {spec.train.tokens_per_step} tokens per side")  # fmt: skip
    print("| measure | tokens/s (src + tgt) |")
    print("|---|---:|")
    print(f"| raw step (median of {args.steps}) | {raw:,.0f} |")
    print(f"| aiayn train, steps {args.warmup}-{spec.trainer.max_steps} | {end_to_end:,.0f} |")
    print(f"| pipeline efficiency | {100 * end_to_end / raw:.0f}% |")
    print(f"whole `fit` (start-up, final evaluation included): {total:.1f} s")
