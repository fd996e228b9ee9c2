"""Tokenizers are registrations, as blocks are: a tokenizer type registered from outside (here
in-process: a word-level vocabulary of `tokenizers`) is named by data.tokenizer.type, trains with
the run, is saved with it and read back by translate; a builder that returns anything else than
two aiayn Tokenizers is a PluginError that names the type (a plugin's bug: the run records it as failed)."""

import json
from typing import Literal

import pytest

import aiayn
from aiayn.builder.registry import unregister
from tests.builder.cli.test_bad_inputs import TINY, cli
from tests.conftest import EXPERIMENTS


class WordsSpec(aiayn.TokenizerSpec):
    """Whole words, the most frequent vocab_size of them (a made-up tokenizer type)."""

    type: Literal["words"] = "words"
    min_frequency: aiayn.PositiveInt = 1


def train_words(spec: WordsSpec, given: aiayn.TokenizerInputs):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    hf = Tokenizer(models.WordLevel(unk_token="<unk>"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(
        vocab_size=given.vocab_size, min_frequency=spec.min_frequency, special_tokens=["<pad>", "<s>", "</s>", "<unk>"]
    )
    hf.train_from_iterator((line for texts in (given.src, given.tgt) for line in texts()), trainer)
    tokenizer = aiayn.FastTokenizer(hf, source="the words tokenizer")
    return tokenizer, tokenizer, f"words: {tokenizer.vocab_size} of them"


@pytest.fixture
def words():
    aiayn.register(WordsSpec, slot="tokenizer", build=train_words)
    yield
    unregister(WordsSpec)


def test_a_registered_tokenizer_trains_is_saved_and_read_back(words, tmp_path):
    code, out, err = cli("train", EXPERIMENTS / "demo.yaml", *TINY, "data.tokenizer={type: words}", "trainer.max_steps=2",
                         f"data.cache_dir={tmp_path / 'cache'}", "--runs", tmp_path / "runs")  # fmt: skip
    assert code == 0, err
    assert "words: 300 of them" in out + err
    run = tmp_path / "runs" / "demo" / "version_0"
    translator = aiayn.load_run(run)
    assert translator.src_tokenizer.kind == "wordlevel" and translator.spec.data.tokenizer.type == "words"
    assert translator.src_tokenizer.encode("three books")[:1] != [3]  # a word it knows, not <unk>
    assert len(translator.translate(["three books"])) == 1
    code, out, _ = cli("show", EXPERIMENTS / "demo.yaml", "data.tokenizer={type: words}")
    assert "tokenizer: words, one vocabulary" in out


def test_a_tokenizer_builder_must_return_two_tokenizers(tmp_path):
    aiayn.register(WordsSpec, slot="tokenizer", build=lambda spec, given: "not tokenizers")
    try:
        code, _, err = cli("train", EXPERIMENTS / "demo.yaml", *TINY, "data.tokenizer={type: words}", "--runs", tmp_path / "runs")
    finally:
        unregister(WordsSpec)
    assert code == 2 and err == (
        "aiayn train: error: the builder of the tokenizer 'words' returned str; it must return (source, target, description), "
        "two aiayn Tokenizers (a FastTokenizer, say) and a str\n"
    )
    status = json.loads((tmp_path / "runs" / "demo" / "version_0" / "status.json").read_text())  # a plugin's bug: the run says so
    assert status["status"] == "failed" and "the builder of the tokenizer 'words' returned str" in status["error"]
