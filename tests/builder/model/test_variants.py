"""Each variant after 2017 wherever a model goes: exact parameter counts (meta-built), cached
decoding that gives the full forward's logits at every step, packed rows that give the padded
ones, one compiled graph that gives eager's loss and gradients, a training step."""

import numpy as np
import pytest
import torch

from aiayn.builder.data.collate import TranslationCollator
from aiayn.builder.data.dataset import Example
from aiayn.builder.errors import UserError
from aiayn.builder.model.build import build_model
from aiayn.builder.model.loss import batch_loss
from aiayn.builder.model.size import count_params, param_table
from tests.conftest import EXPERIMENTS, load_experiment

SMALL = [
    "dims.vocab_size=40",
    "dims.d_model=16",
    "dims.d_ff=24",
    "dims.h=4",
    "dims.d_k=4",
    "dims.d_v=6",
    "dims.N=2",
    "dims.P_drop=0.0",
]
BOTH = ("encoder", "decoder")
FFN = {"encoder": 1, "decoder": 2}
VARIANTS = {
    "rms_norm": [f"model.{s}.add_norm.norm.type=rms_norm" for s in BOTH],
    "pre_rms_norm": [f"model.{s}.add_norm.{k}" for s in BOTH for k in ("norm.type=rms_norm", "placement=pre")],
    **{
        name: [o for s in BOTH for o in (f"model.{s}.layer[{FFN[s]}].type=gated_feed_forward", f"model.{s}.layer[{FFN[s]}].activation={act}")]
        for name, act in (("swiglu", "silu"), ("geglu", "gelu"), ("reglu", "relu"))
    },
    "rope": ["model.positional=none", "model.encoder.layer[0].rotary={fraction: 1.0}", "model.decoder.layer[0].rotary={fraction: 0.5, base: 100}"],
    "alibi": ["model.positional=none", *(f"model.{s}.position_bias={{type: alibi}}" for s in BOTH)],
    "t5": ["model.positional=none", *(f"model.{s}.position_bias={{type: t5, num_buckets: 8, max_distance: 12}}" for s in BOTH)],
    "alibi_t5": ["model.positional=none", *(f"model.{s}.position_bias={{type: sum, biases: [{{type: alibi}}, {{type: t5, num_buckets: 8, "
                 "max_distance: 12}]}" for s in BOTH)],
    "gqa": ["model.encoder.layer[0].kv_heads=2", "model.decoder.layer[0].kv_heads=1", "model.decoder.layer[1].kv_heads=2"],
    "qk_norm": [f"model.{s}.layer[0].qk_norm=true" for s in BOTH] + ["model.decoder.layer[1].qk_norm=true"],
    "window": ["model.decoder.layer[0]={type: sliding_window_attention, h: 4, d_k: 4, d_v: 6, window: 2}"],
    "window_alibi_qk_rope": [
        "model.positional=none", "model.decoder.layer[0]={type: sliding_window_attention, h: 4, d_k: 4, d_v: 6, window: 3, qk_norm: true, "
        "rotary: {fraction: 1.0}}", "model.decoder.position_bias={type: alibi}", "model.decoder.layer[1].qk_norm=true",
    ],
    "softcap": [f"model.{s}.layer[{i}].softcap=0.5" for s, i in (("encoder", 0), ("decoder", 0), ("decoder", 1))],
    "sigmoid": [f"model.{s}.layer[{i}].score={{type: sigmoid}}" for s, i in (("encoder", 0), ("decoder", 0), ("decoder", 1))],
    "sigmoid_fixed_softcap_alibi_window_gqa": [
        "model.positional=none", "model.decoder.layer[0]={type: sliding_window_attention, h: 4, d_k: 4, d_v: 6, window: 3, kv_heads: 2, "
        "softcap: 0.7, score: {type: sigmoid, bias: -1.5}}", "model.decoder.position_bias={type: alibi}",
        "model.encoder.layer[0].score={type: sigmoid}", "model.encoder.layer[0].softcap=1.0", "model.decoder.layer[1].softcap=0.3",
    ],
    "rope_gqa_t5_swiglu_rms": [
        "model.positional=none", "model.encoder.layer[0].rotary={fraction: 0.5}", "model.decoder.layer[0].rotary={fraction: 1.0}",
        "model.decoder.layer[0].kv_heads=2", "model.decoder.position_bias={type: t5}", "model.encoder.position_bias={type: alibi}",
        "model.decoder.layer[2].type=gated_feed_forward", "model.decoder.layer[2].activation=silu",
        *(f"model.{s}.add_norm.norm.type=rms_norm" for s in BOTH), "model.encoder.layer[0].qk_norm=true",
    ],
}  # fmt: skip


