"""A text step from outside aiayn: Unicode NFKC (full-width letters and digits, ligatures and the
like folded to their plain forms), `data.pipeline: [nfkc, ...]`. A spec, a function of a line
and one registration; translate, evaluate, score and the cache of processed text pick it up."""

import unicodedata
from typing import Literal

import aiayn


class NfkcSpec(aiayn.TextStepSpec):
    type: Literal["nfkc"] = "nfkc"


def register(registry: aiayn.RegistryBuilder) -> None:
    registry.add(NfkcSpec, slot="text_step", build=lambda spec, lang: lambda line: unicodedata.normalize("NFKC", line))
