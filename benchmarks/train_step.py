"""One training step (forward, loss, backward, Adam) of aiayn against torch.nn.Transformer and
Hugging Face's MarianMTModel at the same sizes, in one process, on the same batches.

    python benchmarks/train_step.py --preset demo|multi30k|base [--device cpu|cuda] [--steps 20]
    python benchmarks/train_step.py --preset base --compile   # + aiayn compiled as train.compile, its recompilations
    python benchmarks/train_step.py --preset multi30k --compile --static-shapes 6 --mode reduce-overhead
        # batches as data.static_shapes makes them (6 buckets), compiled as train.compile=reduce-overhead compiles them
    python benchmarks/train_step.py --pipeline --preset multi30k   # `aiayn train` vs its raw step
    python benchmarks/train_step.py --preset base --profile 15   # + torch.profiler's top 15 kernels of aiayn's step

Every model gets one shared, scaled embedding matrix tied to the output projection, sinusoidal
positions, post-norm layers with ReLU, dropout 0.1, Adam(0.9, 0.98, 1e-9), and label smoothing
0.1 over the V-1 other classes (the references use PyTorch's cross_entropy with
label_smoothing = eps * V / (V - 1), which is the same loss). aiayn's step is `aiayn train`'s
(builder.model.loss.batch_loss: logits for the non-padding targets only); the references project
every position, as their own training loops do. The batches hold about `tokens` source and
`tokens` target tokens of random lengths around `length`, padded as the collator pads. The
contenders take turns, a step each, so that a machine whose speed drifts slows all alike.

Prints ms per step (median), tokens per second (source + target, padding excluded), TFLOP/s
(FLOPs of one step counted by torch.utils.flop_counter.FlopCounterMode), MFU against the
device's dense peak (bf16 on CUDA), peak memory, and every row's speed relative to aiayn eager.
With --pipeline: `aiayn train` (builder.train.fit, real data, logging and checkpoints on) timed
by a callback after a warm-up, against the raw step on the same batches.
"""

import argparse
import contextlib
import logging
import math
import platform
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from common import BOS, EOS, PAD, aiayn_model
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from aiayn.blocks import SinusoidalPositionalEncoding
from aiayn.builder.data.buckets import StaticCollator, bucket_of, bucket_shapes, bucket_widths
from aiayn.builder.data.collate import Batch, TranslationCollator
from aiayn.builder.data.dataset import Example
from aiayn.builder.data.sampler import TokenBatchSampler
from aiayn.builder.model.loss import batch_loss, smoothed_nll_fusable
from aiayn.builder.train.compiled import CUDA_GRAPH_MODES, CompiledAdam, StaticStepLoss, compile_mode

PRESETS = {
    # d_model, heads, layers, d_ff, vocab; tokens per side per step, mean sentence length
    "base": dict(d_model=512, heads=8, layers=6, d_ff=2048, vocab=37000, tokens=25000, length=27),
    "multi30k": dict(d_model=256, heads=8, layers=3, d_ff=1024, vocab=8000, tokens=6000, length=14),
    "demo": dict(d_model=128, heads=4, layers=2, d_ff=512, vocab=1000, tokens=4000, length=11),
}
PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L40S": 362.0, "A10": 125.0}  # dense bf16
EPS = 0.1


def batches(preset: dict, n: int, seed: int = 0, num_buckets: int | None = None, packed: bool = True) -> list[Batch]:
    """`n` training batches as `aiayn train` makes them: a corpus of random sentences (lengths
    uniform in [length/2, 3 length/2]) packed by the token-budget sampler (~tokens per side);
    with `num_buckets`, as data.static_shapes makes them (at least one batch of each shape; `packed`
    false: the encoder and decoder compute every position)."""
    rng = np.random.default_rng(seed)
    lo, hi, vocab = preset["length"] // 2, 3 * preset["length"] // 2, preset["vocab"]
    pairs = 40 * preset["tokens"] // preset["length"]
    src, tgt = rng.integers(lo, hi + 1, pairs), rng.integers(lo, hi + 1, pairs)
    collate = TranslationCollator(pad_id=PAD, bos_id=BOS, eos_id=EOS)
    if num_buckets is None:
        chosen = list(TokenBatchSampler(src, tgt + 1, max_tokens=preset["tokens"], seed=seed))[:n]
    else:
        widths = bucket_widths(np.maximum(src, tgt + 1), num_buckets=num_buckets, boundaries=None)
        sampler = TokenBatchSampler(src, tgt + 1, max_tokens=preset["tokens"], seed=seed, buckets=widths)
        collate = StaticCollator(
            bucket_shapes(sampler.batches, src, tgt + 1, widths, preset["tokens"], packed=packed),
            pad_id=PAD,
            bos_id=BOS,
            eos_id=EOS,
        )
        every = list(sampler)
        first = {int(bucket_of(np.asarray([max(src[b].max(), tgt[b].max() + 1)]), widths)[0]): b for b in reversed(every)}
        chosen = [*first.values(), *every][: max(n, len(first))]  # each shape, then the epoch's order
    out = []
    for ids in chosen:
        examples = [
            Example(i, rng.integers(3, vocab, src[i], dtype=np.int32), rng.integers(3, vocab, tgt[i], dtype=np.int32))
            for i in ids
        ]
        out.append(collate(examples))
    return out


