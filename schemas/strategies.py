"""aiayn's decoding strategies (the `strategy` slot; schemas/strategy.py): the paper's beam search,
whose settings are the decode section's own (beam, alpha, length_penalty, early_stopping), greedy
decoding, and ancestral sampling with the filters that shape it (builder/decode/sampling.py)."""

from typing import Literal

from pydantic import Field

from aiayn.schemas._base import Float32
from aiayn.schemas.slots import AnySamplingFilter
from aiayn.schemas.strategy import StrategySpec


class BeamSearchSpec(StrategySpec):
    """Beam search (Sec. 6.1): decode.beam hypotheses a source, scored with decode.alpha's length penalty."""

    type: Literal["beam"] = "beam"


class GreedySpec(StrategySpec):
    """The most probable token at every step until </s>: a beam of 1 without a length penalty
    (transformers' num_beams=1, do_sample=False), one candidate a source."""

    type: Literal["greedy"] = "greedy"


class SamplingSpec(StrategySpec):
    """Each token drawn from the model's distribution, divided by `temperature`, kept to the `top_k` most
    probable (0: all), then to the fewest whose probability reaches `top_p`, then to those of probability
    >= `epsilon`, then to what each of `filters` leaves (a plugin's, the `sampling_filter` slot)."""

    type: Literal["sampling"] = "sampling"
    temperature: Float32 = Field(default=1.0, gt=0.0)
    top_k: int = Field(default=0, ge=0, le=2**31 - 1)
    top_p: Float32 = Field(default=1.0, gt=0.0, le=1.0)
    epsilon: Float32 = Field(default=0.0, ge=0.0, lt=1.0)
    filters: tuple[AnySamplingFilter, ...] = ()
