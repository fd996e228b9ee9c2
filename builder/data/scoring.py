"""How a run's output is scored, decided by its data.pipeline and read back from a score's
sacreBLEU signature (no torch here: `aiayn results` reads it)."""

from dataclasses import dataclass
from typing import Any

import sacrebleu

from aiayn.schemas.text import tokenize_step


@dataclass(frozen=True)
class Scoring:
    """How a run's output is scored: sacreBLEU on detokenized text (its 13a tokenizer), or, where
    data.pipeline tokenizes, on the tokenized text as it is (tokenize none), lowercased where the
    pipeline lowercases: the Multi30k literature's fairseq BLEU-4 on its tokenized, lowercased
    files. Each score carries its signature, which says which."""

    tokenized: bool = False
    lowercase: bool = False

    @classmethod
    def of(cls, data: Any) -> "Scoring":
        """The scoring of a data spec (its pipeline)."""
        return cls(tokenize_step(data.pipeline) is not None, any(step.lowercases for step in data.pipeline))

    @classmethod
    def of_signature(cls, signature: str | None) -> "Scoring":
        """The scoring a BLEU signature was made with (none: an older run's, sacreBLEU's default)."""
        fields = dict(part.split(":", 1) for part in (signature or "").split("|") if ":" in part)
        return cls(fields.get("tok") == "none", fields.get("case") == "lc")

    def bleu(self) -> sacrebleu.metrics.BLEU:
        if not self.tokenized:
            return sacrebleu.metrics.BLEU(lowercase=self.lowercase)
        # force: the text is tokenized on purpose, so no warning that it "forgot to detokenize"
        return sacrebleu.metrics.BLEU(tokenize="none", lowercase=self.lowercase, force=True)

    def chrf(self) -> sacrebleu.metrics.CHRF:
        return sacrebleu.metrics.CHRF(lowercase=self.lowercase)


DETOKENIZED = Scoring()
