"""decode_memory (builder/model/size.py), the upper bound `aiayn serve --max-batch-memory-gb` holds a
request to: its closed form, and a bound that holds for the caches a real decoding keeps."""

import torch

from aiayn.builder.model.build import build_model
from aiayn.builder.model.size import decode_memory
from tests.conftest import EXPERIMENTS, load_experiment

SMALL = ["dims.vocab_size=50", "dims.d_model=16", "dims.d_ff=24", "dims.h=2", "dims.d_k=8", "dims.d_v=8", "dims.N=2"]


def test_the_closed_form():
    spec = load_experiment(EXPERIMENTS / "base.yaml", SMALL).model
    # 2 encoder layers of 2 sub-layers, 2 decoder layers of 3: 10 sub-layers, keys and values of 16 each a position
    per_row = 7 * 10 * 2 * 16 + 3 * 50
    assert decode_memory(spec, rows=3, positions=7) == 4 * 3 * per_row
    lm = load_experiment(EXPERIMENTS / "lm" / "demo.yaml", SMALL).model
    layers = sum(times * len(subs) for stack in lm.stacks.values() for _, subs, times, _ in stack.groups)
    assert decode_memory(lm, rows=1, positions=1) == 4 * (2 * lm.d_model * layers + 3 * lm.embedding.vocab_size)


def test_it_bounds_the_caches_a_decoding_keeps():
    """The DecoderState of a beam search of 4 over 3 sources after 6 steps holds fewer bytes than the bound."""
    spec = load_experiment(EXPERIMENTS / "base.yaml", SMALL).model
    model = build_model(spec).eval()
    src = torch.randint(4, 50, (3 * 4, 5))
    memory, pad = model.encode(src)
    state = model.init_state()
    tokens = torch.full((12, 1), 1)
    with torch.no_grad():
        for _ in range(6):
            logits = model.decode(tokens[:, -1:], memory, pad, state)[:, -1]
            tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], 1)
    kept = sum(t.numel() * t.element_size() for t in _tensors(state)) + memory.numel() * 4
    assert 0 < kept <= decode_memory(spec, rows=12, positions=5 + 6)


def _tensors(value, seen=None):
    seen = set() if seen is None else seen
    if isinstance(value, torch.Tensor):
        if id(value) not in seen:
            seen.add(id(value))
            yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v, seen)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v, seen)
    elif hasattr(value, "__dict__"):
        for v in vars(value).values():
            yield from _tensors(v, seen)
