"""The registry covers every schema type; closed-form counts equal the built model's."""

import pytest
import torch

from aiayn.builder.model.build import build_model
from aiayn.builder.model.size import count_params, flops_per_token, param_table
from aiayn.builder.model.summary import paper_columns
from aiayn.schemas.slots import SLOTS
from tests.conftest import EXPERIMENTS, load_experiment, registry

SMALL = ["dims.vocab_size=50", "dims.d_model=16", "dims.d_ff=24", "dims.h=2", "dims.d_k=5", "dims.d_v=3", "dims.N=2"]


def small(*overrides):
    return load_experiment(EXPERIMENTS / "base.yaml", [*SMALL, *overrides])


def subclasses(cls):
    return [c for sub in cls.__subclasses__() for c in (sub, *subclasses(sub))]


def test_every_spec_of_a_slot_is_registered_with_its_builder():
    builtin = registry()  # aiayn's own blocks: their spec modules are imported by then
    for slot in SLOTS.values():
        ours = [c for c in subclasses(slot.base) if c.__module__.startswith("aiayn.") and "type" in c.model_fields]
        assert ours, slot.name
        for cls in ours:
            assert builtin.classes(slot.name)[cls.model_fields["type"].default] is cls
            assert builtin.registration(cls).slot == slot.name


VARIANTS = [
    [],
    ["model.embedding.share=none"],
    ["model.embedding.share=target_output", "model.embedding.shared_vocab=false"],
    ["model.embedding.output_bias=true"],
    ["model.encoder.add_norm.placement=pre", "model.decoder.add_norm.placement=pre"],
    ["model.encoder.final_norm=true"],
    ["model.positional.type=learned", "model.positional.max_len=300"],
    ["model.encoder.layer[0].bias=false", "model.decoder.layer[2].bias=false"],
    [
        "model.encoder.layer[1].type=self_attention",
        "model.encoder.layer[1].h=1",
        "model.encoder.layer[1].d_k=4",
        "model.encoder.layer[1].d_v=6",
    ],
    ["model.decoder.num_layers=3", "model.decoder.overrides={1: [{type: cross_attention, h: 1, d_k: 4, d_v: 4}]}"],
]


@pytest.mark.parametrize("overrides", VARIANTS, ids=lambda o: " ".join(o) or "paper")
def test_count_equals_numel(overrides):
    spec = small(*overrides).model
    model = build_model(spec)
    assert count_params(spec) == sum(p.numel() for p in model.parameters())
    assert count_params(spec) == sum(each * n for _, each, n in param_table(spec))


def test_pre_norm_adds_one_final_norm_per_stack():
    post, pre = small().model, small("model.encoder.add_norm.placement=pre", "model.decoder.add_norm.placement=pre").model
    assert count_params(pre) - count_params(post) == 2 * (2 * 16)
    assert build_model(pre).encoder.final_norm is not None and build_model(post).encoder.final_norm is None


def test_sharing_all_is_one_matrix():
    model = build_model(small().model)
    assert model.src_embed.token.table.weight is model.tgt_embed.token.table.weight
    assert model.generator.weight is model.tgt_embed.token.table.weight


def test_a_heterogeneous_stack_is_not_uniform():
    spec = small("model.encoder.overrides={0: [{type: self_attention, h: 4, d_k: 2, d_v: 2}, {type: feed_forward, d_ff: 8}]}")
    columns = paper_columns(spec)
    assert columns["h"] == 4 and columns["d_ff"] == 8 and columns["uniform"] is False  # the first layer's
    assert "uniform" not in paper_columns(small())


def test_flops_closed_form():
    spec = small().model
    d, dff, h, dk, dv, V, L = 16, 24, 2, 5, 3, 50, 10
    projections = 2 * (d * h * (2 * dk + dv) + h * dv * d)
    ffn = 4 * d * dff
    attention = lambda keys: projections + 2 * h * (dk + dv) * keys
    per_layer = (attention(L) + ffn) + (attention((L + 1) / 2) + attention(L) + ffn)
    assert flops_per_token(spec, L) == pytest.approx(2 * (per_layer) + 2 * d * V)


def test_init_zeroes_padding_and_keeps_ties():
    model = build_model(small().model)
    assert torch.count_nonzero(model.src_embed.token.table.weight[0]) == 0