def model_of(name: str, *extra: str) -> torch.nn.Module:
    torch.manual_seed(0)
    model = build_model(load_experiment(EXPERIMENTS / "base.yaml", [*SMALL, *VARIANTS[name], *extra]).model)
    with torch.no_grad():  # T5's table and the norms start at values that would hide a mistake
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model


def padded(rows: list[list[int]]) -> torch.Tensor:
    out = torch.zeros(len(rows), max(map(len, rows)), dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r)
    return out


SRC = padded([[5, 6, 7, 8, 9, 10], [11, 12, 13]])


@pytest.mark.parametrize("name", VARIANTS)
def test_count_equals_numel(name):
    spec = load_experiment(EXPERIMENTS / "base.yaml", [*SMALL, *VARIANTS[name]]).model
    assert (
        count_params(spec)
        == sum(p.numel() for p in build_model(spec).parameters())
        == sum(e * n for _, e, n in param_table(spec))
    )


@pytest.mark.parametrize("name", VARIANTS)
def test_cached_decoding_gives_the_full_forwards_logits_at_every_step(name):
    model = model_of(name).eval()
    tgt = torch.tensor([[1, 14, 15, 16, 17], [1, 18, 19, 20, 21]])
    with torch.no_grad():
        full = model(SRC, tgt)  # (2, 5, V)
        memory, padding = model.encode(SRC)
        state = model.init_state()
        steps = [model.decode(tgt[:, t : t + 1], memory, padding, state) for t in range(tgt.size(1))]
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", VARIANTS)
def test_packed_rows_give_the_padded_logits(name):
    model = model_of(name).eval()
    tgt = padded([[1, 14, 15, 16], [1, 18]])
    rows, src_rows = tgt.flatten().ne(0).nonzero().squeeze(1), SRC.flatten().ne(0).nonzero().squeeze(1)
    with torch.no_grad():
        torch.testing.assert_close(model(SRC, tgt, rows, src_rows), model(SRC, tgt).flatten(0, 1)[rows], rtol=1e-5, atol=1e-5)


def _batch(seed: int, n: int):
    rng = np.random.default_rng(seed)
    examples = [Example(i, rng.integers(3, 40, rng.integers(1, 9)), rng.integers(3, 40, rng.integers(0, 9))) for i in range(n)]
    return TranslationCollator(pad_id=0, bos_id=1, eos_id=2)(examples)


def _loss_and_grads(model, batch):
    model.zero_grad(set_to_none=True)
    loss, nll, _ = batch_loss(model, batch, eps=0.1, pad_id=0)
    (loss + nll).backward()
    return loss.detach(), torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


