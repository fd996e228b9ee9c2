"""The encoder-only graph: BERT's and RoBERTa's settings built from aiayn's blocks equal
transformers' BertForMaskedLM and RobertaForMaskedLM on copied weights (padded rows and segments
too), counted exactly (`aiayn show`'s table adds up to num_parameters()); what does not fit the
graph is one line naming the field."""

import pytest
import torch
import yaml

from aiayn.blocks import EncoderOnly
from aiayn.builder.errors import UserError
from aiayn.builder.formats.from_masked_lm import copy_bert, copy_roberta
from aiayn.builder.graph import graph_of
from aiayn.builder.model.build import build_model
from aiayn.builder.model.size import count_params, param_table
from tests.conftest import load_experiment, validated_experiment

transformers = pytest.importorskip("transformers")
V, D, H, LAYERS, F, POSITIONS = 101, 32, 4, 2, 37, 40


def bert_experiment(**graph) -> dict:
    """BERT's settings (post-norm LayerNorm eps 1e-12, exact GELU, biases, learned positions, two
    segments and a LayerNorm of the embeddings, the output tied with a bias of its own) at small sizes."""
    norm = {"type": "layer_norm", "eps": 1e-12}
    return {
        "name": "bert-test",
        "model": {
            "graph": {"type": "encoder_only", **graph}, "d_model": D, "dropout": 0.0,
            "embedding": {"vocab_size": V, "share": "target_output", "scale": False, "output_bias": True, "segments": 2,
                          "norm": norm},
            "positional": {"type": "learned", "max_len": POSITIONS},
            "encoder": {
                "num_layers": LAYERS, "add_norm": {"placement": "post", "dropout": 0.0, "norm": norm},
                "layer": [{"type": "self_attention", "h": H, "d_k": D // H, "d_v": D // H},
                          {"type": "feed_forward", "d_ff": F, "activation": "gelu"}],
            },
        },
        "data": {"type": "demo", "side": "en", "max_len": POSITIONS - 2},
    }  # fmt: skip


def shaken(hf):
    """`hf` with its norms and biases away from ones and zeros, so that one copied wrong shows."""
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "LayerNorm" in name or "layer_norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.3)
    return hf.eval()


def bert_reference():
    config = transformers.BertConfig(vocab_size=V, hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=H,
                                     intermediate_size=F, max_position_embeddings=POSITIONS, type_vocab_size=2,
                                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=0)  # fmt: skip
    torch.manual_seed(0)
    return shaken(transformers.BertForMaskedLM(config))


def roberta_reference():
    config = transformers.RobertaConfig(vocab_size=V, hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=H,
                                        intermediate_size=F, max_position_embeddings=POSITIONS + 1, type_vocab_size=1,
                                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=0,
                                        bos_token_id=1, eos_token_id=2)  # fmt: skip
    torch.manual_seed(0)
    return shaken(transformers.RobertaForMaskedLM(config))


def batch():
    """Three rows of `<s> tokens </s>`, right-padded (the second and third shorter)."""
    ids = torch.randint(4, V, (3, 18), generator=torch.Generator().manual_seed(1))
    ids[:, 0] = 1
    for row, length in enumerate((18, 11, 6)):
        ids[row, length - 1] = 2
        ids[row, length:] = 0
    return ids


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_masked_lm_logits_equal_transformers_on_copied_weights_and_the_counts_are_exact(family):
    segments = 2 if family == "bert" else 1
    experiment = bert_experiment()
    experiment["model"]["embedding"]["segments"] = segments
    if family == "roberta":
        experiment["model"]["positional"]["first"] = 1  # its padding_idx (0 here) + 1
    spec = validated_experiment(experiment)
    hf, copy = (bert_reference(), copy_bert) if family == "bert" else (roberta_reference(), copy_roberta)
    model = build_model(spec).eval()
    assert isinstance(model, EncoderOnly)
    copy(model, hf)
    ids = batch()
    kept = ids.ne(0)
    types = torch.zeros_like(ids)
    if family == "bert":
        types[:, 9:] = 1  # a second segment
    with torch.no_grad():
        theirs = hf(input_ids=ids, attention_mask=kept.long(), token_type_ids=types).logits
        ours = model(ids, segments=types if family == "bert" else None)
        rows = kept.flatten().nonzero().flatten()
        at_rows = model(ids, rows=rows, segments=types if family == "bert" else None)
    torch.testing.assert_close(ours[kept], theirs[kept], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(at_rows, theirs[kept], rtol=1e-5, atol=1e-5)
    assert count_params(spec.model) == sum(p.numel() for p in model.parameters()) == hf.num_parameters()
    assert sum(each * times for _, each, times in param_table(spec.model)) == hf.num_parameters()


def test_the_table_names_the_head_and_the_embeddings_parts():
    spec = validated_experiment(bert_experiment(head_activation="gelu_tanh", head_bias=False))
    rows = {label: (each, times) for label, each, times in param_table(spec.model)}
    assert rows["masked-LM head transform (linear, no bias, gelu_tanh, norm)"] == (D * D + 2 * D, 1)
    assert graph_of(spec).name == "encoder-only" and spec.task == "masked_lm"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda e: e["model"].update(decoder=e["model"]["encoder"]),
         "model.decoder: graph encoder_only is the encoder alone, and model.decoder is given; drop it, or set "
         "model.graph.type=encoder_decoder"),
        (lambda e: e["model"].pop("encoder"),
         "model.encoder: Field required: graph encoder_only is the encoder alone (its bidirectional stack)"),
        (lambda e: e["data"].pop("side"),
         "data.side: graph encoder_only reads one language's text, and data.side is absent (a pair); set data.side to "
         "the language it reads"),
        (lambda e: e["model"]["graph"].update(mask_replace=0.9, mask_random=0.2),
         "model.graph.mask_random: mask_replace (0.9) and mask_random (0.2) share the predicted tokens, and add up to "
         "more than 1"),
        (lambda e: e["data"].update(static_shapes={"num_buckets": 3}),
         "data.static_shapes: not yet for graph encoder_only: its rows are masked as they are collated; drop it"),
        (lambda e: e["model"]["encoder"]["layer"].append({"type": "cross_attention", "h": H, "d_k": 8, "d_v": 8}),
         "model.encoder.layer[2].type: cross_attention needs an encoder output to attend to and is only allowed in the "
         "decoder; use self_attention here"),
    ],
)  # fmt: skip
def test_what_does_not_fit_the_graph_is_one_line_naming_the_field(change, message, tmp_path):
    experiment = bert_experiment()
    change(experiment)
    (tmp_path / "bert.yaml").write_text(yaml.safe_dump(experiment))
    with pytest.raises(UserError) as e:
        load_experiment(tmp_path / "bert.yaml")
    assert str(e.value).splitlines()[-1].strip() == message, str(e.value)
