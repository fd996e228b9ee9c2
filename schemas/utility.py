"""The utility of minimum-Bayes-risk decoding: how much a candidate translation agrees with a
pseudo-reference (higher is better). aiayn's are sacreBLEU's sentence chrF and BLEU
(schemas/mbr_utilities.py); a plugin registers its own (a neural metric) in the `utility` slot."""

from typing import TYPE_CHECKING

from aiayn.schemas._base import Spec


class UtilitySpec(Spec):
    """A `type: Literal["name"]` field and the utility's own settings; its registration's build(spec)
    returns a function (candidates, references) -> a (len(candidates), len(references)) array."""

    if TYPE_CHECKING:
        type: str  # each subclass's `type: Literal["name"]` field, its tag
