"""Position information added to the embeddings: sinusoids (Sec 3.5), learned (Table 3 row E),
or none (where attention knows positions otherwise)."""

from __future__ import annotations

from typing import Literal, get_args

import torch
from torch import Tensor, nn

SinusoidLayout = Literal["interleaved", "concatenated"]


class SinusoidalPositionalEncoding(nn.Module):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).

    layout="interleaved" is the paper's equation (Sec 3.5); "concatenated" puts all sines, then
    all cosines, with the same frequencies (tensor2tensor and fairseq). No parameters: the first
    `max_len` rows are a non-persistent float32 buffer of a fixed size (so it moves with the
    module, checkpoints do not carry it, and DDP ranks hold the same one); positions past it are
    computed when asked for, so any length works.
    """

    table: Tensor  # (max_len, d_model) buffer

    def __init__(self, *, d_model: int, layout: SinusoidLayout = "interleaved", max_len: int = 1024) -> None:
        super().__init__()
        if d_model < 2 or d_model % 2:
            raise ValueError(f"d_model ({d_model}) must be divisible by 2 for sinusoidal positions")
        if layout not in get_args(SinusoidLayout):
            raise ValueError(f"layout ({layout!r}) must be one of {get_args(SinusoidLayout)}")
        self.d_model, self.layout = d_model, layout
        self.max_positions: int | None = None  # any position
        self.register_buffer("table", self._rows(0, max_len), persistent=False)

    def forward(self, length: int, offset: int = 0) -> Tensor:
        if offset < 0 or length < 0:
            raise ValueError(f"offset ({offset}) and length ({length}) must be >= 0")
        if offset + length <= self.table.size(0):
            return self.table[offset : offset + length]  # (length, d_model)
        return self._rows(offset, offset + length, self.table.device)  # past the table

    def _rows(self, start: int, end: int, device: torch.device | None = None) -> Tensor:
        # float64 so that the angles of long positions round once, when cast to float32
        pos = torch.arange(start, end, dtype=torch.float64, device=device)[:, None]  # (n, 1)
        two_i = torch.arange(0, self.d_model, 2, dtype=torch.float64, device=device)
        angles = pos / 10000.0 ** (two_i / self.d_model)  # (n, d_model/2)
        if self.layout == "concatenated":
            pe = torch.cat([angles.sin(), angles.cos()], dim=1)
        else:
            pe = torch.stack([angles.sin(), angles.cos()], dim=2).flatten(1)  # sin, cos, sin, ...
        return pe.float()  # (n, d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, layout={self.layout!r}"


class LearnedPositionalEmbedding(nn.Module):
    """One learned d_model vector per position 0 .. max_len-1 (Table 3 row E), position 0 at the
    table's row `first` (the rows before it are never read: RoBERTa's and fairseq's offset)."""

    def __init__(self, *, max_len: int, d_model: int, first: int = 0) -> None:
        super().__init__()
        if max_len < 1 or d_model < 1 or first < 0:
            raise ValueError(f"max_len ({max_len}) and d_model ({d_model}) must be >= 1, first ({first}) >= 0")
        self.max_len = self.max_positions = max_len
        self.first = first
        self.table = nn.Embedding(first + max_len, d_model)

    def forward(self, length: int, offset: int = 0) -> Tensor:
        if offset < 0 or length < 0:
            raise ValueError(f"offset ({offset}) and length ({length}) must be >= 0")
        if offset + length > self.max_len:
            raise ValueError(
                f"position {offset + length - 1} requested but learned positions cover only "
                f"0..{self.max_len - 1} (max_len={self.max_len}); raise max_len or shorten the input"
            )
        start = self.first + offset
        return self.table.weight[start : start + length]  # (length, d_model)


class NoPositions(nn.Module):
    """Zeros: the embeddings go in alone (rotary attention, ALiBi and T5's bias give positions)."""

    zero: Tensor  # (1, d_model) buffer

    def __init__(self, *, d_model: int) -> None:
        super().__init__()
        self.d_model = d_model
        self.max_positions: int | None = None
        self.register_buffer("zero", torch.zeros(1, d_model), persistent=False)

    def forward(self, length: int, offset: int = 0) -> Tensor:
        return self.zero.expand(length, self.d_model)  # (length, d_model), no copy
