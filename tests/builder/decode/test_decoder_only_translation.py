"""Decoder-only translation: pairs read as `<s> x <sep> y`, the loss on the target (or on both);
the search over the prompt equals its reference without a cache, beam 1 is greedy, and forced
scoring of the search's output gives its score, with the source read causally or as a prefix;
`aiayn train` then `translate`, `score` and `evaluate` work as for an encoder-decoder, and what
does not apply is refused by name."""

import json

import numpy as np
import pytest
import torch

from aiayn.builder.data.dataset import Example
from aiayn.builder.decode.forced import score_ids
from aiayn.builder.decode.load import load_run
from aiayn.builder.decode.search import beam_hypotheses, beam_search
from aiayn.builder.decode.translate import padded
from aiayn.builder.graphs.joint import JointCollator, JointLayout
from aiayn.builder.model.build import build_model
from aiayn.builder.train.callbacks import attention_figures, attention_weights
from aiayn.schemas.decode import DecodeSpec
from tests.builder.cli.test_bad_inputs import cli, snapshot
from tests.builder.decode.greedy import greedy
from tests.builder.model.test_decoder_only import gpt2_experiment
from tests.conftest import EXPERIMENTS, validated_experiment

SEP = 4


def model(mask: str):
    experiment = gpt2_experiment()
    experiment["model"]["source_mask"] = mask
    experiment["model"]["embedding"]["output_bias"] = True
    experiment["data"] = {"type": "demo", "max_len": 31}
    torch.manual_seed(0)
    built = build_model(validated_experiment(experiment)).eval()
    with torch.no_grad():
        built.generator.bias[2] = 2.8  # </s> likely enough to end hypotheses at different steps
    return built


def prompts(n: int = 8, length: int = 5) -> torch.Tensor:
    ids = torch.randint(5, 97, (n, length), generator=torch.Generator().manual_seed(n + length))
    return torch.cat([torch.ones(n, 1, dtype=torch.long), ids], dim=1)  # <s> x


def test_the_collator_reads_a_pair_as_one_sequence_its_loss_on_the_target():
    pair = Example(id=7, src=np.array([11, 12]), tgt=np.array([21, 22, 23]))
    for source_loss, prefix in ((False, True), (True, False)):
        batch = JointCollator(JointLayout(source_loss=source_loss, prefix=prefix), sep_id=SEP)(
            [pair, pair._replace(tgt=np.array([21]))]
        )
        assert batch.src.shape == (2, 0) and batch.tgt_in[0].tolist() == [1, 11, 12, SEP, 21, 22, 23]
        expected = [11, 12, SEP, 21, 22, 23, 2] if source_loss else [0, 0, 0, 21, 22, 23, 2]
        assert batch.tgt_out[0].tolist() == expected and batch.tgt_out[1].tolist()[-3:] == [2, 0, 0]
        assert batch.n_tgt_tokens == (7 + 5 if source_loss else 4 + 2) == len(batch.tgt_rows)
        assert batch.tgt_out.flatten()[batch.tgt_rows].tolist() == [t for t in batch.tgt_out.flatten().tolist() if t]
        assert (batch.prefix.tolist() if prefix else batch.prefix) == ([4, 4] if prefix else None)


@pytest.mark.parametrize("mask", ["causal", "prefix"])
def test_the_search_over_a_prompt_equals_its_reference_and_beam_one_is_greedy(mask):
    m, src = model(mask), prompts()
    settings = dict(bos_id=SEP, eos_id=2, max_len_b=6)
    assert greedy(m, src, **settings) == greedy(m, src, **settings, use_cache=False)
    for alpha in (0.0, 1.0):
        cached = beam_search(m, src, **settings, beam=3, alpha=alpha)
        assert cached == beam_search(m, src, **settings, beam=3, alpha=alpha, use_cache=False)
    assert beam_search(m, src, **settings, beam=1) == greedy(m, src, **settings)
    assert len({len(h) for h in greedy(m, src, **settings)}) > 1  # rows finish at different steps


