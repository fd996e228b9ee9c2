"""Dropout (Srivastava et al. 2014; Sec 5.4): zero each unit with probability p, scale the rest by
1 / (1 - p) in training; the identity in evaluation."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn


class Dropout(nn.Module):
    """nn.Dropout, faster on the CPU. There torch draws every unit's random number from one
    Mersenne Twister, on one core, and that is most of dropout's time; here 32 random bits per
    unit come from numpy's PCG64, seeded by one draw from torch's generator (so torch.manual_seed
    and a restored RNG state give the same masks), and a unit is kept when its bits, read as a
    signed integer, are at least -2^31 + round(p * 2^32) (the drop probability is p to within
    2^-33). Elsewhere, and inside torch.compile (which generates its own random bits, and
    cannot trace numpy's generator without a graph break), this is F.dropout.

    :param p: the probability that a unit is dropped, in [0, 1)"""

    def __init__(self, p: float = 0.1) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout ({p}) must be in [0, 1)")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu" or torch.compiler.is_compiling():
            return F.dropout(x, self.p, training=True)
        return x * _keep_mask(x.shape, self.p, x.dtype)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def _keep_mask(shape: torch.Size, p: float, dtype: torch.dtype) -> Tensor:
    """0 (dropped) or 1 / (1 - p) (kept) per unit, on the CPU."""
    n = shape.numel()
    seed = int(torch.randint(2**63 - 1, (), dtype=torch.int64))
    raw = np.random.PCG64(seed).random_raw((n + 1) // 2)  # 64 random bits serve two units
    bits = torch.from_numpy(raw.view(np.int32)[:n]).view(shape)  # uniform over all 2^32 values
    return bits.ge_(-(2**31) + round(p * 2**32)).to(dtype).mul_(1.0 / (1.0 - p))
