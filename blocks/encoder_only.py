"""The encoder alone (BERT's graph, Devlin et al. 2019; RoBERTa's and ModernBERT's): embedding,
a stack of bidirectional self-attending layers, and the masked-LM head: the stack's output
transformed (a d_model x d_model layer, an activation, a norm) and projected to the vocabulary."""

from __future__ import annotations

from torch import Tensor, nn

from aiayn.blocks.context import LayerContext
from aiayn.blocks.embedding import OutputProjection
from aiayn.blocks.input import InputEmbedding
from aiayn.blocks.stack import TransformerStack


class HeadTransform(nn.Module):
    """norm(activation(dense(x))): BERT's BertPredictionHeadTransform, before the output projection."""

    def __init__(self, *, dense: nn.Linear, activation: nn.Module, norm: nn.Module) -> None:
        super().__init__()
        self.dense, self.activation, self.norm = dense, activation, norm

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(self.activation(self.dense(x)))


class EncoderOnly(nn.Module):
    """Tokens (B, S), right-padded, read both ways (padding masked as keys) -> the vocabulary's
    logits at every position (the masked-LM head's).

    :param embed: the input embedding (BERT's: tokens, positions and segments summed, normalised)
    :param encoder: the stack of bidirectional layers
    :param transform: the head's transform of the stack's output
    :param generator: the output projection (tied to the token embedding, with its own bias, in BERT)
    :param pad_id: the padding token"""

    cross_attention = False  # no layer attends a memory

    def __init__(
        self,
        *,
        embed: InputEmbedding,
        encoder: TransformerStack,
        transform: HeadTransform,
        generator: OutputProjection,
        pad_id: int,
    ) -> None:
        super().__init__()
        if pad_id < 0:
            raise ValueError(f"pad_id ({pad_id}) must be a token id >= 0")
        self.src_embed, self.encoder, self.transform, self.generator = embed, encoder, transform, generator
        self.pad_id = pad_id

    def forward(
        self,
        src: Tensor,
        tgt_in: Tensor | None = None,
        rows: Tensor | None = None,
        src_rows: Tensor | None = None,
        project: bool = True,
        segments: Tensor | None = None,
    ) -> Tensor:
        """src (B, S) -> logits (B, S, V) (project=False: the transformed states, (..., d_model)),
        as the training loss calls every graph: `tgt_in` is unused (what is predicted is src's own
        positions), `rows` (n,) flat indices into B * S of the positions the loss reads (the masked
        ones): then (n, V). `segments` (B, S): each token's segment (default: 0)."""
        y = self.encode(src, segments)
        if rows is not None:
            y = y.flatten(0, 1).index_select(0, rows)  # (n, d_model)
        y = self.transform(y)
        return self.generator(y) if project else y

    def encode(self, src: Tensor, segments: Tensor | None = None) -> Tensor:
        """The stack's output (B, S, d_model) of src (B, S): every position reads every token."""
        x = self.src_embed(src, segments=segments)
        return self.encoder(x, LayerContext(self_padding_mask=src.eq(self.pad_id)))

    def stacks(self) -> dict[str, TransformerStack]:
        """Its one stack, by name."""
        return {"encoder": self.encoder}