@pytest.mark.slow  # about 28 s each on 2 cores: torch.compile of two stacks of every variant
@pytest.mark.parametrize("name", ["rope_gqa_t5_swiglu_rms", "window_alibi_qk_rope"])
def test_the_variants_compile_to_what_eager_computes(name):
    one_layer = "dims.N=1"  # fewer kernels to trace: the variants are in every layer alike
    eager, compiled = model_of(name, one_layer).train(), model_of(name, one_layer).train()
    compiled.compile(dynamic=True, backend="aot_eager")
    for seed, n in [(1, 5), (2, 7)]:
        batch = _batch(seed, n)
        (loss, grads), (loss_c, grads_c) = _loss_and_grads(eager, batch), _loss_and_grads(compiled, batch)
        torch.testing.assert_close(loss_c, loss, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(grads_c, grads, rtol=1e-4, atol=1e-5)
        assert torch.isfinite(grads).all()


def test_a_stack_plans_one_rotary_table_for_each_setting_its_attentions_share():
    # the decoder's layer 1 rotates like layer 0 (same table); layer 2's base differs (a table of its own)
    model = model_of(
        "rope",
        "dims.N=3",
        "model.decoder.overrides={2: [{type: causal_self_attention, h: 4, d_k: 4, d_v: 6, "
        "rotary: {fraction: 0.5, base: 50}}, {type: cross_attention, h: 4, d_k: 4, d_v: 6}, {type: feed_forward, d_ff: 24}]}",
    )
    tables = {side: [next(iter(stack.layers[i].sublayers[0].sublayer.qk)) for i in range(3)]
              for side, stack in (("encoder", model.encoder), ("decoder", model.decoder))}  # fmt: skip
    assert tables["encoder"][0] is tables["encoder"][1] is tables["encoder"][2]
    assert tables["decoder"][0] is tables["decoder"][1] and tables["decoder"][2] is not tables["decoder"][0]
    assert (tables["decoder"][0].dims, tables["decoder"][2].dims) == (2, 2) and tables["encoder"][0].dims == 4
    assert tables["decoder"][0] is not tables["encoder"][0]


def test_summed_biases_add_each_ones_scores_and_name_a_nested_key():
    model = model_of("alibi_t5")
    summed = model.decoder.position_bias
    alibi, t5 = summed.biases
    torch.testing.assert_close(summed(3, 5), alibi(3, 5) + t5(3, 5), rtol=0, atol=0)
    assert sum(p.numel() for p in summed.parameters()) == 8 * 4  # T5's table alone: buckets x heads
    with pytest.raises(UserError) as e:
        load_experiment(
            EXPERIMENTS / "base.yaml",
            [*SMALL, "model.encoder.position_bias={type: sum, biases: [{type: alibi}, {type: t5, num_buckets: 2}]}"],
        )
    assert (
        str(e.value)
        .splitlines()[1]
        .startswith("  model.encoder.position_bias.biases[1].num_buckets: 2 leaves no exact-distance bucket")
    )


def test_qk_norm_comes_before_rotary_with_trained_gains():
    """QK-norm first, then rotary (as documented): with the norms' gains at their initial ones the
    two orders give the same numbers (a rotation keeps a head's RMS, and a uniform gain commutes
    with it), so the gains here are random, as a trained or imported model's are; the attention is
    then held to eq. 1 written out with norm, then rotation."""
    import math

    from torch.testing import assert_close

    from aiayn.blocks import LayerContext, QKNorm, Rotary

    spec = load_experiment(EXPERIMENTS / "demo.yaml", ["model.encoder.layer[0].qk_norm=true", "model.encoder.layer[0].rotary={}"])
    attention = build_model(spec.model).encoder.layers[0].sublayers[0].sublayer.eval()
    norm, rotary = (next(m for m in attention.qk if isinstance(m, kind)) for kind in (QKNorm, Rotary))
    torch.manual_seed(3)
    with torch.no_grad():
        norm.q_norm.weight.copy_(torch.rand(attention.d_k) * 2)
        norm.k_norm.weight.copy_(torch.rand(attention.d_k) * 2)
    B, T, h, d_k = 2, 5, attention.h, attention.d_k
    x = torch.randn(B, T, attention.d_model)
    p = attention.projections()
    q, k, v = ((x @ p[n][0].T + p[n][1]).view(B, T, h, -1).transpose(1, 2) for n in ("q", "k", "v"))  # (B, h, T, d)

    def rms(x, gain):
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + norm.q_norm.eps) * gain

    def attend(q, k):
        weights = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).softmax(-1)
        return (weights @ v).transpose(1, 2).reshape(B, T, -1) @ p["o"][0].T + p["o"][1]

    norm_then_rotary = attend(*rotary(rms(q, norm.q_norm.weight), rms(k, norm.k_norm.weight), 0))
    rotary_then_norm = attend(*(rms(t, g) for t, g in zip(rotary(q, k, 0), (norm.q_norm.weight, norm.k_norm.weight))))
    assert (norm_then_rotary - rotary_then_norm).abs().max() > 1e-3  # the fixture tells the orders apart
    assert_close(attention(x, LayerContext()), norm_then_rotary)
