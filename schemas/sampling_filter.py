"""A sampling filter: a step between the model's next-token scores and the draw (transformers'
logits warpers). aiayn's first four are settings of sampling (`temperature`, `top_k`, `top_p`,
`epsilon`); `typical` is aiayn's registered filter, and a plugin registers another in the
`sampling_filter` slot the same way; every entry to sampling takes one by name: `aiayn translate --sampling --filter '{type: min_p, min_p: 0.1}'`, `aiayn generate
--filter ...`, `filters=[...]` in the Python API and in a request to `aiayn serve`."""

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from aiayn.schemas._base import Float32, Spec


class SamplingFilterSpec(Spec):
    """A `type: Literal["name"]` field and the filter's settings; its registration's build(spec)
    returns a function logits (n, V) -> logits (n, V), a removed token's -inf (at least one stays).
    It is applied after aiayn's own filters, to the tempered logits they leave."""

    if TYPE_CHECKING:
        type: str  # each subclass's `type: Literal["name"]` field, its tag


class TypicalSpec(SamplingFilterSpec):
    """Locally typical sampling (Meister et al. 2023, "Locally Typical Sampling"; transformers'
    typical_p): the tokens whose information, -log p, is nearest the distribution's entropy, the
    nearest first, until their probability reaches `mass`."""

    type: Literal["typical"] = "typical"
    mass: Float32 = Field(default=0.9, gt=0.0, le=1.0)
