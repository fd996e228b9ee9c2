"""What every inference object answers, whichever graph made it (builder/graph.py's
`Graph.inference`): a Translator, a LanguageModel, or a plugin graph's. The verbs and the server
ask it what it does instead of testing its class."""

from pathlib import Path
from typing import ClassVar

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
