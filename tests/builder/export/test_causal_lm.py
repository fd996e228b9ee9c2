"""A decoder-only language model exported: with GPT-2's settings a GPT2LMHeadModel folder, with
Llama's a LlamaForCausalLM one, which AutoTokenizer and AutoModelForCausalLM load and which
generate greedily as `aiayn generate` does, 20 of 20; CTranslate2's Generator alike; every other
setting refused by name."""

import pytest

from aiayn.builder.decode.load import load_run
from aiayn.builder.errors import UserError
from aiayn.builder.export import export
from tests.builder.cli.test_bad_inputs import cli
from tests.conftest import EXPERIMENTS

transformers = pytest.importorskip("transformers")
LM = EXPERIMENTS / "lm" / "demo.yaml"
TINY = ["dims.d_model=32", "dims.d_ff=64", "dims.h=2", "dims.d_k=16", "dims.d_v=16", "dims.N=2", "dims.vocab_size=400",
        "data.n_train=600", "data.n_valid=12", "data.n_test=12", "train.tokens_per_step=1500", "trainer.val_check_interval=null",
        "trainer.enable_progress_bar=false", "trainer.max_steps=6", "train.lr_schedule.warmup_steps=3"]  # fmt: skip
LLAMA = ["model.positional=none", "model.decoder.add_norm.norm.type=rms_norm",
         "model.decoder.layer[0]={type: causal_self_attention, h: 2, d_k: 16, d_v: 16, kv_heads: 1, bias: false, rotary: {base: 5000.0},"
         " attn_dropout: 0.1}",
         "model.decoder.layer[1]={type: gated_feed_forward, d_ff: 64, activation: silu, bias: false}", "model.embedding.share=none"]  # fmt: skip
GPT2 = ["model.embedding.scale=false", "model.decoder.layer[1].activation=gelu_tanh", "model.decoder.layer[0].attn_dropout=0.1"]
PROMPTS = [f"{a} {b}" for a in ("she", "two", "the man", "a") for b in ("bought", "saw", "has", "gave", "found")]


SENTENCEPIECE = {"unigram": ["data.tokenizer.type=sentencepiece"]}


@pytest.mark.parametrize(("family", "tokenizer"), [("gpt2", "bpe"), ("llama", "bpe"), ("llama", "unigram")])
def test_the_export_generates_as_aiayn_generate_does(family, tokenizer, tmp_path):
    settings = GPT2 if family == "gpt2" else [*GPT2[:1], *LLAMA]
    settings += SENTENCEPIECE["unigram"] if tokenizer == "unigram" else []
    code, _, err = cli("train", LM, *TINY, *settings, f"data.cache_dir={tmp_path / 'c'}", "--runs", tmp_path / "runs")
    assert code == 0, err
    run = tmp_path / "runs" / "lm-demo" / "version_0"
    ours = load_run(run).generate(PROMPTS, greedy=True, max_new_tokens=12)
    export(run, "huggingface", tmp_path / "hf")
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    assert type(hf).__name__ == {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM"}[family]
    model = load_run(run).spec.model  # the config says the dropouts the run trained with, not 0
    attention = model.decoder.layer[0]
    trained = {"attn_pdrop": attention.attn_dropout, "resid_pdrop": model.decoder.add_norm.dropout, "embd_pdrop": model.dropout}
    expected = trained if family == "gpt2" else {"attention_dropout": attention.attn_dropout}
    assert {k: getattr(hf.config, k) for k in expected} == expected and any(v > 0 for v in expected.values()), expected
    theirs = [tok.decode(hf.generate(**tok(p, return_tensors="pt"), max_new_tokens=12, do_sample=False)[0], skip_special_tokens=True)
              for p in PROMPTS]  # fmt: skip
    assert theirs == ours  # 20 of 20
    texts = [*PROMPTS, "  two  spaces ", "ＡＢＣ", "unseen 漢字 here", "a\tb"]  # SentencePiece's normalisation included
    run_tokenizer = load_run(run).tokenizer
    assert [tok(t).input_ids for t in texts] == [[1, *run_tokenizer.encode(t)] for t in texts]
    ctranslate2 = pytest.importorskip("ctranslate2")
    export(run, "ctranslate2", tmp_path / "ct2")
    generator = ctranslate2.Generator(str(tmp_path / "ct2"))
    tokens = [tok.convert_ids_to_tokens(tok(p).input_ids) for p in PROMPTS]
    texts = []
    for t in tokens:  # its length counts the prompt after <s>: one at a time
        [r] = generator.generate_batch(
            [t], max_length=len(t) + 11, sampling_topk=1, include_prompt_in_result=True, end_token="</s>"
        )
        texts.append(tok.decode(tok.convert_tokens_to_ids(r.sequences[0]), skip_special_tokens=True))
    assert texts == ours


def test_what_neither_family_holds_is_refused_by_name(tmp_path):
    from aiayn.builder.formats.to_causal_lm import family
    from tests.conftest import load_experiment

    refusals = {  # each names the setting and its value (post-norm and ALiBi shared one sentence, before)
        (): "model.embedding.scale (true): GPT-2's and Llama's embeddings are not scaled by sqrt(d_model)",  # the demo scales
        ("model.decoder.add_norm.placement=post",): "model.decoder.add_norm.placement (post): GPT-2 and Llama are pre-norm",
        ("model.decoder.position_bias={type: alibi}", "model.positional={type: none}"):
            "model.decoder.position_bias (alibi): GPT-2 and Llama add no bias to the attention scores (ALiBi's, T5's)",
        ("model.decoder.final_norm=false",): "model.decoder.final_norm (none): GPT-2 and Llama end the stack with a norm",
        ("model.embedding.output_bias=true",): "model.embedding.output_bias (true): GPT-2's and Llama's output projections have no bias",
    }  # fmt: skip
    for overrides, why in refusals.items():
        with pytest.raises(UserError) as e:
            family(load_experiment(LM, [*(GPT2 if overrides else []), *overrides]).model, "X")
        assert str(e.value) == f"cannot export to X: {why}"
    with pytest.raises(UserError, match=r"^cannot export to X as GPT-2: it needs biases in every projection$"):
        family(load_experiment(LM, [*GPT2, "model.decoder.layer[1].bias=false"]).model, "X")
    with pytest.raises(UserError, match=r"^cannot export to X: model.positional \(sinusoidal\): GPT-2's are learned"):
        family(load_experiment(LM, [*GPT2, "model.positional={type: sinusoidal}"]).model, "X")


def test_a_sentencepiece_model_numbered_by_its_own_vocabulary_is_refused_by_name():
    from aiayn.builder.data.spm import SentencePieceTokenizer, train_sentencepiece
    from aiayn.builder.formats.to_causal_lm import tokenizer

    lines = ["a man runs", "a dog jumps over a cat", "zwei Männer", "ＡＢＣ  café"] * 50
    for model_type in ("unigram", "bpe"):  # the ids SentencePiece gives, its normalisation included
        trained = train_sentencepiece(lambda: lines, 60, model_type=model_type)
        texts = [*lines[:4], "  two  spaces ", "unseen 漢字", "a\tb"]
        assert [tokenizer(trained)(t).input_ids for t in texts] == [[1, *trained.encode(t)] for t in texts]
    with pytest.raises(UserError) as e:
        tokenizer(SentencePieceTokenizer(trained.model, [*trained.pieces, "extra"]))
    assert str(e.value) == (
        "cannot export to Hugging Face transformers: this run's SentencePiece tokenizer numbers its pieces by a "
        "vocabulary of its own (a model from elsewhere, or opus-mt's), and tokenizer.json can hold only the model's own ids"
    )
