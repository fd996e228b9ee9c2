"""The decoder-only graph: a model without an encoder is the decoder stack alone, with GPT-2's
settings equal to transformers' GPT2LMHeadModel and with Llama's to LlamaForCausalLM on copied
weights, counted exactly; cached decoding equals the full forward; the prefix mask opens the
source to every query; cross-attention in it is refused by name."""

import pytest
import torch

from aiayn.blocks import DecoderOnly, attention_mask
from aiayn.builder.decode.generate import generate_ids
from aiayn.builder.decode.sampling import Sampling
from aiayn.builder.decode.strategy import Greedy, Sampled
from aiayn.builder.errors import UserError
from aiayn.builder.model.build import build_model
from aiayn.builder.model.size import count_params
from tests.conftest import EXPERIMENTS, load_experiment, validated_experiment

transformers = pytest.importorskip("transformers")
V, D, H, LAYERS, POSITIONS = 97, 32, 4, 2, 64


def gpt2_experiment(*, kv: int | None = None) -> dict:
    """GPT-2's settings (learned positions, pre-norm LayerNorm eps 1e-5, tanh-GELU, biases, tied
    embeddings, no embedding scale) at small sizes."""
    attention = {"type": "causal_self_attention", "h": H, "d_k": D // H, "d_v": D // H}
    return {
        "name": "gpt2-small-test",
        "model": {
            "d_model": D, "dropout": 0.0, "embedding": {"vocab_size": V, "share": "target_output", "scale": False},
            "positional": {"type": "learned", "max_len": POSITIONS},
            "decoder": {
                "num_layers": LAYERS, "add_norm": {"placement": "pre", "dropout": 0.0, "norm": {"type": "layer_norm", "eps": 1e-5}},
                "layer": [attention, {"type": "feed_forward", "d_ff": 4 * D, "activation": "gelu_tanh"}],
            },
        },
        "data": {"type": "demo", "side": "en", "max_len": POSITIONS - 1},
    }  # fmt: skip


def llama_experiment(*, kv: int = 2, tied: bool = False) -> dict:
    """Llama's settings (RMSNorm, SwiGLU without biases, rotary, grouped K/V heads, no absolute positions)."""
    attention = {"type": "causal_self_attention", "h": H, "d_k": D // H, "d_v": D // H, "kv_heads": kv, "bias": False,
                 "rotary": {"base": 10000.0}}  # fmt: skip
    return {
        "name": "llama-test",
        "model": {
            "d_model": D, "dropout": 0.0, "positional": "none",
            "embedding": {"vocab_size": V, "share": "target_output" if tied else "none", "scale": False},
            "decoder": {
                "num_layers": LAYERS, "add_norm": {"placement": "pre", "dropout": 0.0, "norm": {"type": "rms_norm", "eps": 1e-6}},
                "layer": [attention, {"type": "gated_feed_forward", "d_ff": 3 * D, "activation": "silu", "bias": False}],
            },
        },
        "data": {"type": "demo", "side": "en", "max_len": 63},
    }  # fmt: skip


def gpt2_reference(seed: int = 0):
    config = transformers.GPT2Config(vocab_size=V, n_positions=POSITIONS, n_embd=D, n_layer=LAYERS, n_head=H, resid_pdrop=0.0,
                                     embd_pdrop=0.0, attn_pdrop=0.0)  # fmt: skip
    torch.manual_seed(seed)
    return transformers.GPT2LMHeadModel(config).eval()


def llama_reference(seed: int = 0, kv: int = 2, tied: bool = False):
    config = transformers.LlamaConfig(vocab_size=V, hidden_size=D, intermediate_size=3 * D, num_hidden_layers=LAYERS,
                                      num_attention_heads=H, num_key_value_heads=kv, max_position_embeddings=POSITIONS,
                                      rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=tied, attention_bias=False)  # fmt: skip
    torch.manual_seed(seed)
    hf = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():  # norms away from their ones, so that a gain copied wrong shows
        for name, p in hf.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.3)
    return hf


