"""aiayn's own text pipeline steps, registered as a plugin's are: `registry.add(Spec, slot="text_step",
build=make)`, where make(spec, lang) returns the step's function of a line (sacremoses' ports of
Moses' scripts here). A step whose spec `tokenizes` returns an object that also has `undo(line)`:
plain text from its output (Moses' detokenizer), what `--detokenize` and BLEU on raw text use."""

import re
from collections.abc import Callable
from typing import Any

from aiayn.schemas.text import LowercaseStep, MosesTokenizeStep, NormalizePunctuationStep

_DASH = re.compile(r" @-@ ")


def _normalize_punctuation(spec: NormalizePunctuationStep, lang: str) -> Callable[[str], str]:
    from sacremoses import MosesPunctNormalizer  # a second or so to import its tables

    return MosesPunctNormalizer(lang=lang).normalize


class MosesTokenize:
    """tokenizer.perl -l LANG, and its inverse (detokenizer.perl, escapes undone)."""

    def __init__(self, spec: MosesTokenizeStep, lang: str) -> None:
        from sacremoses import MosesTokenizer

        self.spec, self.lang, self.moses = spec, lang, MosesTokenizer(lang=lang)

    def __call__(self, line: str) -> str:
        return self.moses.tokenize(
            line, escape=self.spec.escape, aggressive_dash_splits=self.spec.aggressive_dash_splits, return_str=True
        )

    def undo(self, line: str) -> str:
        from sacremoses import MosesDetokenizer

        if self.spec.aggressive_dash_splits:
            line = _DASH.sub("-", line)
        return MosesDetokenizer(lang=self.lang).detokenize(line.split(), unescape=self.spec.escape)


def register_text_steps(register: Callable[..., Any]) -> None:
    """Register the built-in steps with `register` (a registering function's registry.add)."""
    register(LowercaseStep, slot="text_step", build=lambda spec, lang: str.lower)
    register(NormalizePunctuationStep, slot="text_step", build=_normalize_punctuation)
    register(MosesTokenizeStep, slot="text_step", build=MosesTokenize)
