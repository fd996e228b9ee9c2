"""The text pipeline before BPE: the steps each line goes through, in order, on both sides.

None by default (the paper's text is raw, detokenized, cased). The Multi30k literature trains and
scores on Moses' `lowercase.perl | normalize-punctuation.perl -l L | tokenizer.perl -l L`:
`[lowercase, normalize_punctuation, moses_tokenize]`. A step is named by its `type`, alone
(`lowercase`) or with its options (`{type: moses_tokenize, escape: false}`).
"""

from collections.abc import Sequence
from typing import Any, Literal

from aiayn.schemas.slots import AnyTextStep
from aiayn.schemas.text_step import TextStepSpec

# what Moses' tokenizer writes for every ' and " with escaping on; raw text hardly ever holds them
# (web text does hold &amp;: Multi30k's raw English has 16)
MOSES_ESCAPES = ("&apos;", "&quot;")


class LowercaseStep(TextStepSpec):
    """Every character lowercased, as Moses' lowercase.perl (Perl's lc: Unicode lowercase)."""

    type: Literal["lowercase"] = "lowercase"

    @property
    def lowercases(self) -> bool:
        return True


class NormalizePunctuationStep(TextStepSpec):
    """Moses' normalize-punctuation.perl -l LANG (sacremoses' MosesPunctNormalizer): typographic
    quotes and dashes to ASCII, spaces around punctuation normalised, per language."""

    type: Literal["normalize_punctuation"] = "normalize_punctuation"


class MosesTokenizeStep(TextStepSpec):
    """Moses' tokenizer.perl -l LANG (sacremoses' MosesTokenizer): punctuation split from words.
    Output is detokenized by its inverse (MosesDetokenizer) where plain text is wanted."""

    type: Literal["moses_tokenize"] = "moses_tokenize"
    # & " ' < > [ ] | as &amp; &quot; &apos; ... as tokenizer.perl writes them (its -no-escape: false)
    escape: bool = True
    # tokenizer.perl -a: hyphens split off as @-@ (a-b -> a @-@ b)
    aggressive_dash_splits: bool = False

    @property
    def tokenizes(self) -> bool:
        return True

    @property
    def marks(self) -> tuple[str, ...]:
        return MOSES_ESCAPES if self.escape else ()


TextStep = AnyTextStep  # a registered step, by its `type` (aiayn's above, a plugin's)


def named_steps(value: Any) -> Any:
    """`lowercase` is short for `{type: lowercase}` (a field_validator(mode="before") of data.pipeline)."""
    if isinstance(value, (list, tuple)):
        return [{"type": step} if isinstance(step, str) else step for step in value]
    return value


def check_steps(steps: tuple[Any, ...]) -> tuple[Any, ...]:
    """Each step once, and a step that tokenizes last (a field_validator of data.pipeline)."""
    names = step_names(steps)
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"{', '.join(twice)} appears more than once in {names}; each step runs once")
    tokenizing = next((i for i, step in enumerate(steps[:-1]) if step.tokenizes), None)
    if tokenizing is not None:
        raise ValueError(
            f"{names[tokenizing + 1]} comes after {names[tokenizing]} in {names}; tokenize last, as Moses' scripts do "
            "(lowercase, normalize_punctuation, moses_tokenize)"
        )
    return steps


def step_names(steps: Sequence[Any]) -> list[str]:
    return [step.type for step in steps]


def tokenize_step(steps: Sequence[Any]) -> Any:
    """The pipeline's tokenizing step (its output is tokenized text, scored as such), or None."""
    return next((s for s in steps if s.tokenizes), None)
