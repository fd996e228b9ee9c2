"""The model's schemas: the norm spec (and release 0.1's add_norm.eps), the slot unions, and the
checks that ask sub-layer specs what they are."""

import warnings

import pytest
import torch
from pydantic import ValidationError

from aiayn.builder.errors import UserError
from aiayn.schemas.add_norm import AddNormSpec
from aiayn.schemas.attention import CausalSelfAttentionSpec, CrossAttentionSpec, SelfAttentionSpec
from aiayn.schemas.feed_forward import FeedForwardSpec
from aiayn.schemas.norm import LayerNormSpec
from tests.conftest import EXPERIMENTS, load_experiment, registry

BASE = EXPERIMENTS / "base.yaml"


def error_of(*overrides: str) -> str:
    with pytest.raises(UserError) as info:
        load_experiment(BASE, overrides)
    return str(info.value)


def test_add_norm_eps_of_release_0_1_is_the_layer_norms_eps():
    assert AddNormSpec.model_validate({"placement": "pre", "eps": 1e-5}, context=registry().context) == AddNormSpec(
        placement="pre", norm=LayerNormSpec(eps=1e-5)
    )
    assert AddNormSpec().norm == LayerNormSpec(eps=1e-6)
    spec = load_experiment(BASE, ["model.encoder.add_norm.norm.eps=1e-5"])
    assert (spec.model.encoder.add_norm.norm.eps, spec.model.decoder.add_norm.norm.eps) == (1e-5, 1e-6)


def test_eps_beside_a_norm_and_a_bad_eps_are_messages():
    assert error_of("model.encoder.add_norm.eps=1e-5").endswith(
        "  model.encoder.add_norm.eps: is aiayn 0.1's form of norm.eps, and norm is given too; set norm.eps alone "
        "(set on the command line: model.encoder.add_norm.eps=1e-5)"
    )
    assert error_of("model.decoder.add_norm.norm.eps=0").endswith(
        "  model.decoder.add_norm.norm.eps: input should be greater than 0, got 0 (set on the command line: model.decoder.add_norm.norm.eps=0)"
    )
    assert error_of("model.decoder.add_norm.norm.type=rms_nrom").endswith(
        "  model.decoder.add_norm.norm: type 'rms_nrom' is not one of layer_norm, rms_norm; did you mean 'rms_norm'? "
        "(set on the command line: model.decoder.add_norm.norm.type=rms_nrom)"
    )


def test_errors_inside_a_slot_have_the_yaml_path():
    assert error_of("model.positional.type=learned").endswith("  model.positional.max_len: required key is missing")
    assert error_of("model.encoder.add_norm.norm.epsilon=1e-5").endswith(
        "  model.encoder.add_norm.norm.epsilon: unknown key; did you mean 'eps'? (set on the command line: model.encoder.add_norm.norm.epsilon=1e-5)"
    )


def test_sub_layer_specs_say_what_they_are():
    self_, causal, cross = (cls(h=2, d_k=3, d_v=4) for cls in (SelfAttentionSpec, CausalSelfAttentionSpec, CrossAttentionSpec))
    ffn = FeedForwardSpec(d_ff=8)
    assert [s.reads_memory for s in (self_, causal, cross, ffn)] == [False, False, True, False]
    assert [s.looks_ahead for s in (self_, causal, cross, ffn)] == [True, False, False, False]
    assert [s.table3 for s in (causal, ffn)] == [{"h": 2, "d_k": 3, "d_v": 4}, {"d_ff": 8}]
    assert [s.export_as for s in (self_, causal, cross, ffn)] == [
        "self_attention",
        "causal_self_attention",
        "cross_attention",
        "feed_forward",
    ]
    assert LayerNormSpec().export_as == "layer_norm"


def test_an_unknown_stack_bias_lists_the_installed_ones():
    assert error_of("model.encoder.position_bias={type: rope}").endswith(
        "  model.encoder.position_bias: type 'rope' is not one of alibi, t5, sum "
        "(set on the command line: model.encoder.position_bias={type: rope})"
    )


def test_specs_are_frozen_and_refuse_unknown_keys():
    with pytest.raises(ValidationError):
        LayerNormSpec(eps=1e-6, bias=False)
    with pytest.raises(ValidationError):
        LayerNormSpec().eps = 1.0


