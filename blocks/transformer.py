"""The encoder-decoder Transformer (Sec 3, Figure 1)."""

from __future__ import annotations

from torch import Tensor

from aiayn.blocks.context import LayerContext, PackedRows
from aiayn.blocks.embedding import OutputProjection
from aiayn.blocks.input import InputEmbedding
from aiayn.blocks.model import TransformerGraph
from aiayn.blocks.stack import TransformerStack
from aiayn.blocks.state import DecoderState


class EncoderDecoder(TransformerGraph):
    """Encoder stack over the source, decoder stack over the shifted target, then logits (Figure 1).

    Tokens equal to `pad_id` are padding: masked as keys in every attention. `source_eos_id`: the
    token its sources end with (model.source_eos), which whoever feeds it appends (the data, the
    decoders); the model itself reads what it is given. The decoder can
    run one step at a time with a DecoderState (see `init_state`), giving the same logits as
    the full teacher-forced pass.
    """

    def __init__(
        self,
        *,
        src_embed: InputEmbedding,
        tgt_embed: InputEmbedding,
        encoder: TransformerStack,
        decoder: TransformerStack,
        generator: OutputProjection,
        pad_id: int,
        source_eos_id: int | None = None,
    ) -> None:
        super().__init__()
        if pad_id < 0:
            raise ValueError(f"pad_id ({pad_id}) must be a token id >= 0")
        self.src_embed, self.tgt_embed = src_embed, tgt_embed
        self.encoder, self.decoder = encoder, decoder
        self.generator = generator
        self.pad_id = pad_id
        self.source_eos_id = source_eos_id  # the token that ends every source it was trained on, if any

    def encode(self, src: Tensor, rows: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """src (B, S) -> memory (B, S, d_model), src_padding_mask (B, S) True at padding.

        `rows` (n,): flat indices into B * S of the non-padding tokens (in each row a prefix of
        it), counted on the host. Then a batch without padding has no mask at all (None: SDPA
        may take its fused kernels), and a batch with padding runs the encoder's position-wise
        layers on those n rows alone: memory is (n, d_model), to be decoded with `memory_rows`
        (`encoded_rows` gives it)."""
        x = self.src_embed(src)  # (B, S, d_model)
        packed = self.encoded_rows(src, rows)
        if rows is not None and packed is None:
            padding = None  # every token is real: read from rows' length, no device sync
        else:
            padding = src.eq(self.pad_id)  # (B, S)
        if packed is not None:
            x = packed.pack(x)  # (n, d_model)
        memory = self.encoder(x, LayerContext(self_padding_mask=padding, packed=packed))
        return memory, padding

    @staticmethod
    def encoded_rows(src: Tensor, rows: Tensor | None) -> PackedRows | None:
        """The rows `encode(src, rows)` keeps, or None where it keeps them all."""
        if rows is None or rows.numel() == src.numel():
            return None
        return PackedRows(rows, src.size(0), src.size(1))

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        memory_padding_mask: Tensor | None,
        state: DecoderState | None = None,
        rows: Tensor | None = None,
        memory_rows: PackedRows | None = None,
        project: bool = True,
    ) -> Tensor:
        """tgt (B, T), right-padded -> logits (B, T, V) (project=False: the decoder's output
        (..., d_model), for a loss that applies `generator` itself). With `state`, tgt holds only the new
        tokens. With `rows` (n,), flat indices into B * T of a prefix of each row (its
        non-padding tokens), the decoder computes those rows only and returns their logits (n, V).
        `memory_rows`: the memory holds only these rows of (B, S) (a packed `encode`)."""
        offset = 0 if state is None else state.length
        x = self.tgt_embed(tgt, offset)  # (B, T, d_model)
        packed = None
        if rows is not None:
            if state is not None:
                raise ValueError("rows select rows of a whole teacher-forced target: call decode without state")
            packed = PackedRows(rows, tgt.size(0), tgt.size(1))
            x = packed.pack(x)  # (n, d_model)
        ctx = LayerContext(
            # The causal mask alone is exact for a right-padded target: position i sees keys <= i,
            # none of them padding while i is a real token; what padding positions compute is
            # never read. Without a padding mask SDPA takes its fused causal kernels.
            self_padding_mask=None,
            memory=memory,
            memory_padding_mask=memory_padding_mask,
            state=state,
            packed=packed,
            memory_packed=memory_rows,
        )
        y = self.decoder(x, ctx)  # (B, T, d_model) or (n, d_model)
        if state is not None:
            state.advance(tgt.size(1))
        return self.generator(y) if project else y  # (B, T, V) or (n, V)

    def forward(
        self, src: Tensor, tgt_in: Tensor, rows: Tensor | None = None, src_rows: Tensor | None = None, project: bool = True
    ) -> Tensor:
        """Teacher forcing: src (B, S), tgt_in (B, T) (the target shifted right) -> logits (B, T, V).

        `rows` (n,): flat indices into B * T of the non-padding targets (in each row a
        prefix of it): then logits (n, V), and the decoder's position-wise layers, the output
        projection (the largest matrix product of a small model) and the loss skip the padding.
        `src_rows`: the same for the source (see `encode`): the encoder skips its padding."""
        memory, src_padding = self.encode(src, src_rows)
        return self.decode(tgt_in, memory, src_padding, rows=rows, memory_rows=self.encoded_rows(src, src_rows), project=project)

    # TransformerModel's defaults hold: sources of any lengths share a batch (padding is masked),
    # the encoder reads them without <s>, the decoder attends its output, and an output follows <s>

    def output_room(self, src: Tensor) -> int | None:
        """How many tokens an output may have: the rows of a learned target position table (None:
        sinusoids never end)."""
        return self.target_positions()

    def stacks(self) -> dict[str, TransformerStack]:
        return {"encoder": self.encoder, "decoder": self.decoder}

    def source_positions(self) -> int | None:
        return getattr(self.src_embed.positional, "max_len", None)

    def target_positions(self) -> int | None:
        return getattr(self.tgt_embed.positional, "max_len", None)
