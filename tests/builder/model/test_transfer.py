"""init_from's weights (builder/model/transfer.py): exact by default, the named conversions each
equal to its formula on known weights, every other difference refused in one message."""

import pytest
import torch

from aiayn.builder.errors import UserError
from aiayn.builder.graph import graph_of
from aiayn.builder.model.build import build_model
from aiayn.builder.model.freeze import freeze, frozen_parameters
from aiayn.builder.model.summary import render, summary
from aiayn.builder.model.transfer import mean_pool_heads, transfer_weights
from tests.conftest import EXPERIMENTS, load_experiment

SMALL = ["dims.vocab_size=40", "dims.d_model=16", "dims.d_ff=24", "dims.h=4", "dims.d_k=4", "dims.d_v=6", "dims.N=2"]
SELF, CROSS = "decoder.layers.0.sublayers.0.sublayer", "decoder.layers.0.sublayers.1.sublayer"


def model(*overrides: str, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_model(load_experiment(EXPERIMENTS / "base.yaml", [*SMALL, *overrides]).model)


def equal(a: torch.nn.Module, b: torch.nn.Module) -> list[str]:
    """The names of the tensors of `a` equal to `b`'s."""
    theirs = b.state_dict()
    return [k for k, v in a.state_dict().items() if k in theirs and v.shape == theirs[k].shape and torch.equal(v, theirs[k])]


def test_the_same_model_takes_every_weight():
    source, target = model(seed=1), model(seed=2)
    done = transfer_weights(target, source, (), where="init_from x")
    assert equal(target, source) == list(target.state_dict())
    assert done.record() == {"copied": len(target.state_dict())}


def test_mean_pooling_is_the_mean_of_each_group_of_heads():
    heads = torch.arange(4 * 2 * 3, dtype=torch.float32).reshape(4 * 2, 3)  # 4 heads of d = 2 rows
    pooled = mean_pool_heads(heads, 4, 2)
    assert torch.equal(pooled, torch.cat([(heads[0:2] + heads[2:4]) / 2, (heads[4:6] + heads[6:8]) / 2]))
    assert torch.equal(mean_pool_heads(heads, 4, 1), heads.reshape(4, 2, 3).mean(0))
    assert torch.equal(mean_pool_heads(torch.arange(8.0), 4, 2), torch.tensor([1.0, 2.0, 5.0, 6.0]))  # a bias


def test_kv_heads_uptraining_pools_k_and_v_and_keeps_the_rest():
    source = model(seed=1)
    target = model("model.decoder.layer[0].kv_heads=2", "model.decoder.layer[1].kv_heads=1", seed=2)
    done = transfer_weights(target, source, ["kv_heads"], where="init_from x")
    for name, into in ((SELF, 2), (CROSS, 1)):
        ours, theirs = target.get_submodule(name).projections(), source.get_submodule(name).projections()
        for part in ("q", "o"):
            assert torch.equal(ours[part][0], theirs[part][0]) and torch.equal(ours[part][1], theirs[part][1])
        d = {"k": 4, "v": 6}
        for part in ("k", "v"):
            w, b = theirs[part]
            groups = w.reshape(into, 4 // into, d[part], 16)  # the source's 4 heads in groups of 4 / into
            assert torch.allclose(ours[part][0], groups.mean(1).reshape(into * d[part], 16))
            assert torch.allclose(ours[part][1], b.reshape(into, 4 // into, d[part]).mean(1).reshape(-1))
    others = [k for k in target.state_dict() if not k.startswith(("decoder.layers.0.sublayers.0.sublayer.w_", "decoder.layers.1.sublayers.0.sublayer.w_",
                                                                   "decoder.layers.0.sublayers.1.sublayer.w_", "decoder.layers.1.sublayers.1.sublayer.w_"))]  # fmt: skip
    assert set(others) <= set(equal(target, source))
    assert done.pooled == [f"{SELF}: 4 -> 2 K/V heads", f"{CROSS}: 4 -> 1 K/V heads",
                           "decoder.layers.1.sublayers.0.sublayer: 4 -> 2 K/V heads", "decoder.layers.1.sublayers.1.sublayer: 4 -> 1 K/V heads"]  # fmt: skip


def test_more_layers_copy_the_first_and_list_the_new():
    source, target = model(seed=1), model("dims.N=3", seed=2)
    untouched = {k: v.clone() for k, v in target.state_dict().items() if k.startswith(("encoder.layers.2.", "decoder.layers.2."))}
    done = transfer_weights(target, source, ["layers"], where="init_from x")
    assert set(equal(target, source)) == set(source.state_dict())
    assert all(torch.equal(target.state_dict()[k], v) for k, v in untouched.items())  # initialised as usual
    assert done.new == ["encoder.layers.2", "decoder.layers.2"] and done.dropped == []
    fewer = model("dims.N=1", seed=2)
    assert transfer_weights(fewer, source, ["layers"], where="init_from x").dropped == ["encoder.layers.1", "decoder.layers.1"]
    assert set(equal(fewer, source)) == set(fewer.state_dict())


def test_a_decoder_only_model_takes_its_own_and_grows_by_layers():
    """A language model's weights (no encoder): exact, then with a layer more (init_from of a decoder-only run raised AttributeError before)."""

    def lm(*overrides: str, seed: int) -> torch.nn.Module:
        torch.manual_seed(seed)
        return build_model(load_experiment(EXPERIMENTS / "lm" / "demo.yaml", [*SMALL, *overrides]).model)

    source = lm(seed=1)
    same = lm(seed=2)
    assert transfer_weights(same, source, (), where="init_from x").copied == len(source.state_dict())
    assert set(equal(same, source)) == set(source.state_dict())
    deeper = lm("dims.N=3", seed=2)
    done = transfer_weights(deeper, source, ["layers"], where="init_from x")
    assert done.new == ["decoder.layers.2"] and set(equal(deeper, source)) == set(source.state_dict())
    with pytest.raises(UserError, match=r"decoder has 3 layers and the source 2: add layers to init_from.convert"):
        transfer_weights(lm("dims.N=3", seed=2), source, (), where="init_from x")


def test_a_new_block_starts_as_initialised_and_is_listed():
    source, target = model(seed=1), model("model.encoder.layer[0].qk_norm=true", seed=2)
    done = transfer_weights(target, source, ["new_blocks"], where="init_from x")
    assert done.new == ["encoder.layers.0.sublayers.0.sublayer.qk.0.k_norm", "encoder.layers.0.sublayers.0.sublayer.qk.0.q_norm",
                        "encoder.layers.1.sublayers.0.sublayer.qk.0.k_norm", "encoder.layers.1.sublayers.0.sublayer.qk.0.q_norm"]  # fmt: skip
    assert set(equal(target, source)) == set(source.state_dict())


@pytest.mark.parametrize(
    "overrides, convert, message",
    [
        (
            ["dims.d_ff=32"],
            (),
            "init_from x: 12 differences between the source's weights and this model's (they must match by name and shape, or "
            "differ as init_from.convert allows):\n"
            "  encoder.layers.0.sublayers.1.sublayer.w_1.weight: the source's (24, 16), this model's (32, 16)\n"
            "  encoder.layers.0.sublayers.1.sublayer.w_1.bias: the source's (24,), this model's (32,)\n"
            "  encoder.layers.0.sublayers.1.sublayer.w_2.weight: the source's (16, 24), this model's (16, 32)\n"
            "  encoder.layers.1.sublayers.1.sublayer.w_1.weight: the source's (24, 16), this model's (32, 16)\n"
            "  encoder.layers.1.sublayers.1.sublayer.w_1.bias: the source's (24,), this model's (32,)\n"
            "  and 7 more",
        ),
        (
            ["dims.N=3"],
            (),
            "init_from x: 2 differences between the source's weights and this model's (they must match by name and shape, or "
            "differ as init_from.convert allows):\n"
            "  encoder has 3 layers and the source 2: add layers to init_from.convert to start from its first 2 (the rest initialised as usual)\n"
            "  decoder has 3 layers and the source 2: add layers to init_from.convert to start from its first 2 (the rest initialised as usual)",
        ),
        (
            ["model.decoder.layer[1].kv_heads=2", "dims.N=1"],
            (),
            "init_from x: 3 differences between the source's weights and this model's (they must match by name and shape, or "
            "differ as init_from.convert allows):\n"
            "  encoder has 1 layer and the source 2: add layers to init_from.convert to start from its first 1 (the others dropped)\n"
            "  decoder has 1 layer and the source 2: add layers to init_from.convert to start from its first 1 (the others dropped)\n"
            f"  {CROSS} has 2 K/V heads and the source 4: add kv_heads to init_from.convert to mean-pool each group's (GQA uptraining)",
        ),
        (
            ["model.encoder.layer[0].qk_norm=true"],
            (),
            "init_from x: 4 differences between the source's weights and this model's (they must match by name and shape, or "
            "differ as init_from.convert allows):\n"
            "  encoder.layers.0.sublayers.0.sublayer.qk.0.q_norm.weight: not in the source (add new_blocks to init_from.convert "
            "to initialise it as usual)\n"
            "  encoder.layers.0.sublayers.0.sublayer.qk.0.k_norm.weight: not in the source (add new_blocks to init_from.convert "
            "to initialise it as usual)\n"
            "  encoder.layers.1.sublayers.0.sublayer.qk.0.q_norm.weight: not in the source (add new_blocks to init_from.convert "
            "to initialise it as usual)\n"
            "  encoder.layers.1.sublayers.0.sublayer.qk.0.k_norm.weight: not in the source (add new_blocks to init_from.convert "
            "to initialise it as usual)",
        ),
        (
            [],
            ("kv_heads",),
            "init_from.convert: kv_heads is named, but every attention has the source's number of K/V heads; drop it",
        ),
        ([], ("layers",), "init_from.convert: layers is named, but both stacks have the source's numbers of layers; drop it"),
        (
            [],
            ("new_blocks",),
            "init_from.convert: new_blocks is named, but every parameter of this model is in the source; drop it",
        ),
        (
            ["model.decoder.layer[0].kv_heads=4", "dims.h=8", "dims.d_k=2"],
            ("kv_heads",),
            "init_from.convert: kv_heads cannot make encoder.layers.0.sublayers.0.sublayer (h, d_k, d_v, bias (8, 2, 6, True) where "
            "the source has (4, 4, 6, True))",
        ),
    ],
    ids=[
        "shape",
        "layers",
        "kv_heads_and_layers",
        "new_block",
        "kv_unneeded",
        "layers_unneeded",
        "new_blocks_unneeded",
        "kv_sizes",
    ],
)
def test_what_does_not_fit_is_refused_in_one_message(overrides, convert, message):
    target = model(*overrides, seed=2)
    before = {k: v.clone() for k, v in target.state_dict().items()}
    with pytest.raises(UserError) as e:
        transfer_weights(target, model(seed=1), convert, where="init_from x")
    assert str(e.value) == message
    assert all(torch.equal(v, before[k]) for k, v in target.state_dict().items())  # nothing loaded


def test_tables_this_model_ties_must_be_one_in_the_source_too():
    untied = model("model.embedding.share=none", seed=1)
    with pytest.raises(UserError) as e:
        transfer_weights(model(seed=2), untied, (), where="init_from x")
    assert str(e.value).splitlines()[1] == (
        "  src_embed.token.table.weight = tgt_embed.token.table.weight = generator.weight: one tensor in this model, different "
        "ones in the source (model.embedding.share)"
    )
    apart = model("model.embedding.share=none", seed=2)  # the other way is exact: each table starts as the source's one
    transfer_weights(apart, model(seed=1), (), where="init_from x")
    assert torch.equal(apart.src_embed.token.table.weight, apart.generator.weight)


def test_kv_heads_cannot_grow_or_split_unevenly():
    source = model("model.decoder.layer[0].kv_heads=2", seed=1)
    with pytest.raises(UserError) as e:
        transfer_weights(model(seed=2), source, ["kv_heads"], where="init_from x")
    assert str(e.value) == (
        f"init_from.convert: kv_heads cannot make {SELF} (4 K/V heads from the source's 2: mean-pooling makes fewer heads, "
        "a number that divides 2)"
    )


def test_freeze_matches_names_and_refuses_what_matches_nothing_or_everything():
    m = model()
    assert freeze(m, ["encoder.*"]) == sum(p.numel() for n, p in m.named_parameters() if n.startswith("encoder."))
    assert all(not p.requires_grad for n, p in m.named_parameters() if n.startswith("encoder."))
    assert all(p.requires_grad for n, p in m.named_parameters() if not n.startswith("encoder."))
    tied = model()  # base shares one table among source, target and output: either name freezes it
    assert [p.shape for p in frozen_parameters(tied, ["generator.*"])] == [torch.Size([40, 16])]
    with pytest.raises(UserError) as e:
        frozen_parameters(m, ["encoders.*"])
    assert str(e.value) == (
        "train.freeze: 'encoders.*' matches no parameter of the model; parameter names are as its state_dict has them "
        "(e.g. src_embed.token.table.weight), and decoder.*, encoder.*, generator.*, src_embed.*, tgt_embed.* match whole parts"
    )
    everything = "train.freeze ['*'] freezes every parameter of the model: nothing would train; freeze fewer"
    with pytest.raises(UserError) as e:
        freeze(model(), ["*"])
    assert str(e.value) == everything
    with pytest.raises(UserError) as e:  # what validate and show count refuses it too
        frozen_parameters(model(), ["*"])
    assert str(e.value) == everything


def test_show_counts_the_trainable_and_the_frozen():
    spec = load_experiment(EXPERIMENTS / "base.yaml", [*SMALL, "train.freeze=[encoder.*,tgt_embed.*]"])
    info, built = summary(spec), build_model(spec.model)
    encoder = sum(p.numel() for n, p in built.named_parameters() if n.startswith("encoder."))
    assert info["frozen"] == encoder + 40 * 16  # base ties the tables: tgt_embed's is the one table
    assert info["trainable"] == info["params"] - info["frozen"]
    lines = render(info, graph_of(spec)).splitlines()
    assert lines[lines.index(next(line for line in lines if line.startswith("total"))) + 2].split() == [
        "frozen",
        "(train.freeze)",
        f"{info['frozen']:,}",
    ]
    assert "frozen" not in summary(load_experiment(EXPERIMENTS / "base.yaml", SMALL))
