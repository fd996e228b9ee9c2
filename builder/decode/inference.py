"""What every inference object answers, whichever graph made it (builder/graph.py's
`Graph.inference`): a Translator, a LanguageModel, or a plugin graph's. The verbs and the server
ask it what it does instead of testing its class."""

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from aiayn.builder.data.tokenizer import Tokenizer
from aiayn.builder.errors import UserError


class Inference:
    """The questions: what it is (`task`, `kind`), which endpoints of `aiayn serve` and which verbs it answers,
    and the tokenizers of its input and output."""

    task: ClassVar[str]  # results.json's and GET /models' word: translation, language_model
    kind: ClassVar[str]  # in messages: "a translation model"
    endpoints: ClassVar[tuple[str, ...]]  # aiayn serve's, the one it is named by first
    verbs: ClassVar[frozenset[str]]  # the verbs it answers: translate, score, score --text, generate, evaluate
    reads_sources: ClassVar[bool]  # it is given sources to translate (scored as pairs); else lines of its own text

    @property
    def input_tokenizer(self) -> Tokenizer:
        """The tokenizer of what it is given (a source, a prompt)."""
        raise NotImplementedError

    @property
    def output_tokenizer(self) -> Tokenizer:
        """The tokenizer of what it writes."""
        raise NotImplementedError

    def decode_settings(self) -> dict[str, Any]:
        """The decode settings its calls use where a request names none, as GET /models lists them (the run's
        decode section; a model whose calls read only part of it says which)."""
        spec: Any = getattr(self, "spec")
        return spec.decode.model_dump(mode="json")

    def text_scores(self, lines: Sequence[str], max_tokens: int) -> dict[str, Any]:
        """What `aiayn evaluate` reports of lines of its own text (a model that `reads_sources` is given none).

        :param lines: the sentences, blank ones skipped
        :param max_tokens: padded tokens a batch"""
        raise NotImplementedError

    def text_report(self, data: str, metrics: dict[str, Any]) -> list[str]:
        """`text_scores`' numbers as `aiayn evaluate` prints them, a line each (after the checkpoint's).

        :param data: the text scored, in words
        :param metrics: what text_scores gave"""
        raise NotImplementedError

    def refusal(self, verb: str, path: Path | str) -> str:
        """Why `verb` is not one of its verbs, and what to use instead.

        :param verb: the verb refused
        :param path: the model, as the command named it"""
        return f"{path} is {self.kind}, which aiayn {verb} does not take"

    def check_verb(self, verb: str, path: Path | str) -> None:
        """Raise a UserError (its refusal) where `verb` is not one of its verbs.

        :param verb: the verb asked for: translate, score, score --text, generate, evaluate
        :param path: the model, as the command named it"""
        if verb not in self.verbs:
            raise UserError(self.refusal(verb, path))


class TextInference(Inference):
    """A model of one language's text with its one tokenizer and its run's settings (a language model, a
    masked one).

    :param model: the model, in eval mode
    :param spec: the run's ExperimentSpec
    :param tokenizer: its tokenizer
    :param checkpoint: the file the weights came from
    :param what: which model that is: "step 300", "the mean of ..." """

    reads_sources = False

    def __init__(self, model: Any, spec: Any, tokenizer: Tokenizer, checkpoint: Path, what: str) -> None:
        self.model, self.spec, self.tokenizer, self.checkpoint, self.what = model, spec, tokenizer, checkpoint, what

    @property
    def input_tokenizer(self) -> Tokenizer:
        return self.tokenizer

    @property
    def output_tokenizer(self) -> Tokenizer:
        return self.tokenizer
