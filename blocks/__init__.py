"""nn.Modules of the Transformer (Vaswani et al., 2017) and its seams. No schema or builder
imports here: blocks take numbers and ready modules through keyword-only constructors."""

from aiayn.blocks.add_norm import AddNorm
from aiayn.blocks.attention import CrossAttention, MultiHeadAttention, SelfAttention
from aiayn.blocks.context import LayerContext, PackedRows
from aiayn.blocks.decoder_only import DecoderOnly
from aiayn.blocks.dropout import Dropout
from aiayn.blocks.embedding import OutputProjection, ScaledEmbedding
from aiayn.blocks.encoder_only import EncoderOnly, HeadTransform
from aiayn.blocks.feed_forward import GatedFeedForward, PositionwiseFeedForward
from aiayn.blocks.input import InputEmbedding
from aiayn.blocks.layer import TransformerLayer
from aiayn.blocks.masks import CausalMask, attention_mask
from aiayn.blocks.model import TransformerGraph, TransformerModel
from aiayn.blocks.position_bias import AlibiBias, SummedBias, T5RelativeBias
from aiayn.blocks.positional import LearnedPositionalEmbedding, NoPositions, SinusoidalPositionalEncoding, SinusoidLayout
from aiayn.blocks.qk_norm import QKNorm
from aiayn.blocks.rotary import Rotary
from aiayn.blocks.score import ScoreStep, Sigmoid, Softmax
from aiayn.blocks.stack import TransformerStack
from aiayn.blocks.state import DecoderState
from aiayn.blocks.sublayer import Sublayer
from aiayn.blocks.transformer import EncoderDecoder

__all__ = [
    "AddNorm",
    "AlibiBias",
    "CausalMask",
    "CrossAttention",
    "DecoderOnly",
    "DecoderState",
    "Dropout",
    "EncoderDecoder",
    "EncoderOnly",
    "GatedFeedForward",
    "HeadTransform",
    "InputEmbedding",
    "LayerContext",
    "LearnedPositionalEmbedding",
    "MultiHeadAttention",
    "NoPositions",
    "OutputProjection",
    "PackedRows",
    "PositionwiseFeedForward",
    "QKNorm",
    "Rotary",
    "ScaledEmbedding",
    "ScoreStep",
    "SelfAttention",
    "Sigmoid",
    "SinusoidLayout",
    "SinusoidalPositionalEncoding",
    "Softmax",
    "Sublayer",
    "SummedBias",
    "T5RelativeBias",
    "TransformerLayer",
    "TransformerGraph",
    "TransformerModel",
    "TransformerStack",
    "attention_mask",
]
