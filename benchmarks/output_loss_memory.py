"""Peak memory of a training step with the output projection and the loss apart (the batch's
(n, V) logits held), together in chunks (train.fused_output_loss), and apart with each layer's
activations recomputed in backward (train.activation_checkpointing), and their step times.

    python benchmarks/output_loss_memory.py [--preset base] [--tokens 3125] [--steps 3]

Each mode runs in a fresh process (peak RSS cannot be reset); the number reported is the rise of
the peak RSS over the training steps (forward, backward, Adam and its state) above what the built
model and the batches held before them. On a GPU it reports torch.cuda.max_memory_allocated.
"""

import argparse
import json
import resource
import subprocess
import sys
import time

import torch
from common import PAD, aiayn_model
from train_step import PRESETS, batches, to_device

from aiayn.builder.model.loss import batch_loss

EPS = 0.1


MODES = ("apart", "fused", "checkpointed")


def one_mode(preset: str, tokens: int, steps: int, mode: str, device: str) -> dict:
    torch.manual_seed(0)
    sizes = {k: PRESETS[preset][k] for k in ("d_model", "heads", "layers", "d_ff", "vocab")}
    dev = torch.device(device)
    model = aiayn_model(**sizes).to(dev)
    fused = mode == "fused"
    for stack in model.stacks().values():
        stack.checkpointing = mode == "checkpointed"  # as train.activation_checkpointing sets it
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
    data = [to_device(b, dev) for b in batches({**PRESETS[preset], "tokens": tokens}, steps + 1)]
    step = lambda b: (
        batch_loss(model, b, eps=EPS, pad_id=PAD, fused=fused)[0].backward(),
        optimizer.step(),
        optimizer.zero_grad(),
    )  # noqa: E731
    if dev.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    step(data[0])  # a first step: Adam's state (the same in both modes), the allocator's pools
    start = time.perf_counter()
    for b in data[1:]:
        step(b)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / steps
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    peak = torch.cuda.max_memory_allocated() if dev.type == "cuda" else after - before
    targets = int(sum(int((b.tgt_out != PAD).sum()) for b in data[1:]) / steps)
    return {"mode": mode, "peak_bytes": peak, "s_per_step": seconds, "targets": targets}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", choices=sorted(PRESETS), default="base")
    p.add_argument("--tokens", type=int, default=3125, help="tokens per side of a batch (base: the paper's 25k over 8 GPUs)")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)  # a child process's one mode
    args = p.parse_args()
    if args.mode:
        print(json.dumps(one_mode(args.preset, args.tokens, args.steps, args.mode, args.device)))
        return
    rows = []
    for mode in MODES:
        argv = [
            sys.executable,
            __file__,
            "--preset",
            args.preset,
            "--tokens",
            str(args.tokens),
            "--steps",
            str(args.steps),
            "--device",
            args.device,
            "--mode",
            mode,
        ]
        rows.append(json.loads(subprocess.run(argv, check=True, capture_output=True, text=True).stdout))
    V = PRESETS[args.preset]["vocab"]
    print(
        f"preset {args.preset} (V = {V}), {args.tokens} tokens per side, ~{rows[0]['targets']} targets a step, {args.device}, torch {torch.__version__}"
    )
    what = "peak RSS rise over the steps" if args.device == "cpu" else "max_memory_allocated"
    for r in rows:
        print(f"  {r['mode']:12}  {what}: {r['peak_bytes'] / 2**20:8.1f} MiB   {r['s_per_step'] * 1000:8.1f} ms/step")
    apart = rows[0]
    for r in rows[1:]:
        ratio = r["peak_bytes"] / apart["peak_bytes"] if apart["peak_bytes"] else float("nan")
        print(f"  {r['mode']} / apart: memory {ratio:.2f}x, time {r['s_per_step'] / apart['s_per_step']:.2f}x")
    print(f"  the logits alone: {apart['targets'] * V * 4 / 2**20:.1f} MiB in fp32")


if __name__ == "__main__":
    main()
