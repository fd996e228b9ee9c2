"""nn.Modules of the Transformer (Vaswani et al., 2017). No schema or builder imports here."""

from blocks.add_norm import AddNorm
from blocks.attention import AttentionKind, MultiHeadAttention
from blocks.context import LayerContext, PackedRows
from blocks.dropout import Dropout
from blocks.embedding import OutputProjection, ScaledEmbedding
from blocks.feed_forward import PositionwiseFeedForward
from blocks.input import InputEmbedding
from blocks.layer import TransformerLayer
from blocks.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, SinusoidLayout
from blocks.stack import TransformerStack
from blocks.state import DecoderState
from blocks.transformer import EncoderDecoder

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
    "TransformerLayer",
    "TransformerStack",
]
