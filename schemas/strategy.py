"""A decoding strategy: how a source's candidates are found (fairseq2's generator per algorithm).
aiayn's are beam search and sampling (schemas/strategies.py); a plugin registers another in the
`strategy` slot the same way, and every entry to decoding takes one by name: `decode.strategy` in
the YAML, `aiayn translate --strategy '{type: ..., ...}'` and `aiayn evaluate --strategy`,
`strategy=` in the Python API and in a request to `aiayn serve`."""

from typing import TYPE_CHECKING

from aiayn.schemas._base import Spec


class StrategySpec(Spec):
    """A `type: Literal["name"]` field and the strategy's settings; its registration's build(spec) returns an
    aiayn.Strategy (builder/decode/strategy.py): the value decoding hands the loop."""

    if TYPE_CHECKING:
        type: str  # each subclass's `type: Literal["name"]` field, its tag
