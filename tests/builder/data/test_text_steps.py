"""Text steps are registrations, as blocks are: a step registered from outside (here in-process;
tests/examples/test_plugin.py installs one) is parsed by name in data.pipeline and `aiayn data
--pipeline`, applied, keyed in the cache by its distribution, and, where it tokenizes, undone by
its own `undo` (detokenisation) and scored as tokenized text."""

import re
import unicodedata
from typing import Literal

import pytest

import aiayn
from aiayn.builder.data.scoring import Scoring
from aiayn.builder.data.text import TextPipeline, check_not_tokenized, parse_steps
from aiayn.builder.errors import UserError
from tests.conftest import EXPERIMENTS, registry


class NfkcStep(aiayn.TextStepSpec):
    """Unicode NFKC (a user's own normaliser)."""

    type: Literal["nfkc"] = "nfkc"


class SplitDigitsStep(aiayn.TextStepSpec):
    """Digits split off as tokens, marked with `##` (a made-up tokenizer with its inverse)."""

    type: Literal["split_digits"] = "split_digits"

    @property
    def tokenizes(self) -> bool:
        return True

    @property
    def marks(self) -> tuple[str, ...]:
        return ("##",)


class SplitDigits:
    def __call__(self, line: str) -> str:
        return " ".join("".join(f" ##{c} " if c.isdigit() else c for c in line).split())

    def undo(self, line: str) -> str:
        return re.sub(r"##(\d)(?: (?=##))?", r"\1", line)


def register_steps(registry: aiayn.RegistryBuilder, split_digits=lambda spec, lang: SplitDigits()) -> None:
    registry.add(NfkcStep, slot="text_step", build=lambda spec, lang: lambda line: unicodedata.normalize("NFKC", line))
    registry.add(SplitDigitsStep, slot="text_step", build=split_digits)


@pytest.fixture
def registered() -> aiayn.Registry:
    return registry().extended(register_steps)


def test_a_registered_step_is_parsed_applied_keyed_and_undone(registered):
    steps = parse_steps(["nfkc", "lowercase", "split_digits"], registered)
    pipeline = TextPipeline(steps, "en", registered)
    assert pipeline("Ｆｉｖｅ ２5 Books") == "five ##2 ##5 books"
    assert pipeline.detokenize("five ##2 ##5 books") == "five 25 books"
    here = NfkcStep.__module__.partition(".")[0]  # registered by hand: its module; by a plugin: "name==version"
    assert registered.owner("nfkc") == here and f'"owners": ["{here}"]' in pipeline.key()
    demo = aiayn.load_experiment(
        EXPERIMENTS / "demo.yaml", ["data.pipeline=[nfkc, lowercase, split_digits]"], registry=registered
    )
    scoring = Scoring.of(demo.data)
    assert (scoring.tokenized, scoring.lowercase) == (True, True)


def test_a_step_after_a_tokenizing_one_and_a_misspelled_one_are_messages(registered):
    with pytest.raises(UserError) as e:
        parse_steps(["split_digits", "nfkc"], registered)
    assert (
        str(e.value)
        == "nfkc comes after split_digits in ['split_digits', 'nfkc']; tokenize last, as Moses' scripts do (lowercase, normalize_punctuation, moses_tokenize)"
    )
    with pytest.raises(UserError) as e:
        parse_steps(["nfkd"], registered)
    assert (
        str(e.value)
        == "'nfkd' is not a text pipeline step (lowercase, normalize_punctuation, moses_tokenize, nfkc, split_digits); did you mean 'nfkc'?"
    )


def test_a_corpus_with_a_steps_marks_is_refused_as_processed_already(registered, tmp_path):
    train = tmp_path / "train.en"
    train.write_text("a\nthree ##3 books\n")
    with pytest.raises(UserError) as e:
        check_not_tokenized(parse_steps(["split_digits"], registered), train, None)
    assert str(e.value) == (
        f"data.pipeline: {train} looks tokenized already (line 2 holds '##', which the text step split_digits writes), and "
        "split_digits would tokenize it again; point data.dir at the raw, untokenized corpus (aiayn data writes it)"
    )


def test_a_tokenizing_step_without_undo_is_refused():
    no_undo = registry().extended(lambda r: register_steps(r, split_digits=lambda spec, lang: str.split))
    with pytest.raises(UserError) as e:
        TextPipeline(parse_steps(["split_digits"], no_undo), "en", no_undo)
    assert (
        str(e.value) == "the text step 'split_digits' tokenizes, but its registration makes no undo(line): detokenizing needs one"
    )
