"""Tokenizers are registrations, as blocks are: a tokenizer type registered from outside (here
in-process: a word-level vocabulary of `tokenizers`, and a Tokenizer class of a plugin's own,
read back by its registration's load) is named by data.tokenizer.type, trains with the run, is
saved with it and read back by translate; a builder that returns anything else than two aiayn
Tokenizers is a PluginError that names the type (a plugin's bug: the run records it as failed)."""

import json
from typing import Literal

import pytest

import aiayn
from tests.builder.cli.test_bad_inputs import TINY, cli
from tests.conftest import EXPERIMENTS, registry


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
def words() -> aiayn.Registry:
    return registry().extended(lambda registry: registry.add(WordsSpec, slot="tokenizer", build=train_words))


def test_a_registered_tokenizer_trains_is_saved_and_read_back(words, tmp_path):
    code, out, err = cli("train", EXPERIMENTS / "demo.yaml", *TINY, "data.tokenizer={type: words}", "trainer.max_steps=2",
                         f"data.cache_dir={tmp_path / 'cache'}", "--runs", tmp_path / "runs", registry=words)  # fmt: skip
    assert code == 0, err
    assert "words: 300 of them" in out + err
    run = tmp_path / "runs" / "demo" / "version_0"
    translator = aiayn.load_run(run, registry=words)
    assert translator.src_tokenizer.name == "wordlevel" and translator.spec.data.tokenizer.type == "words"
    assert translator.src_tokenizer.encode("three books")[:1] != [3]  # a word it knows, not <unk>
    assert len(translator.translate(["three books"])) == 1
    code, out, _ = cli("show", EXPERIMENTS / "demo.yaml", "data.tokenizer={type: words}", registry=words)
    assert "tokenizer: words, one vocabulary" in out


def test_a_tokenizer_builder_must_return_two_tokenizers(tmp_path):
    broken = registry().extended(
        lambda registry: registry.add(WordsSpec, slot="tokenizer", build=lambda spec, given: "not tokenizers")
    )
    code, _, err = cli("train", EXPERIMENTS / "demo.yaml", *TINY, "data.tokenizer={type: words}", "--runs", tmp_path / "runs",
                       registry=broken)  # fmt: skip
    assert code == 2 and err == (
        "aiayn train: error: the builder of the tokenizer 'words' returned str; it must return (source, target, description), "
        "two aiayn Tokenizers (a FastTokenizer, say) and a str\n"
    )
    status = json.loads((tmp_path / "runs" / "demo" / "version_0" / "status.json").read_text())  # a plugin's bug: the run says so
    assert status["status"] == "failed" and "the builder of the tokenizer 'words' returned str" in status["error"]


class Chars(aiayn.Tokenizer):
    """A plugin's own tokenizer class: a token a character (a made-up kind, saved as its alphabet)."""

    kind = "chars"

    def __init__(self, alphabet: list[str]) -> None:
        self.alphabet = alphabet
        self.index = {c: i for i, c in enumerate(self.tokens())}

    def tokens(self) -> list[str]:
        return ["<pad>", "<s>", "</s>", "<unk>", *self.alphabet]

    def encode(self, text: str) -> list[int]:
        return [self.index.get(c, self.unk_id) for c in text]

    def decode(self, ids) -> str:
        return "".join(self.alphabet[i - 4] for i in map(int, ids) if 4 <= i < 4 + len(self.alphabet))

    def describe(self) -> str:
        return f"{len(self.alphabet)} characters"

    def to_json(self) -> str:
        return json.dumps({"alphabet": self.alphabet})

    @classmethod
    def load(cls, text: str, source: str) -> "Chars":
        return cls(json.loads(text)["alphabet"])


class CharsSpec(aiayn.TokenizerSpec):
    type: Literal["chars"] = "chars"


def train_chars(spec: CharsSpec, given: aiayn.TokenizerInputs):
    tokenizer = Chars(sorted({c for texts in (given.src, given.tgt) for line in texts() for c in line}))
    return tokenizer, tokenizer, f"chars: {len(tokenizer.alphabet)} of them"


def test_a_plugins_own_tokenizer_class_trains_is_saved_read_back_and_translates(tmp_path):
    from aiayn.builder.data.tokenizer import Tokenizer

    chars = registry().extended(lambda registry: registry.add(CharsSpec, slot="tokenizer", build=train_chars, load=Chars.load))
    code, out, err = cli("train", EXPERIMENTS / "demo.yaml", *TINY, "data.tokenizer={type: chars}", "trainer.max_steps=2",
                         f"data.cache_dir={tmp_path / 'cache'}", "--runs", tmp_path / "runs", registry=chars)  # fmt: skip
    assert code == 0, err
    run = tmp_path / "runs" / "demo" / "version_0"
    saved = json.loads((run / "tokenizer.json").read_text())
    assert saved["aiayn_tokenizer"] == "chars" and " " in saved["alphabet"]  # its type beside its own JSON
    translator = aiayn.load_run(run, registry=chars)
    assert type(translator.src_tokenizer) is Chars and translator.src_tokenizer.alphabet == saved["alphabet"]
    assert translator.src_tokenizer.encode("ab") == [translator.src_tokenizer.index["a"], translator.src_tokenizer.index["b"]]
    [line] = translator.translate(["three books"])
    assert isinstance(line, str)
    code, _, err = cli("evaluate", run, "--json", registry=chars)
    assert code == 0, err
    with pytest.raises(aiayn.UserError) as e:  # the plugin gone: named, not read as a Hugging Face tokenizer.json
        Tokenizer.load(run / "tokenizer.json", registry())
    assert str(e.value) == (  # registered here, not by an installed distribution: no pip line to offer
        f"{run / 'tokenizer.json'} was trained with 'chars' of test_tokenizer_types, which is not installed here; its record "
        "'test_tokenizer_types' names no distribution pip can install (name==version): install the plugin that registers those types"
    )
    with pytest.raises(aiayn.PluginError, match=r"load= is a tokenizer type's function"):
        registry().extended(lambda registry: registry.add(WordsSpec, slot="norm", build=train_words, load=Chars.load))


def test_a_tokenizer_whose_json_is_not_an_object_is_a_plugin_error(tmp_path):
    class Broken(Chars):
        def to_json(self) -> str:
            return "not json"

    with pytest.raises(aiayn.PluginError, match=r"^Broken.to_json must give a JSON object \(a tokenizer of type 'chars'\)$"):
        Broken(["a"]).save(tmp_path / "tokenizer.json")
    assert not (tmp_path / "tokenizer.json").exists()