@pytest.mark.parametrize("overrides, message", [
    (["model.encoder.layer[0].kv_heads=3"],
     "model.encoder.layer[0].kv_heads: 3 does not divide h (8): each K/V head serves h / kv_heads query heads; use one of [1, 2, 4, 8]"),
    (["model.decoder.layer[0].rotary={fraction: 1.5}"],
     "model.decoder.layer[0].rotary.fraction: input should be less than or equal to 1, got 1.5"),
    (["model.decoder.layer[0].rotary={fraction: 0.01}"],
     "model.decoder.layer[0].rotary.fraction: 0.01 of d_k (64) rotates 0 dims; at least 2 are needed: raise it to >= 0.03125"),
    (["model.decoder.layer[1].rotary={fraction: 1.0}"],
     "model.decoder.layer[1].rotary: rotates the queries and keys of one sequence, but cross_attention's keys are the encoder's; "
     "give rotary to the self-attentions (and positional: none, if it is to be the only positions)"),
    (["model.encoder.position_bias={type: alibi}", "model.encoder.overrides={1: [{type: self_attention, h: 4, d_k: 64, d_v: 64}, {type: feed_forward, d_ff: 2048}]}"],
     "model.encoder.position_bias: one bias for the whole stack needs its self-attentions to have one h, but they have [4, 8]"),
    (["model.decoder.layer[2].type=gated_feed_forward", "model.decoder.layer[2].activation=tanh"],
     "model.decoder.layer[2].activation: input should be 'silu', 'gelu' or 'relu', got 'tanh'"),
    (["dims.d_k=1", "model.encoder.layer[0].rotary={fraction: 1.0}"],
     "model.encoder.layer[0].rotary: rotates pairs of dims, and d_k (1) has fewer than 2; raise d_k or drop rotary"),
    (["model.encoder.position_bias={type: t5, num_buckets: 3}"],
     "model.encoder.position_bias.num_buckets: 3 leaves no exact-distance bucket in the encoder's bidirectional bias (1 per "
     "direction, half of them exact); use num_buckets >= 4 (T5: 32)"),
    (["model.decoder.position_bias={type: t5, num_buckets: 1}"],
     "model.decoder.position_bias.num_buckets: 1 leaves no exact-distance bucket in the decoder's one-sided bias (1 in all, "
     "half of them exact); use num_buckets >= 2 (T5: 32)"),
    (["model.encoder.position_bias={type: t5, num_buckets: 8, max_distance: 2}"],
     "model.encoder.position_bias.max_distance: 2 must be greater than 2, where the encoder's bidirectional bias (num_buckets "
     "8) begins its logarithmic buckets; raise it above 2 (T5: 128) or lower num_buckets"),
    (["model.decoder.position_bias={type: t5, num_buckets: 8, max_distance: 4}"],
     "model.decoder.position_bias.max_distance: 4 must be greater than 4, where the decoder's one-sided bias (num_buckets 8) "
     "begins its logarithmic buckets; raise it above 4 (T5: 128) or lower num_buckets"),
])  # fmt: skip
def test_each_variants_bad_input_names_its_yaml_path(overrides, message):
    assert message in error_of(*overrides)


@pytest.mark.parametrize("stack", ["encoder", "decoder"])
def test_every_t5_bias_that_validates_buckets_every_distance_into_its_table(stack):
    """Every (num_buckets, max_distance) of a small grid is refused, or maps distances up to 300
    to finite buckets of its table (before the checks, 44 of these crashed inside training)."""
    from aiayn.blocks.position_bias import t5_bucket
    from aiayn.schemas.stack_bias import T5BiasSpec

    relative = torch.arange(-300, 301)
    for num_buckets in range(1, 11):
        for max_distance in range(1, 13):
            spec = T5BiasSpec(num_buckets=num_buckets, max_distance=max_distance)
            try:
                spec.check_in(bidirectional=stack == "encoder")
            except ValueError:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # a division by zero in numpy or torch would warn, not raise
                buckets = t5_bucket(
                    relative, bidirectional=stack == "encoder", num_buckets=num_buckets, max_distance=max_distance
                )
            assert 0 <= int(buckets.min()) and int(buckets.max()) < num_buckets, (num_buckets, max_distance)


def test_positional_none_is_short_for_its_type():
    assert load_experiment(BASE, ["model.positional=none"]).model.positional.type == "none"


def test_static_shapes_and_cuda_graph_modes_are_checked():
    assert error_of("train.compile=reduce-overhead").endswith(
        "  train.compile: reduce-overhead records CUDA graphs, one for every batch shape; set data.static_shapes "
        "(data.static_shapes.num_buckets=6, say) so that training batches take a few fixed shapes "
        "(set on the command line: train.compile=reduce-overhead)"
    )
    assert error_of("data.static_shapes.bucket_boundaries=[20,10]").endswith(
        "  data.static_shapes.bucket_boundaries: [20, 10] must be 1 to 7 widths in ascending order (with the longest "
        "pair's, at most 8 shapes) (set on the command line: data.static_shapes.bucket_boundaries=[20,10])"
    )
    assert "data.static_shapes.num_buckets: input should be less than or equal to 8" in error_of(
        "data.static_shapes.num_buckets=9"
    )
    assert error_of("train.compile=reduce_overhead").endswith(
        "  train.compile: 'reduce_overhead' is not true, false or one of torch.compile's modes default, reduce-overhead, "
        "max-autotune, max-autotune-no-cudagraphs; did you mean 'reduce-overhead'? (set on the command line: train.compile=reduce_overhead)"
    )
    spec = load_experiment(BASE, ["train.compile=reduce-overhead", "data.static_shapes={num_buckets: 6}"])
    assert (spec.train.compile, spec.data.static_shapes.num_buckets, spec.data.static_shapes.packed) == (
        "reduce-overhead",
        6,
        True,
    )
    assert load_experiment(BASE, ["train.compile=true"]).train.compile is True