def copy_gpt2(hf, model: DecoderOnly) -> None:
    sd = hf.transformer.state_dict()
    with torch.no_grad():
        model.tgt_embed.token.table.weight.copy_(sd["wte.weight"])
        model.tgt_embed.positional.table.weight.copy_(sd["wpe.weight"])
        for i, layer in enumerate(model.decoder.layers):
            attention, ffn = (block for block in layer.sublayers)
            p = f"h.{i}."
            attention.norm.weight.copy_(sd[p + "ln_1.weight"]), attention.norm.bias.copy_(sd[p + "ln_1.bias"])
            (
                attention.sublayer.w_qkv.weight.copy_(sd[p + "attn.c_attn.weight"].T),
                attention.sublayer.w_qkv.bias.copy_(sd[p + "attn.c_attn.bias"]),
            )
            (
                attention.sublayer.w_o.weight.copy_(sd[p + "attn.c_proj.weight"].T),
                attention.sublayer.w_o.bias.copy_(sd[p + "attn.c_proj.bias"]),
            )
            ffn.norm.weight.copy_(sd[p + "ln_2.weight"]), ffn.norm.bias.copy_(sd[p + "ln_2.bias"])
            ffn.sublayer.w_1.weight.copy_(sd[p + "mlp.c_fc.weight"].T), ffn.sublayer.w_1.bias.copy_(sd[p + "mlp.c_fc.bias"])
            ffn.sublayer.w_2.weight.copy_(sd[p + "mlp.c_proj.weight"].T), ffn.sublayer.w_2.bias.copy_(sd[p + "mlp.c_proj.bias"])
        model.decoder.final_norm.weight.copy_(sd["ln_f.weight"]), model.decoder.final_norm.bias.copy_(sd["ln_f.bias"])


def copy_llama(hf, model: DecoderOnly) -> None:
    sd = hf.state_dict()
    with torch.no_grad():
        model.tgt_embed.token.table.weight.copy_(sd["model.embed_tokens.weight"])
        for i, layer in enumerate(model.decoder.layers):
            attention, ffn = (block for block in layer.sublayers)
            p = f"model.layers.{i}."
            attention.norm.weight.copy_(sd[p + "input_layernorm.weight"])
            qkv = [sd[p + f"self_attn.{n}_proj.weight"] for n in ("q", "k", "v")]
            attention.sublayer.w_qkv.weight.copy_(torch.cat(qkv))
            attention.sublayer.w_o.weight.copy_(sd[p + "self_attn.o_proj.weight"])
            ffn.norm.weight.copy_(sd[p + "post_attention_layernorm.weight"])
            ffn.sublayer.w_1.weight.copy_(torch.cat([sd[p + "mlp.gate_proj.weight"], sd[p + "mlp.up_proj.weight"]]))
            ffn.sublayer.w_2.weight.copy_(sd[p + "mlp.down_proj.weight"])
        model.decoder.final_norm.weight.copy_(sd["model.norm.weight"])
        if not model.generator.tied:
            model.generator.weight.copy_(sd["lm_head.weight"])