class TorchTransformer(nn.Module):
    """torch.nn.Transformer with the paper's embeddings: shared, scaled, sinusoids, tied output."""

    def __init__(self, *, d_model: int, heads: int, layers: int, d_ff: int, vocab: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.positions = SinusoidalPositionalEncoding(d_model=d_model)
        self.dropout = nn.Dropout(0.1)
        self.core = nn.Transformer(d_model, heads, layers, layers, d_ff, dropout=0.1, batch_first=True)
        self.scale = math.sqrt(d_model)

    def inputs(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.embed(tokens) * self.scale + self.positions(tokens.size(1)))

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        causal = torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool, device=tgt.device).triu(1)
        y = self.core(
            self.inputs(src), self.inputs(tgt), tgt_mask=causal, tgt_is_causal=True,
            src_key_padding_mask=src.eq(PAD), tgt_key_padding_mask=tgt.eq(PAD), memory_key_padding_mask=src.eq(PAD),
        )  # fmt: skip
        return F.linear(y, self.embed.weight)


def marian(*, d_model: int, heads: int, layers: int, d_ff: int, vocab: int) -> nn.Module | None:
    try:
        from transformers import MarianConfig, MarianMTModel
    except ImportError:
        return None
    config = MarianConfig(
        vocab_size=vocab, decoder_vocab_size=vocab, d_model=d_model, encoder_layers=layers, decoder_layers=layers,
        encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=d_ff, decoder_ffn_dim=d_ff,
        activation_function="relu", dropout=0.1, attention_dropout=0.0, activation_dropout=0.0,
        max_position_embeddings=1024, scale_embedding=True, pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS,
        decoder_start_token_id=BOS, share_encoder_decoder_embeddings=True, tie_word_embeddings=True,
    )  # fmt: skip
    model = MarianMTModel(config)

    class Wrapped(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
            out = self.model(input_ids=src, attention_mask=src.ne(PAD), decoder_input_ids=tgt, decoder_attention_mask=tgt.ne(PAD))
            return out.logits

    return Wrapped()


def torch_loss(model: nn.Module, batch: Batch) -> torch.Tensor:
    """The summed loss of a batch as the references compute it: logits of every position."""
    logits = model(batch.src, batch.tgt_in)
    V = logits.size(-1)
    return F.cross_entropy(
        logits.float().flatten(0, 1),
        batch.tgt_out.flatten(),
        ignore_index=PAD,
        label_smoothing=EPS * V / (V - 1),
        reduction="sum",
    )


def aiayn_loss(model: nn.Module, batch: Batch) -> torch.Tensor:
    """The summed loss of a batch as `aiayn train` computes it."""
    return batch_loss(model, batch, eps=EPS, pad_id=PAD)[0]


@dataclass
class Contender:
    name: str
    model: nn.Module
    loss: Callable[[nn.Module, Batch], torch.Tensor]
    # a compiled contender's FLOPs are its eager twin's: tracing it under FlopCounterMode's
    # dispatch mode would leave its frames to run eager for good
    flops_of: str | None = None
    compiled_update: dict | None = None  # torch.compile's options for Adam's update (CUDA graphs), else fused Adam


def make_step(c: Contender, device: torch.device, bf16: bool) -> Callable[[Batch], None]:
    c.model.to(device).train()
    adam = dict(lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    if c.compiled_update is not None:
        optimizer: torch.optim.Optimizer = CompiledAdam(c.model.parameters(), compile_options=c.compiled_update, **adam)
    else:
        optimizer = torch.optim.Adam(c.model.parameters(), **adam, fused=True)

    def step(batch: Batch) -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = c.loss(c.model, batch) / batch.n_tgt_tokens
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def to_device(batch: Batch, device: torch.device) -> Batch:
    return batch._replace(**{k: v.to(device) for k, v in batch._asdict().items() if isinstance(v, torch.Tensor)})


def flops_of(c: Contender, batch: Batch, device: torch.device, bf16: bool) -> int:
    counter = FlopCounterMode(display=False)
    with counter, torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
        c.loss(c.model, batch).backward()
    c.model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def measure(step: Callable[[Batch], None], data: list[Batch], device: torch.device, warmup: int, steps: int) -> list[float]:
    return measure_interleaved({"": step}, data, device, warmup, steps)[""]


def measure_interleaved(
    steps: dict[str, Callable[[Batch], None]], data: list[Batch], device: torch.device, warmup: int, n: int
) -> dict[str, list[float]]:
    """Seconds of each of `n` steps of every contender, taken in turns (one step of each, then the
    next batch), so that a machine whose speed drifts (a shared VM, clocks) slows all alike."""
    for step in steps.values():
        for i in range(warmup):
            step(data[i % len(data)])
    times: dict[str, list[float]] = {name: [] for name in steps}
    for i in range(n):
        for name, step in steps.items():
            sync(device)
            start = time.perf_counter()
            step(data[i % len(data)])
            sync(device)
            times[name].append(time.perf_counter() - start)
    return times


class _Counter(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


@contextlib.contextmanager
def counting_recompiles() -> Iterator[_Counter]:
    """Counts TorchDynamo's recompilations (a frame compiled again after a guard failed, e.g. a
    new batch shape) through its documented `recompiles` log, one record per recompilation."""
    torch._logging.set_logs(recompiles=True)
    logger = logging.getLogger("torch._dynamo.guards.__recompiles")
    counter, handlers, propagate = _Counter(), logger.handlers, logger.propagate
    logger.handlers, logger.propagate = [counter], False  # counted, not printed
    try:
        yield counter
    finally:
        logger.handlers, logger.propagate = handlers, propagate
        torch._logging.set_logs()


def shapes(batch: Batch) -> tuple:
    return tuple(v.shape for v in batch if isinstance(v, torch.Tensor))


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's model and the vector ISA torch's kernels use (AVX2, AVX512, ...):
    CPU timings differ several-fold between machines, so a number travels with its machine."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), platform.processor())
    return f"{model or 'CPU'}, {torch.backends.cpu.get_cpu_capability()}"


def peak_tflops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_TFLOPS.items() if k in name), None)


def contenders(preset: dict, args: argparse.Namespace, device: torch.device) -> list[Contender]:
    sizes = {k: preset[k] for k in ("d_model", "heads", "layers", "d_ff", "vocab")}
    torch.manual_seed(0)
    found = [Contender("aiayn eager", aiayn_model(**sizes), aiayn_loss)]
    if args.compile:  # as train.compile compiles them
        compiled = aiayn_model(**sizes)
        compiled.load_state_dict(found[0].model.state_dict())
        mode, note = compile_mode(args.mode, device)
        if note:
            print(note)
        if args.static_shapes:  # the step's loss in one function, a graph per shape
            step_loss = StaticStepLoss(compiled, eps=EPS, pad_id=PAD, fused=False, mode=mode)
            update = {"mode": mode} if device.type == "cuda" and mode in CUDA_GRAPH_MODES else None
            found.append(
                Contender(f"aiayn compiled ({mode})", compiled, lambda model, batch: step_loss(batch)[0], "aiayn eager", update)
            )
        else:  # the model and the loss; dynamic shapes, unless --static
            compiled.compile(dynamic=not args.static, mode=mode)
            fused = torch.compile(smoothed_nll_fusable, dynamic=not args.static, mode=mode)
            found.append(
                Contender(
                    f"aiayn compiled ({mode})",
                    compiled,
                    lambda model, batch: batch_loss(model, batch, eps=EPS, pad_id=PAD, loss=fused)[0],
                    flops_of="aiayn eager",
                )
            )
    found.append(Contender("torch.nn.Transformer", TorchTransformer(**sizes), torch_loss))
    if not args.no_marian and (hf := marian(**sizes)) is not None:
        found.append(Contender("transformers Marian", hf, torch_loss))
    return found


def raw_steps(args: argparse.Namespace, device: torch.device) -> None:
    preset = PRESETS[args.preset]
    bf16 = device.type == "cuda" and not args.fp32
    data = [to_device(b, device) for b in batches(preset, 8, num_buckets=args.static_shapes, packed=not args.every_position)]
    tokens = statistics.fmean(b.n_src_tokens + b.n_tgt_tokens for b in data)
    peak = peak_tflops(device)
    steps, flops, memory = {}, {}, {}
    with counting_recompiles() as recompiles:
        for c in contenders(preset, args, device):
            if device.type == "cuda":  # each contender's own peak: what the ones set up before it hold is left out
                others = torch.cuda.memory_allocated(device)
                torch.cuda.reset_peak_memory_stats(device)
            steps[c.name] = make_step(c, device, bf16)
            flops[c.name] = flops[c.flops_of] if c.flops_of else flops_of(c, data[0], device, bf16)
            if device.type == "cuda":
                steps[c.name](data[0])
                memory[c.name] = (torch.cuda.max_memory_allocated(device) - others) / 2**30
        warmup = max(args.warmup, len({shapes(b) for b in data}))  # every shape compiled before the timing
        measure_interleaved(steps, data, device, warmup, 0)
        compiled_in_warmup = recompiles.count
        times = measure_interleaved(steps, data, device, 0, args.steps)
    rows = [(name, 1000 * statistics.median(times[name]), flops[name], memory.get(name)) for name in steps]
    print(f"preset {args.preset}: {preset}; {device} ({device_name(device)}, "
          f"{torch.get_num_threads()} threads), {'bf16 autocast' if bf16 else 'fp32'}, torch {torch.__version__}; "
          f"{tokens:.0f} tokens per step (src + tgt, no padding); median of {args.steps} steps after {args.warmup}, the contenders in turns")  # fmt: skip
    print("| model | ms/step | tokens/s | TFLOP/s | MFU | peak GiB | speed vs aiayn eager |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    base_ms = rows[0][1]
    for name, ms, flops, memory in rows:
        tflops = flops / (ms / 1000) / 1e12
        mfu = f"{100 * tflops / peak:.1f}%" if peak else "-"
        mem = f"{memory:.1f}" if memory is not None else "-"
        print(f"| {name} | {ms:.1f} | {tokens / (ms / 1000):,.0f} | {tflops:.3g} | {mfu} | {mem} | {base_ms / ms:.2f}x |")
    if args.profile:
        name = "aiayn compiled" if args.compile else "aiayn eager"
        profile(next(step for n, step in steps.items() if n.startswith(name)), data, device, args.profile)
    if args.compile:
        how = f"static shapes, {args.static_shapes} buckets" if args.static_shapes else f"dynamic={not args.static}"
        print(f"aiayn compiled ({how}): {len({shapes(b) for b in data})} distinct batch shapes over {len(data)} batches; "
              f"recompilations after the first compilation: {compiled_in_warmup} in the warm-up ({warmup} steps), "
              f"{recompiles.count - compiled_in_warmup} in the {args.steps} timed steps")  # fmt: skip


def profile(step: Callable[[Batch], None], data: list[Batch], device: torch.device, top: int) -> None:
    """torch.profiler over 4 steps: the `top` kernels (CUDA) or operators (CPU) by their own time,
    what the step's time goes to."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if device.type == "cuda" else [])]
    with profiler(activities=activities) as prof:
        for i in range(4):
            step(data[i % len(data)])
        sync(device)
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(f"torch.profiler, 4 steps, by {key}:")
    print(prof.key_averages().table(sort_by=key, row_limit=top, max_name_column_width=60))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", choices=sorted(PRESETS), default="demo")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, help="CPU threads (default: torch's)")
    p.add_argument("--fp32", action="store_true", help="fp32 on CUDA too (default there: bf16 autocast)")
    p.add_argument("--compile", action="store_true", help="add aiayn compiled (torch.compile)")
    p.add_argument("--static", action="store_true", help="compile with dynamic=False (default: dynamic=True, as train.compile)")
    p.add_argument("--static-shapes", type=int, metavar="BUCKETS", help="batches of data.static_shapes with this many buckets")
    p.add_argument("--every-position", action="store_true", help="with --static-shapes: data.static_shapes.packed false")
    p.add_argument("--mode", default="default", help="torch.compile's mode for --compile (train.compile's value)")
    p.add_argument("--profile", type=int, metavar="TOP", help="profile aiayn's step (compiled where --compile): the TOP kernels")
    p.add_argument("--no-marian", action="store_true")
    p.add_argument("--pipeline", action="store_true", help="aiayn train end to end against its raw step")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if args.pipeline:
        from pipeline import pipeline

        pipeline(args, device)
    else:
        raw_steps(args, device)


if __name__ == "__main__":
    main()
