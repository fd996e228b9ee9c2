"""The output projection and the label-smoothed loss together, in chunks of rows: the (n, V)
logits of the whole batch are never held (train.fused_output_loss).

Forward, a chunk at a time: logits = h W^T (+ b) in the matmul's dtype (bf16 under autocast), then
in fp32 their logsumexp, the value at the target and the row sum, from which (loss.py)
    loss = a * (lse - x_t) + b * (V * lse - sum_j x_j),    nll = lse - x_t.
Only h, W, the targets and lse (n floats) are kept. Backward recomputes each chunk's logits, and
with p = softmax(x) = exp(x - lse),
    d loss / dx = p - b - a * onehot(t),    d nll / dx = p - onehot(t),
gives d/dh = dx W and accumulates d/dW = dx^T h (and d/db = sum dx) chunk by chunk. So the peak
is one chunk of logits (and its gradient) instead of the batch's: at V = 37000 and 3125 target
tokens, 463 MB of fp32 logits and as much again for their gradient. The price is the projection
computed twice (a third more of its FLOPs in a step).
"""

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

CHUNK_ELEMENTS = 1 << 22  # logits of one chunk of rows (16 MiB in fp32)


def projected_smoothed_nll(
    hidden: Tensor, weight: Tensor, bias: Tensor | None, target: Tensor, *, eps: float, pad_id: int
) -> tuple[Tensor, Tensor, Tensor]:
    """`label_smoothed_nll(F.linear(hidden, weight, bias), target)`: sums over the non-padding
    targets of the smoothed loss and the plain NLL, and their count; hidden (..., d), target (...)."""
    hidden, target = hidden.reshape(-1, hidden.size(-1)), target.reshape(-1)
    row_weight = target.ne(pad_id).to(torch.float32)
    loss, nll = _ProjectedSmoothedNLL.apply(hidden, weight, bias, target, row_weight, eps)
    return loss, nll, row_weight.sum().to(torch.long)


def _chunks(n: int, vocab: int) -> list[slice]:
    rows = max(1, CHUNK_ELEMENTS // vocab)
    return [slice(start, min(start + rows, n)) for start in range(0, n, rows)]


class _ProjectedSmoothedNLL(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, hidden: Tensor, weight: Tensor, bias: Tensor | None, target: Tensor, row_weight: Tensor, eps: float
    ) -> tuple[Tensor, Tensor]:
        V = weight.size(0)
        ctx.ab = 1.0 - eps - eps / (V - 1), eps / (V - 1)
        device = hidden.device.type
        ctx.autocast = (device, torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))
        lse, nll, total = torch.empty(3, hidden.size(0), dtype=torch.float32, device=hidden.device)
        for rows in _chunks(hidden.size(0), V):
            x = F.linear(hidden[rows], weight, bias).float()  # (c, V): the only logits held
            lse[rows] = torch.logsumexp(x, dim=-1)
            nll[rows] = lse[rows] - x.gather(1, target[rows, None]).squeeze(1)
            total[rows] = V * lse[rows] - x.sum(dim=-1)  # the sum over all classes of -log p
        ctx.save_for_backward(hidden, weight, bias, target, row_weight, lse)
        a, b = ctx.ab
        nll, total = nll * row_weight, total * row_weight
        return (a * nll + b * total).sum(), nll.sum()

    @staticmethod
    def backward(ctx: Any, g_loss: Tensor, g_nll: Tensor) -> tuple[Tensor | None, ...]:
        hidden, weight, bias, target, row_weight, lse = ctx.saved_tensors
        a, b = ctx.ab
        device, enabled, dtype = ctx.autocast
        scale = ((g_loss + g_nll) * row_weight)[:, None]  # of p
        shift = (-g_loss * b * row_weight)[:, None]
        at_target = (-(g_loss * a + g_nll) * row_weight)[:, None]
        grad_hidden = torch.empty_like(hidden)
        grad_weight = torch.zeros_like(weight, dtype=torch.float32)
        grad_bias = torch.zeros(weight.size(0), dtype=torch.float32, device=weight.device) if bias is not None else None
        with torch.autocast(device, dtype=dtype, enabled=enabled):  # the forward's matmul dtype
            for rows in _chunks(hidden.size(0), weight.size(0)):
                x = F.linear(hidden[rows], weight, bias).float()
                g = torch.addcmul(shift[rows], (x - lse[rows, None]).exp_(), scale[rows])  # p * scale + shift
                g.scatter_add_(1, target[rows, None], at_target[rows])  # (c, V): d/dlogits
                low = g.to(x.dtype if not enabled else dtype)
                grad_hidden[rows] = (low @ weight.to(low.dtype)).to(hidden.dtype)
                grad_weight.addmm_(low.t().float(), hidden[rows].float())
                if grad_bias is not None:
                    grad_bias += g.sum(dim=0)
        return (
            grad_hidden,
            grad_weight.to(weight.dtype),
            None if grad_bias is None else grad_bias.to(bias.dtype),
            None,
            None,
            None,
        )
