"""The decoding loop and the training step of this checkout against an earlier commit's, in one
process: the cached beam search of --commit's builder/decode/loop.py and search.py (read with `git
show`, loaded beside today's) and of today's, on the same model and sources; and a training step
(forward, backward, Adam) with --commit's InputEmbedding.forward (blocks/input.py) and with
today's. The two searches must give the same hypotheses. Prints the medians of interleaved rounds
(CPU seconds of this process) and today's time over the commit's.

    python benchmarks/before_after.py [--commit 120ea1a] [--d-model 512 --layers 6 --rounds 7 --threads 1]

Needs a git checkout (the commit's files are read from the repository).
"""

import argparse
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

import torch
from common import BOS, EOS, experiment, interleaved_medians

from aiayn.blocks import InputEmbedding
from aiayn.builder.decode.search import beam_search
from aiayn.builder.model.build import build_model
from aiayn.builder.model.loss import smoothed_nll_chunked

ROOT = Path(__file__).resolve().parents[1]


def module_at(commit: str, path: str, name: str, replace: dict[str, str] | None = None) -> types.ModuleType:
    """The file `path` as it was at `commit`, loaded as module `name` (its imports of aiayn's modules
    resolve to today's, but for those `replace` renames)."""
    source = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for old, new in (replace or {}).items():
        source = source.replace(old, new)
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses look their module up
    exec(compile(source, f"{commit}:{path}", "exec"), module.__dict__)
    return module


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--commit", default="120ea1a")
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--sentences", type=int, default=8)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    loop = module_at(a.commit, "builder/decode/loop.py", "before_loop")
    search = module_at(a.commit, "builder/decode/search.py", "before_search", {"aiayn.builder.decode.loop": "before_loop"})
    embedding = module_at(a.commit, "blocks/input.py", "before_input")
    sizes = dict(d_model=a.d_model, heads=8, layers=a.layers, d_ff=4 * a.d_model, vocab=a.vocab)
    model = build_model(experiment(**sizes).model).eval()
    src = torch.randint(3, a.vocab, (a.sentences, 20))
    settings = dict(bos_id=BOS, eos_id=EOS, beam=4, max_len_b=30)
    hyps = {"before": search.beam_search(model, src, **settings), "today": beam_search(model, src, **settings)}
    assert hyps["before"] == hyps["today"], "the two searches differ"
    assert loop.run_loop is not sys.modules["aiayn.builder.decode.loop"].run_loop
    decoding = interleaved_medians(
        {"before": lambda: search.beam_search(model, src, **settings), "today": lambda: beam_search(model, src, **settings)},
        a.rounds,
        time.process_time,
    )
    model.train()
    adam = torch.optim.Adam(model.parameters(), lr=1e-5)
    batch = torch.randint(3, a.vocab, (32, 40))
    today_forward = InputEmbedding.forward

    def step(forward: Callable) -> Callable[[], None]:
        def go() -> None:
            InputEmbedding.forward = forward  # type: ignore[method-assign]
            try:
                logits = model(batch, batch[:, :-1])
                loss, _, n = smoothed_nll_chunked(logits, batch[:, 1:], eps=0.1, pad_id=0)
                (loss / n).backward()
                adam.step()
                adam.zero_grad(set_to_none=True)
            finally:
                InputEmbedding.forward = today_forward  # type: ignore[method-assign]

        return go

    training = interleaved_medians(
        {"before": step(embedding.InputEmbedding.forward), "today": step(today_forward)}, a.rounds, time.process_time
    )
    print(f"--commit {a.commit} against this checkout; d_model {a.d_model}, {a.layers} layers, V {a.vocab}, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}; median CPU s of {a.rounds} interleaved rounds")  # fmt: skip
    print("| | before | today | today / before |\n|---|---:|---:|---:|")
    for name, t in (("cached beam search (beam 4, 8 sentences)", decoding), ("training step (32 x 40 tokens)", training)):
        print(f"| {name} | {t['before']:.3f} | {t['today']:.3f} | {t['today'] / t['before']:.3f} |")


if __name__ == "__main__":
    main()