@pytest.mark.parametrize("mask", ["causal", "prefix"])
def test_forced_scoring_of_the_search_output_gives_its_score(mask):
    m, src = model(mask), prompts(4, 6)
    found = beam_hypotheses(m, src, bos_id=SEP, eos_id=2, beam=3, alpha=0.6, max_len_b=5, n_best=2)
    sources = [row[1:].tolist() for row in src]  # score_ids puts the model's <s> before each
    flat = [(i, h) for i, hyps in enumerate(found) for h in hyps]
    scored = score_ids(m, [sources[i] for i, _ in flat], [h.ids for _, h in flat], DecodeSpec(alpha=0.6, max_len_b=5),
                       bos_id=SEP, eos_id=2, ended=[h.ended for _, h in flat])  # fmt: skip
    assert [s.score for s in scored] == pytest.approx([h.score for _, h in flat], abs=1e-4)


@pytest.mark.parametrize("mask", ["causal", "prefix"])
def test_attention_maps_are_of_the_one_sequence_masked_as_the_model_reads_it(mask):
    src, tgt = prompts(1, 5)[0].tolist(), [SEP, 40, 41]  # <s> x (6 tokens), <sep> y
    found = attention_weights(model(mask), src, tgt)
    assert found and all(stack == "decoder" and not reads for (stack, _, _), (_, reads) in found.items())
    readable = torch.ones(9, 9).tril().bool()
    if mask == "prefix":
        readable[:, :7] = True  # <s> x <sep>: read by every query
    for weights, _ in found.values():
        assert weights.shape[-2:] == (9, 9)
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
        assert torch.equal(weights[0].gt(0), readable.expand_as(weights[0]))


def test_a_prompt_with_padding_is_refused():
    m = model("causal")
    with pytest.raises(ValueError, match="give prompts of one length, without padding"):
        m(padded([[1, 5, 6], [1, 7]], 0), torch.tensor([[SEP], [SEP]]))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("joint")
    tiny = ["dims.d_model=32", "dims.d_ff=64", "dims.h=2", "dims.d_k=16", "dims.d_v=16", "dims.N=1", "dims.vocab_size=400",
            "data.side=null", "data.n_train=600", "data.n_valid=12", "data.n_test=12", "data.max_len=30",
            "train.tokens_per_step=1500", "trainer.val_check_interval=null", "trainer.enable_progress_bar=false",
            "decode.beam=2", "decode.max_len_b=5", "model.source_mask=prefix", "train.source_loss=true"]  # fmt: skip
    code, out, err = cli("train", EXPERIMENTS / "lm" / "demo.yaml", *tiny, "trainer.max_steps=4", f"data.cache_dir={root / 'c'}",
                         "--runs", root / "runs")  # fmt: skip
    assert code == 0, err
    return root / "runs" / "lm-demo" / "version_0"


def test_a_trained_decoder_only_translation_translates_scores_and_evaluates(run, tmp_path):
    results = json.loads((run / "results.json").read_text())
    assert (
        results["bleu"] is not None
        and results["paper"]["graph"] == "decoder-only"
        and results["paper"]["source_mask"] == "prefix"
    )
    assert json.loads((run / "tokenizer.json").read_text())["added_tokens"][4]["content"] == "<sep>"
    src = tmp_path / "src.txt"
    src.write_text("she bought three books\ntwo men\n")
    code, out, err = cli("translate", run, "--input", src, "--n-best", "2", "--scores")
    assert code == 0 and len(out.splitlines()) == 4, err
    best = [line.split("\t") for line in out.splitlines()[::2]]
    (tmp_path / "hyp.txt").write_text("".join(text + "\n" for _, _, text in best))
    code, scored, err = cli("score", run, "--src", src, "--tgt", tmp_path / "hyp.txt")
    assert code == 0, err
    assert len(scored.splitlines()) == 2  # the values: test_forced_scoring_of_the_search_output_gives_its_score
    before = snapshot(run)
    assert cli("translate", run, "--input", src, "--alignments")[::2] == (
        2, "aiayn translate: error: --alignments: they are read from cross-attention, which a decoder-only model has not\n"
    )  # fmt: skip
    assert cli("evaluate", run, "--json")[0] == 0 and snapshot(run) == before
    translator = load_run(run)
    [best] = translator.translate(["she bought three books"], beam=2)
    figures = attention_figures(translator.model, translator.src_tokenizer, translator.tgt_tokenizer,
                                "she bought three books", translator.spec.decode)  # fmt: skip
    assert list(figures) == ["valid/attention/decoder.layer0.causal_self"]  # TensorBoard's tags: the maps of `<s> x <sep> y`
    panel = figures["valid/attention/decoder.layer0.causal_self"].axes[0]
    tokens = [label.get_text() for label in panel.get_xticklabels()]
    assert tokens == [label.get_text() for label in panel.get_yticklabels()]
    tok = translator.tgt_tokenizer
    assert tokens == [tok.id_to_token(i) for i in [1, *tok.encode("she bought three books"), SEP, *tok.encode(best)]]


