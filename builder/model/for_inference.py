"""What a checkpoint, a run or an opus-mt folder loads into for translating: the model, its
experiment and tokenizers, and where they came from (checkpoint.py and from_marian.py make it)."""

from pathlib import Path
from typing import NamedTuple

from aiayn.blocks import TransformerModel
from aiayn.builder.data.tokenizer import Tokenizer
from aiayn.schemas.experiment import ExperimentSpec


class ForInference(NamedTuple):
    model: TransformerModel  # in eval mode, on the CPU
    spec: ExperimentSpec
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer  # the same object as src_tokenizer for a shared vocabulary
    checkpoint: Path  # the file the weights came from
    what: str  # which model that is, in a few words: "step 300", "the mean of step...ckpt, ..."
    step: int | None  # the step it was trained to (an averaged model's: its run's last), where known
