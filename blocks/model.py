"""What decoding, scoring and training ask of a model, whichever graph it is: the base class of the
encoder-decoder (transformer.py), the decoder-only graph (decoder_only.py) and an ensemble of
either (builder/decode/ensemble.py). Where the graphs differ, the answer is set in the graph's own
file, and callers ask the model instead of its class (fairseq2's SequenceModel, torchtune's
TransformerDecoder and DeepFusionModel keep the same line). `TransformerGraph` is one model's
graph (either), with the parts an ensemble has not: a decoder stack, an output projection."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from aiayn.blocks.embedding import OutputProjection
from aiayn.blocks.input import InputEmbedding
from aiayn.blocks.stack import TransformerStack
from aiayn.blocks.state import DecoderState


class TransformerModel(nn.Module):
    """A sequence-to-sequence model as the searches, forced decoding and training call it.

    `encode(src)` gives what the decoder reads (the memory) and its padding; `decode(tgt, memory,
    padding, state)` the logits of tgt's positions (with a DecoderState, only the new tokens: the
    incremental contract of blocks/state.py); `output_room(src)` how many output tokens its
    positions leave; `init_state()` an empty cache. What differs between graphs, as data:

    - `pad_id`; `source_bos_id` / `source_eos_id`: the tokens a source is read between (None: none);
    - `equal_length_prompts`: sources of one length a batch (a padded prompt would leave holes);
    - `cross_attention`: whether decoder layers attend a memory (alignments are read from it);
    - `prefix_source`: the source is read bidirectionally, as a prefix every query sees;
    - `source_extra`: the positions a source takes besides its tokens, and `source_positions()`
      the positions of the table that reads sources (None: sinusoids and rotary never end);
    - `first_output_id(bos_id, sep_id)`: the token every output follows;
    - `decoder_queries(source, output)`: what the decoder's positions hold, of a source's and an
      output's items: the output (a decoder-only model's: the source, then the output, one sequence).
    """

    pad_id: int
    source_bos_id: int | None = None
    source_eos_id: int | None = None
    equal_length_prompts: bool = False
    cross_attention: bool = True
    prefix_source: bool = False

    def encode(self, src: Tensor, rows: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """src (B, S) -> the memory the decoder reads and its padding mask (B, S) (True at padding)."""
        raise NotImplementedError

    def decode(
        self, tgt: Tensor, memory: Tensor, memory_padding_mask: Tensor | None, state: DecoderState | None = None
    ) -> Tensor:
        """Logits (B, T, V) of tgt (B, T) after `memory`; with `state`, tgt holds only the new tokens."""
        raise NotImplementedError

    def init_state(self) -> DecoderState:
        """A fresh, empty cache for incremental decoding."""
        return DecoderState()

    def output_room(self, src: Tensor) -> int | Tensor | None:
        """How many tokens an output after src (B, S) may have (None: no table ends it)."""
        raise NotImplementedError

    @property
    def source_extra(self) -> int:
        """The positions a source takes besides its tokens (its </s>; a decoder-only model's <s> and <sep>)."""
        return int(self.source_eos_id is not None)

    def source_positions(self) -> int | None:
        """The positions of the learned table that reads sources (None: sinusoids and rotary never end)."""
        raise NotImplementedError

    def target_positions(self) -> int | None:
        """The positions of the learned table that reads outputs (None: sinusoids and rotary never end)."""
        raise NotImplementedError

    def first_output_id(self, bos_id: int, sep_id: int | None) -> int | None:
        """The token every output follows, of a tokenizer's <s> and <sep> (None: it needs the one it lacks)."""
        return bos_id

    def decoder_queries(self, source: list[Any], output: list[Any]) -> list[Any]:
        """What the decoder's positions hold of a `source` and the `output` after it (tokens, ids): the output."""
        return output

    def graph(self) -> TransformerGraph | None:
        """The one graph this model is, whose layers can be read (None: an ensemble, of several)."""
        return None


class TransformerGraph(TransformerModel):
    """One model (not an ensemble): its target (or only) embedding `tgt_embed`, its `decoder` stack
    (whose layers alignments and attention maps read) and its output projection `generator`."""

    tgt_embed: InputEmbedding
    decoder: TransformerStack
    generator: OutputProjection

    def graph(self) -> TransformerGraph:
        return self

    def stacks(self) -> dict[str, TransformerStack]:
        """Its stacks by name ("encoder", "decoder"), in the order they run."""
        raise NotImplementedError