def test_a_tokenizer_without_the_separator_is_named(tmp_path):
    from aiayn.builder.data.bpe import train_tokenizer

    path = tmp_path / "tok.json"
    train_tokenizer(["a b c d e f"] * 20, 40).save(path)
    code, _, err = cli("train", EXPERIMENTS / "lm" / "demo.yaml", "data.side=null", "data.max_len=60", f"data.tokenizer={{type: file, path: {path}}}",
                       "trainer.max_steps=1", "--runs", tmp_path / "runs")  # fmt: skip
    assert code == 2 and err.endswith(
        "data: a decoder-only model translates <s> source <sep> target, and the tokenizer has no <sep>; train one here "
        "(aiayn's tokenizers add it), or give data.tokenizer a file whose vocabulary has <sep>\n"
    ), err
    assert not (tmp_path / "runs").exists()


def test_a_decoder_only_translations_batches_hold_the_pairs_an_encoder_decoders_would(tmp_path):
    """tokens_per_step counts a side, as an encoder-decoder's: a step of decoder-only translation
    holds the very pairs that the encoder-decoder's step holds (the same data, tokenizer and seed),
    each read as one sequence `<s> x <sep> y`; a language model's sentences count once."""
    from aiayn.builder.data.spec import make_datamodule
    from tests.conftest import load_experiment

    demo = ["data.n_train=3000", "data.max_len=60"]
    joint = make_datamodule(
        load_experiment(EXPERIMENTS / "lm" / "demo.yaml", ["data.side=null", *demo]), tmp_path / "a", max_tokens=1000
    )
    joint.prepare_data()
    pairwise = make_datamodule(load_experiment(EXPERIMENTS / "demo.yaml", demo), tmp_path / "b", max_tokens=1000,
                               tokenizers=(joint.src_tokenizer, joint.tgt_tokenizer))  # fmt: skip
    pairwise.prepare_data()
    batches = []
    for module in (joint, pairwise):
        module.setup("fit")
        batches.append(module.train_dataloader().batches.epoch_batches())
    assert type(joint.reading).__name__ == "JointReading" and type(pairwise.reading).__name__ == "Reading"
    assert joint.max_tokens == pairwise.max_tokens == 1000
    assert len(batches[0]) > 10 and batches[0] == batches[1]
    rows = next(iter(joint.train_dataloader()))
    assert (rows.tgt_in == SEP).sum(dim=1).tolist() == [1] * len(batches[0][0])  # each row one pair
    assert make_datamodule(load_experiment(EXPERIMENTS / "lm" / "demo.yaml"), tmp_path / "c", max_tokens=1000).max_tokens == 1000


def test_decoder_only_models_ensemble_sample_and_choose_by_mbr(run, tmp_path):
    src = tmp_path / "src.txt"
    src.write_text("she bought three books\ntwo men\n")
    alone = cli("translate", run, "--input", src, "--n-best", "2", "--scores")
    twice = cli("translate", run, run / "checkpoints" / "last.ckpt", "--input", src, "--n-best", "2", "--scores")  # two copies
    assert twice[0] == 0 and twice[1] == alone[1], twice[2]
    one = json.loads(cli("evaluate", run, "--json")[1])
    two = json.loads(cli("evaluate", run, run / "checkpoints" / "last.ckpt", "--json")[1])
    assert (two["bleu"], two["ppl"]) == (one["bleu"], pytest.approx(one["ppl"], rel=1e-5))
    code, out, err = cli("translate", run, "--input", src, "--sampling", "--n-best", "3", "--mbr", "chrf")
    assert code == 0 and len(out.splitlines()) == 2, err
