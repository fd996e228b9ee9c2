"""aiayn's own MBR utilities: sacreBLEU's sentence-level chrF (chrF++ with word_order 2) and BLEU."""

from typing import Literal

from pydantic import Field

from aiayn.schemas._base import PositiveInt
from aiayn.schemas.utility import UtilitySpec


class ChrfUtility(UtilitySpec):
    """sacreBLEU's sentence chrF (Popović 2015): character n-grams up to char_order, word n-grams
    up to word_order (2: chrF++), recall weighted beta times precision."""

    type: Literal["chrf"] = "chrf"
    char_order: PositiveInt = 6
    word_order: int = Field(default=0, ge=0, le=6)
    beta: PositiveInt = 2


class BleuUtility(UtilitySpec):
    """sacreBLEU's sentence BLEU (effective order: a short sentence without 4-gram matches is not zero)."""

    type: Literal["bleu"] = "bleu"
    tokenize: Literal["13a", "none", "intl", "char"] = "13a"
