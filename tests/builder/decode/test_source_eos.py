"""model.source_eos (fairseq's and Marian's sources end with </s>): the model records the token,
and every decoder and scorer appends it to what the encoder reads, exactly as if it were given."""

import torch

from aiayn.builder.decode.metrics import perplexity, teacher_forced
from aiayn.builder.decode.translate import translate_ids, with_source_eos
from aiayn.builder.model.build import build_model
from aiayn.schemas.decode import DecodeSpec
from tests.conftest import EXPERIMENTS, load_experiment

SMALL = ["dims.vocab_size=40", "dims.d_model=16", "dims.d_ff=24", "dims.h=4", "dims.d_k=4", "dims.d_v=6", "dims.N=2"]
SOURCES = [[5, 9, 11], [], [7], [30, 31, 32, 33, 34]]
TARGETS = [[6, 7], [8], [9, 10, 11], [12]]


def models() -> tuple[torch.nn.Module, torch.nn.Module]:
    """The same weights with and without model.source_eos."""
    torch.manual_seed(0)
    plain = build_model(load_experiment(EXPERIMENTS / "base.yaml", SMALL)).eval()
    with_eos = build_model(load_experiment(EXPERIMENTS / "base.yaml", [*SMALL, "model.source_eos=true"])).eval()
    with_eos.load_state_dict(plain.state_dict())
    return plain, with_eos


def test_a_model_with_source_eos_reads_its_sources_followed_by_it():
    plain, with_eos = models()
    assert (plain.source_eos_id, with_eos.source_eos_id) == (None, 2)
    assert sum(p.numel() for p in with_eos.parameters()) == sum(p.numel() for p in plain.parameters())  # no parameter
    assert with_source_eos(with_eos, SOURCES) == [[5, 9, 11, 2], [], [7, 2], [30, 31, 32, 33, 34, 2]]  # empty stays empty
    assert with_source_eos(plain, SOURCES) is SOURCES
    for decode in (DecodeSpec(beam=1, max_len_b=4), DecodeSpec(beam=3, max_len_b=4)):
        ours = translate_ids(with_eos, SOURCES, decode, bos_id=1, eos_id=2)
        assert ours == translate_ids(plain, with_source_eos(with_eos, SOURCES), decode, bos_id=1, eos_id=2)
    given = [s for s in SOURCES if s]
    targets = [t for s, t in zip(SOURCES, TARGETS) if s]
    ppl = perplexity(with_eos, teacher_forced(given, targets, 100, source_eos=2))
    assert ppl == perplexity(plain, teacher_forced([[*s, 2] for s in given], targets, 100))
    assert ppl != perplexity(plain, teacher_forced(given, targets, 100))