def tokens(seed: int = 1, batch: int = 3, length: int = 20) -> torch.Tensor:
    return torch.randint(3, V, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("family", ["gpt2", "llama", "llama-mqa-tied"])
def test_logits_equal_transformers_on_copied_weights_and_the_counts_are_exact(family):
    if family == "gpt2":
        spec, hf, copy = validated_experiment(gpt2_experiment()), gpt2_reference(), copy_gpt2
    else:
        kv, tied = (1, True) if family == "llama-mqa-tied" else (2, False)
        spec, hf, copy = (
            validated_experiment(llama_experiment(kv=kv, tied=tied)),
            llama_reference(kv=kv, tied=tied),
            copy_llama,
        )
    model = build_model(spec).eval()
    assert isinstance(model, DecoderOnly)
    assert count_params(spec.model) == sum(p.numel() for p in model.parameters()) == hf.num_parameters()
    copy(hf, model)
    x = tokens()
    with torch.no_grad():
        ours = model(x[:, :0], x)
        theirs = hf(input_ids=x).logits
    torch.testing.assert_close(ours, theirs, atol=2e-5, rtol=1e-4)


def test_greedy_generation_equals_generate_and_cached_equals_full():
    spec = validated_experiment(llama_experiment())
    model, hf = build_model(spec).eval(), llama_reference(seed=3)
    copy_llama(hf, model)
    prompts = [[5, 9, 13, 4], [7, 7, 8, 20]]
    ours = generate_ids(model, prompts, max_new_tokens=12, eos_id=2, strategy=Greedy())
    full = generate_ids(model, prompts, max_new_tokens=12, eos_id=2, strategy=Greedy(), use_cache=False)
    theirs = hf.generate(input_ids=torch.tensor([[1, *p] for p in prompts]), max_new_tokens=12, do_sample=False, eos_token_id=2,
                         pad_token_id=0)  # fmt: skip
    expected = [row[5:].tolist() for row in theirs]
    assert ours == full == [e[: e.index(2)] if 2 in e else e for e in expected]


def test_sampling_is_reproducible_for_a_seed_and_top_k_one_is_greedy():
    model = build_model(validated_experiment(gpt2_experiment())).eval()
    prompts = [[5, 6], [9, 9]]

    def sample(seed: int, **settings) -> list[list[int]]:
        return generate_ids(model, prompts, max_new_tokens=15, eos_id=2, strategy=Sampled(Sampling(**settings)), seed=seed)

    assert sample(4) == sample(4) != sample(5)
    greedy = generate_ids(model, prompts, max_new_tokens=15, eos_id=2, strategy=Greedy())
    assert sample(4, top_k=1) == greedy == sample(8, top_p=1e-6)


def test_a_prompts_sample_does_not_depend_on_the_prompts_beside_it():
    """One prompt, one seed: the same continuation alone, second of two, and among twenty prompts
    of its length and others (rows that end early leave the batch on the way)."""
    model = build_model(validated_experiment(gpt2_experiment())).eval()
    prompt, sampling = [5, 6, 7], Sampled(Sampling(temperature=1.5))
    others = [[int(t) for t in torch.randint(4, V, (1 + n % 6,), generator=torch.Generator().manual_seed(n))] for n in range(19)]

    def sample(prompts: list[list[int]]) -> list[list[int]]:
        return generate_ids(model, prompts, max_new_tokens=20, eos_id=2, strategy=sampling, seed=11)

    alone = sample([prompt])[0]
    assert len(alone) > 5 and alone == sample([[9, 9, 9], prompt])[1] == sample([*others[:10], prompt, *others[10:]])[10]
    assert (
        sample([prompt, prompt]) == [alone, alone]
        and sample([prompt])[0] != generate_ids(model, [prompt], max_new_tokens=20, eos_id=2, strategy=sampling, seed=12)[0]
    )


def test_nucleus_and_top_k_keep_the_tokens_their_definitions_keep():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    torch.testing.assert_close(Sampling(top_p=0.7).probabilities(logits), torch.tensor([[0.5 / 0.8, 0.3 / 0.8, 0.0, 0.0]]))
    torch.testing.assert_close(Sampling(top_p=0.8).probabilities(logits), torch.tensor([[0.5 / 0.8, 0.3 / 0.8, 0.0, 0.0]]))
    torch.testing.assert_close(Sampling(top_k=3).probabilities(logits), torch.tensor([[0.5, 0.3, 0.15, 0.0]]) / 0.95)
    torch.testing.assert_close(Sampling(temperature=0.5).probabilities(logits), torch.tensor([[25, 9, 2.25, 0.25]]) / 36.5)


def test_the_prefix_mask_opens_the_prefix_to_every_query():
    allowed, causal = attention_mask(None, None, None, 4, 4, like=torch.zeros(1), prefix=None)
    assert (allowed, causal) == (None, False)
    from aiayn.blocks import CausalMask

    mask, _ = attention_mask(CausalMask(), None, None, 4, 4, like=torch.zeros(1), prefix=torch.tensor([2, 0]))
    assert mask.shape == (2, 1, 4, 4)
    assert mask[0, 0].int().tolist() == [[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
    assert mask[1, 0].int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]


def test_a_prefix_models_cached_decoding_equals_its_full_pass():
    """model.source_mask: prefix: the prompt and the token after it read each other; the first
    cached call runs them together, as the full pass does."""
    experiment = gpt2_experiment()
    experiment["model"]["source_mask"] = "prefix"
    experiment["data"] = {"type": "demo", "max_len": 31}
    model = build_model(validated_experiment(experiment)).eval()
    src, tgt = tokens(2, 2, 6), tokens(3, 2, 5)
    with torch.no_grad():
        full = model(src, tgt)
        state, steps = model.init_state(), []
        for t in range(tgt.size(1)):
            steps.append(model.decode(tgt[:, t : t + 1], src, None, state))
        causal = build_model(validated_experiment({**experiment, "model": {**experiment["model"], "source_mask": "causal"}}))
        causal.load_state_dict(model.state_dict())
        causal_logits = causal.eval()(src, tgt)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(full, causal_logits)  # the source read both ways changes what follows


def test_a_decoder_only_model_refuses_cross_attention_and_monolingual_data_an_encoder():
    experiment = gpt2_experiment()
    experiment["model"]["decoder"]["layer"].insert(1, {"type": "cross_attention", "h": H, "d_k": 8, "d_v": 8})
    with pytest.raises(ValueError) as e:
        validated_experiment(experiment)
    assert "cross_attention attends to an encoder's output, and this model has none (model.encoder is absent: a decoder-only " \
           "model); remove it, or add an encoder" in str(e.value)  # fmt: skip
    with pytest.raises(UserError) as e:
        load_experiment(EXPERIMENTS / "demo.yaml", ["data.side=en"])
    assert "data.side: en: one language's text trains a language model, which has no encoder to read a source" in str(e.value)
    with pytest.raises(UserError) as e:
        load_experiment(EXPERIMENTS / "lm" / "demo.yaml", ["data.packing=blocks", "data.block_size=512"])
    assert "the learned position table has 128 rows but data.block_size 512 needs 512" in str(e.value)


def test_the_presets_count_what_transformers_counts_at_their_sizes():
    gpt2 = load_experiment(EXPERIMENTS / "lm" / "gpt2.yaml").model
    assert count_params(gpt2) == 124_439_808  # GPT-2 small, as GPT2LMHeadModel counts it
    with torch.device("meta"):
        assert transformers.GPT2LMHeadModel(transformers.GPT2Config()).num_parameters() == 124_439_808
    llama = load_experiment(EXPERIMENTS / "lm" / "llama.yaml").model
    config = transformers.LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1408, num_hidden_layers=8,
                                      num_attention_heads=8, num_key_value_heads=2, tie_word_embeddings=False)  # fmt: skip
    with torch.device("meta"):
        assert count_params(llama) == transformers.LlamaForCausalLM(config).num_parameters()
    medium = load_experiment(
        EXPERIMENTS / "lm" / "gpt2.yaml", ["dims.N=24", "dims.d_model=1024", "dims.h=16", "dims.d_ff=4096"]
    ).model
    assert count_params(medium) == 354_823_168  # GPT-2 medium's


def test_what_the_decoder_only_graph_has_not_yet_is_refused_by_name():
    blocks = ["data.packing=blocks", "data.block_size=64", "data.static_shapes={num_buckets: 4}"]
    with pytest.raises(UserError) as e:
        load_experiment(EXPERIMENTS / "lm" / "demo.yaml", blocks)
    assert str(e.value).endswith(
        "data.static_shapes: blocks of data.block_size tokens are one shape already (every batch but an epoch's last): drop "
        "data.static_shapes, or pack sentences (data.packing: sentences) to bucket them "
        "(set on the command line: data.static_shapes={num_buckets: 4})"
    )
    with pytest.raises(UserError) as e:
        load_experiment(EXPERIMENTS / "demo.yaml", ["train.source_loss=true"])
    assert "train.source_loss: is the loss on a decoder-only translation's source tokens" in str(e.value)
    from aiayn.builder.formats.limits import check_marian

    with pytest.raises(
        UserError, match=r"^cannot export to Hugging Face Marian: model.encoder is absent \(a decoder-only model\)"
    ):
        check_marian(load_experiment(EXPERIMENTS / "lm" / "demo.yaml").model)


def test_generation_never_draws_pad_and_refuses_nan_as_every_search_does():
    """Generation runs the translation's loop (loop.py): its token rules and its NaN check."""
    model = build_model(validated_experiment(gpt2_experiment())).eval()
    favour_pad = torch.zeros(V)
    favour_pad[model.pad_id] = 30.0  # <pad> the likeliest token by far
    hook = model.generator.register_forward_hook(lambda module, args, out: out + favour_pad)
    try:
        greedy = generate_ids(model, [[5, 6], [9]], max_new_tokens=8, eos_id=2, strategy=Greedy())
        drawn = generate_ids(
            model, [[5, 6], [9]], max_new_tokens=8, eos_id=2, strategy=Sampled(Sampling(temperature=2.0)), seed=3
        )
        assert all(ids and model.pad_id not in ids for ids in greedy + drawn), (greedy, drawn)
    finally:
        hook.remove()
    hook = model.generator.register_forward_hook(lambda module, args, out: out * torch.nan)
    try:
        for strategy in (Greedy(), Sampled()):
            with pytest.raises(UserError, match=r"^the model computes NaN for the next token's probabilities"):
                generate_ids(model, [[5, 6]], max_new_tokens=8, eos_id=2, strategy=strategy, seed=1)
    finally:
        hook.remove()
