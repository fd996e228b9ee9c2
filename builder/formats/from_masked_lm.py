"""transformers' masked language models' tensors in aiayn's encoder-only model (builder/graphs/
encoder_only.py): BERT's (BertForMaskedLM) and RoBERTa's (RobertaForMaskedLM), token for token
(the same ids on both sides: the caller orders the vocabulary). Both are post-norm stacks of
biased projections under learned positions, segment embeddings and an embedding LayerNorm, with
BERT's masked-LM head; RoBERTa's positions start after its padding id (`positional.first`:
`padding_idx + 1`)."""

from typing import Any

import torch
from torch import nn


@torch.no_grad()
def copy_bert(model: Any, hf: Any) -> None:
    """A BertForMaskedLM's tensors into aiayn's EncoderOnly `model` (the same sizes; ids as they are)."""
    embeddings = hf.bert.embeddings
    _copy_embeddings(model, embeddings, embeddings.position_embeddings.weight)
    _copy_layers(model, hf.bert.encoder.layer)
    head = hf.cls.predictions
    _copy_head(model, head.transform.dense, head.transform.LayerNorm, head.bias)


@torch.no_grad()
def copy_roberta(model: Any, hf: Any) -> None:
    """A RobertaForMaskedLM's tensors into aiayn's EncoderOnly `model`, whose positional.first is
    RoBERTa's padding_idx + 1 (RoBERTa numbers a sentence's positions from there)."""
    embeddings = hf.roberta.embeddings
    _copy_embeddings(model, embeddings, embeddings.position_embeddings.weight)
    _copy_layers(model, hf.roberta.encoder.layer)
    head = hf.lm_head
    _copy_head(model, head.dense, head.layer_norm, head.bias)


def _copy_embeddings(model: Any, embeddings: Any, positions: torch.Tensor) -> None:
    embed = model.src_embed
    embed.token.table.weight.copy_(embeddings.word_embeddings.weight)
    embed.positional.table.weight.copy_(positions)
    embed.segment.weight.copy_(embeddings.token_type_embeddings.weight)
    _copy_norm(embed.norm, embeddings.LayerNorm)


def _copy_layers(model: Any, layers: Any) -> None:
    for ours, theirs in zip(model.encoder.layers, layers, strict=True):
        attention, ffn = ours.sublayers
        views = attention.sublayer.projections()
        own = theirs.attention
        for name, linear in (("q", own.self.query), ("k", own.self.key), ("v", own.self.value), ("o", own.output.dense)):
            weight, bias = views[name]
            weight.copy_(linear.weight)
            bias.copy_(linear.bias)
        _copy_norm(attention.norm, own.output.LayerNorm)
        _copy_linear(ffn.sublayer.w_1, theirs.intermediate.dense)
        _copy_linear(ffn.sublayer.w_2, theirs.output.dense)
        _copy_norm(ffn.norm, theirs.output.LayerNorm)


def _copy_head(model: Any, dense: nn.Linear, norm: nn.LayerNorm, bias: torch.Tensor) -> None:
    _copy_linear(model.transform.dense, dense)
    _copy_norm(model.transform.norm, norm)
    model.generator.bias.copy_(bias)  # the projection's weight is the token embedding's (tied)


def _copy_linear(ours: nn.Linear, theirs: nn.Linear) -> None:
    ours.weight.copy_(theirs.weight)
    if ours.bias is not None:
        ours.bias.copy_(theirs.bias)


def _copy_norm(ours: Any, theirs: nn.LayerNorm) -> None:
    ours.weight.copy_(theirs.weight)
    ours.bias.copy_(theirs.bias)
