"""The base of a text pipeline step's spec (schemas/text.py has aiayn's; a plugin registers its own)."""

from typing import TYPE_CHECKING

from aiayn.schemas._base import Spec


class TextStepSpec(Spec):
    """A step each line goes through before the tokenizer, on both sides (data.pipeline): a
    `type: Literal["name"]` field, its own fields, and what its output is, which the scoring,
    detokenisation and the checks of a corpus read."""

    if TYPE_CHECKING:
        type: str  # each subclass's `type: Literal["name"]` field, its tag in the YAML

    @property
    def tokenizes(self) -> bool:
        """Its output is tokenized text: it comes last, BLEU is scored on it as it is (tokenize
        none), and its implementation's `undo` gives plain text back (aiayn translate --detokenize)."""
        return False

    @property
    def lowercases(self) -> bool:
        """Its output is lowercased: BLEU against a raw reference is scored lowercased."""
        return False

    @property
    def marks(self) -> tuple[str, ...]:
        """Strings its output holds and raw text hardly ever does (Moses' escapes): a corpus that
        holds them has been through this step already, and is refused."""
        return ()
