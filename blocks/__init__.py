"""nn.Modules of the Transformer (Vaswani et al., 2017) and its seams. No schema or builder
imports here: blocks take numbers and ready modules through keyword-only constructors."""

from aiayn.blocks.add_norm import AddNorm
from aiayn.blocks.attention import AttentionKind, MultiHeadAttention
from aiayn.blocks.context import LayerContext, PackedRows
from aiayn.blocks.dropout import Dropout
from aiayn.blocks.embedding import OutputProjection, ScaledEmbedding
from aiayn.blocks.feed_forward import PositionwiseFeedForward
from aiayn.blocks.input import InputEmbedding
from aiayn.blocks.layer import TransformerLayer
from aiayn.blocks.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, SinusoidLayout
from aiayn.blocks.stack import TransformerStack
from aiayn.blocks.state import DecoderState
from aiayn.blocks.sublayer import Sublayer
from aiayn.blocks.transformer import EncoderDecoder

__all__ = [
    "AddNorm",
    "AttentionKind",
    "DecoderState",
    "Dropout",
    "EncoderDecoder",
    "InputEmbedding",
    "LayerContext",
    "LearnedPositionalEmbedding",
    "MultiHeadAttention",
    "OutputProjection",
    "PackedRows",
    "PositionwiseFeedForward",
    "ScaledEmbedding",
    "SinusoidLayout",
    "SinusoidalPositionalEncoding",
    "Sublayer",
    "TransformerLayer",
    "TransformerStack",
]
