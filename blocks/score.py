"""The score step of attention: the map from scores Q K^T / sqrt(d_k) (with the mask and the
biases) to the weights that mix the values. The paper's is a softmax over the keys (eq. 1); its
successors change only this step, so an attention is handed one, as it is handed its q/k modules.

A step defines `normalize(scores, allowed)`: scores (B, h, T, S), finite where `allowed`, to
weights. `attend` and `weights` are the one path forward and `attention_weights` (TensorBoard's
maps, alignments) both take: the weights times V. The softmax alone keeps SDPA's fused kernels for
its forward where nothing else touches the scores (no softcap); its `weights` are SDPA's maths
written out, and a test holds the two equal.

`softcap` (Gemma 2; transformers' `attn_logit_softcapping`): scores -> c * tanh(scores / c) before
the biases and the mask are added, as Gemma 2 caps them, for any step.
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class ScoreStep(nn.Module):
    """scores -> weights (B, h, T, S). Subclasses define `normalize` (and may override `attend`
    with a faster path whose output equals it, as the softmax's SDPA call does).

    :param softcap: scores capped to (-softcap, softcap) by softcap * tanh(score / softcap)
        before the step (Gemma 2's; None: not capped)"""

    def __init__(self, *, softcap: float | None = None) -> None:
        super().__init__()
        self.softcap: float | None = None
        self.capped(softcap)

    def capped(self, softcap: float | None) -> "ScoreStep":
        """This step with its scores capped at `softcap` (the attention's setting; None: not capped)."""
        if softcap is not None and not softcap > 0:
            raise ValueError(f"softcap ({softcap}) must be > 0: scores are capped to (-softcap, softcap)")
        self.softcap = softcap
        return self

    def normalize(self, scores: Tensor, allowed: Tensor | None) -> Tensor:
        """Weights from `scores` (B, h, T, S); `allowed` (broadcastable, bool) marks the keys a
        query may read (None: all); the scores elsewhere are -inf already."""
        raise NotImplementedError

    def weights(self, q: Tensor, k: Tensor, mask: Tensor | None, is_causal: bool) -> Tensor:
        """The weights (B, h, T, S) of queries q (B, h, T, d_k) over keys k (B, h_kv, S, d_k);
        `mask` and `is_causal` as SDPA takes them (attention_mask's)."""
        T, S = q.size(-2), k.size(-2)
        k = k.repeat_interleave(q.size(1) // k.size(1), dim=1)  # (B, h, S, d_k): query head i reads K/V head i // group
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, h, T, S)
        if self.softcap is not None:
            scores = self.softcap * torch.tanh(scores / self.softcap)
        if is_causal:
            mask = torch.ones(T, S, dtype=torch.bool, device=q.device).tril()
        allowed = None
        if mask is not None and mask.dtype == torch.bool:
            allowed = mask
            scores = scores.masked_fill(~mask, float("-inf"))
        elif mask is not None:  # a bias, -inf where a key may not be read
            scores = scores + mask
            allowed = mask > float("-inf")
        return self.normalize(scores, allowed)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool, dropout_p: float) -> Tensor:
        """The heads' output (B, h, T, d_v): the weights, dropped out at `dropout_p`, times V."""
        weights = F.dropout(self.weights(q, k, mask, is_causal), p=dropout_p, training=dropout_p > 0)
        return weights @ v.repeat_interleave(q.size(1) // v.size(1), dim=1)  # (B, h, T, d_v)

    def extra_repr(self) -> str:
        return "" if self.softcap is None else f"softcap={self.softcap:g}"


class Softmax(ScoreStep):
    """softmax over the keys (eq. 1), the paper's; forward by SDPA (its fused kernels where they
    apply) unless the scores are capped."""

    def normalize(self, scores: Tensor, allowed: Tensor | None) -> Tensor:
        return scores.softmax(dim=-1)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool, dropout_p: float) -> Tensor:
        if self.softcap is not None:  # SDPA cannot cap its scores
            return super().attend(q, k, v, mask, is_causal, dropout_p)
        gqa = {"enable_gqa": True} if k.size(1) != q.size(1) else {}
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal, **gqa)


class Sigmoid(ScoreStep):
    """Sigmoid attention (Ramapuram et al. 2024): each weight sigmoid(score + b) on its own, no
    normalisation over the keys; b = -log n by default, n the keys the query reads (a sentence's
    length in the encoder; i + 1 at position i under a causal mask, so that decoding one step at a
    time gives the full forward's weights), or a fixed `bias`."""

    def __init__(self, *, bias: float | None = None, softcap: float | None = None) -> None:
        super().__init__(softcap=softcap)
        self.bias = bias

    def normalize(self, scores: Tensor, allowed: Tensor | None) -> Tensor:
        if self.bias is not None:
            return torch.sigmoid(scores + self.bias)
        n = (
            scores.new_tensor(float(scores.size(-1)))
            if allowed is None
            else allowed.sum(-1, keepdim=True).clamp(min=1).to(scores.dtype)
        )
        return torch.sigmoid(scores - torch.log(n))  # -inf (a key not read) -> 0

    def extra_repr(self) -> str:
        return ", ".join(p for p in ("bias=-log n" if self.bias is None else f"bias={self.bias:g}", super().extra_repr()) if p)
