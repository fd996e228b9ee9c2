"""results.json, as `aiayn train` writes it and `aiayn results` reads it (the keys of the
product contract: name, params, paper, reported, bleu, ppl, steps, seed)."""

from typing import Annotated

from pydantic import ConfigDict, Field

from aiayn.schemas._base import Spec
from aiayn.schemas.experiment import ReportedSpec

Count = Annotated[int, Field(ge=0)]


class PaperColumnsSpec(Spec):
    """Table 3's columns of the run's experiment ("uniform": false where layers differ), then the
    switches by which it departs from the paper: aiayn's below, and any other a block reports
    (a plugin's `switches`), kept as they are."""

    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)

    N: Count
    d_model: Count
    d_ff: Count | None = None
    h: Count | None = None
    d_k: Count | None = None
    d_v: Count | None = None
    P_drop: Annotated[float, Field(ge=0.0, lt=1.0)]
    eps_ls: Annotated[float, Field(ge=0.0, lt=1.0)]
    positional: str
    train_steps: Count
    # the switches of a model that departs from the paper (`aiayn show`'s paper columns)
    norm: str | None = None
    ffn: str | None = None
    kv_heads: Count | None = None
    rotary: float | None = None
    position_bias: str | None = None
    uniform: bool = True


class ResultsSpec(Spec):
    model_config = ConfigDict(extra="ignore", frozen=True, allow_inf_nan=False)  # newer keys are read past

    name: str
    params: Count
    paper: PaperColumnsSpec
    reported: ReportedSpec | None = None
    bleu: Annotated[float, Field(ge=0.0, le=100.0)] | None  # None: a language model's run, which translates nothing
    ppl: Annotated[float, Field(ge=1.0)]
    bpb: Annotated[float, Field(ge=0.0)] | None = None  # a language model's bits per byte of the validation text
    parse_f1: Annotated[float, Field(ge=0.0, le=100.0)] | None = None  # a parsing run's bracketing F1 of the validation split
    parse_f1_repaired: Annotated[float, Field(ge=0.0, le=100.0)] | None = None  # the same, its outputs' brackets mended first
    steps: Count
    seed: int | None = None  # train.seed; trials of two variants are paired by it
    sacrebleu_signature: str | None = None  # how `bleu` was scored (None: an older run, sacreBLEU's default)
