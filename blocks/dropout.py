"""Dropout (Srivastava et al. 2014; Sec 5.4): zero each unit with probability p, scale the rest by
1 / (1 - p) in training; the identity in evaluation."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class Dropout(nn.Module):
    """nn.Dropout, faster on the CPU: there torch's bernoulli_ draws one random number per unit
    and is about half of dropout's time, so the keep-mask is drawn as 31 random bits per unit
    compared with round(p * 2^31) (the drop probability is p to within 2^-31). Elsewhere this
    is F.dropout, whose fused kernel is already fast."""

    def __init__(self, p: float = 0.1) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout ({p}) must be in [0, 1)")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu":
            return F.dropout(x, self.p, training=True)
        bits = torch.empty(x.shape, dtype=torch.int32, device=x.device).random_()  # uniform in [0, 2^31)
        keep = bits.ge_(round(self.p * 2**31)).to(x.dtype).mul_(1.0 / (1.0 - self.p))
        return x * keep

    def extra_repr(self) -> str:
        return f"p={self.p}"
