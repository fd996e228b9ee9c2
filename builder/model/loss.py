"""Label-smoothed cross-entropy (Sec. 5.4, Szegedy et al. 2016).

The target class gets probability 1 - eps and each of the V-1 other classes eps / (V-1); the
loss is the cross-entropy against that distribution, summed over the non-padding targets.
(PyTorch's `cross_entropy(label_smoothing=e)` spreads e over all V classes: it equals this one at
e = eps * V / (V - 1).) Perplexity is exp(nll / count).

Two implementations of the same function:
  - `label_smoothed_nll`: the readable reference (fp32 log-probabilities of every token);
  - `smoothed_nll_chunked`: what training uses. It never holds fp32 (N, V) log-probabilities:
    per row it keeps lse = logsumexp(x), and with a = 1 - eps - eps/(V-1), b = eps/(V-1),
        loss = a * (lse - x_t) + b * (V * lse - sum_j x_j),   d loss / dx = softmax(x) - b - a * onehot(t),
    computed over chunks of rows in fp32 whatever the logits' dtype; padding rows weigh 0.
"""

import torch
import torch.nn.functional as F
from torch import Tensor

_CHUNK_ELEMENTS = 1 << 24  # fp32 elements of one chunk of rows (64 MiB)


def label_smoothed_nll(logits: Tensor, target: Tensor, *, eps: float, pad_id: int) -> tuple[Tensor, Tensor, Tensor]:
    """Sums over the non-padding targets of: the smoothed loss, the plain NLL, and their count."""
    lprobs = F.log_softmax(logits.float(), dim=-1).flatten(0, -2)  # (N, V)
    target = target.flatten()  # (N,)
    keep = target != pad_id
    lprobs, target = lprobs[keep], target[keep]
    nll = -lprobs.gather(1, target[:, None]).squeeze(1)  # (n,)
    V = lprobs.size(-1)
    others = -lprobs.sum(dim=-1) - nll  # sum of -log p over the V-1 non-target classes
    loss = (1.0 - eps) * nll + eps / (V - 1) * others
    count = torch.tensor(target.numel(), device=logits.device)
    return loss.sum(), nll.sum(), count


def smoothed_nll_chunked(logits: Tensor, target: Tensor, *, eps: float, pad_id: int) -> tuple[Tensor, Tensor, Tensor]:
    """`label_smoothed_nll`, in chunks of rows, with its gradient in closed form (see above)."""
    V = logits.size(-1)
    flat, target = logits.reshape(-1, V), target.reshape(-1)
    weight = target.ne(pad_id).to(torch.float32)
    loss, nll = _SmoothedNLL.apply(flat, target, weight, eps)
    return loss, nll, weight.sum().to(torch.long)


def _chunks(n: int, vocab: int) -> list[slice]:
    rows = max(1, _CHUNK_ELEMENTS // vocab)
    return [slice(start, min(start + rows, n)) for start in range(0, n, rows)]


class _SmoothedNLL(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:  # type: ignore[override]
        N, V = logits.shape
        a, b = 1.0 - eps - eps / (V - 1), eps / (V - 1)
        lse = torch.empty(N, dtype=torch.float32, device=logits.device)
        nll = torch.empty_like(lse)
        total = torch.empty_like(lse)  # sum over all classes of -log p
        for rows in _chunks(N, V):
            x = logits[rows].float()  # (n, V)
            lse[rows] = torch.logsumexp(x, dim=-1)
            nll[rows] = lse[rows] - x.gather(1, target[rows, None]).squeeze(1)
            total[rows] = V * lse[rows] - x.sum(dim=-1)
        ctx.save_for_backward(logits, target, weight, lse)
        ctx.ab = (a, b)
        nll = nll * weight
        return (a * nll + b * total * weight).sum(), nll.sum()

    @staticmethod
    def backward(ctx, g_loss: Tensor, g_nll: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        logits, target, weight, lse = ctx.saved_tensors
        a, b = ctx.ab
        grad = torch.empty_like(logits)
        at_target = -(g_loss * a + g_nll)  # what d/dx adds at the target class
        for rows in _chunks(*logits.shape):
            p = (logits[rows].float() - lse[rows, None]).exp_()  # softmax, (n, V)
            g = p.mul_(g_loss + g_nll).sub_(g_loss * b)
            g.scatter_add_(1, target[rows, None], at_target.expand(g.size(0), 1))
            grad[rows] = g.mul_(weight[rows, None])
        return grad, None, None, None
