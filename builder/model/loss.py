"""Label-smoothed cross-entropy (Sec. 5.4, Szegedy et al. 2016).

The target class gets probability 1 - eps and each of the V-1 other classes eps / (V-1); the
loss is the cross-entropy against that distribution, summed over the non-padding targets.
(PyTorch's `cross_entropy(label_smoothing=e)` spreads e over all V classes: it equals this one at
e = eps * V / (V - 1).) Perplexity is exp(nll / count).

Three implementations of the same function:
  - `label_smoothed_nll`: the readable reference (fp32 log-probabilities of every token);
  - `smoothed_nll_fusable`: the closed form below as plain tensor operations, for torch.compile
    (train.compile) to fuse into a forward and a backward kernel that read the logits in their
    own dtype; in eager mode it would make (N, V) fp32 copies;
  - `smoothed_nll_chunked`: what eager training uses. It never keeps (N, V) log-probabilities:
    with a = 1 - eps - eps/(V-1), b = eps/(V-1), lse = logsumexp(x),
        loss = a * (lse - x_t) + b * (V * lse - sum_j x_j),   d loss / dx = softmax(x) - b - a * onehot(t),
    in fp32 whatever the logits' dtype; a padding row has weight 0, folded into each row's scale
    and shift of softmax(x). On GPUs, and for bf16/fp16 logits anywhere, it goes over chunks of
    rows with autocast off: forward, one log_softmax(dtype=fp32) a chunk (it reads the logits in
    their own dtype), its value at the target and its row sums; backward, one
    softmax(dtype=fp32) and one addcmul (scale and shift) a chunk, written into the gradient.
    fp32 logits on the CPU keep exp(x - max x) instead of the logits (the same size; the logits
    are then freed), so the backward pass needs no second exp, the loss's largest cost there.
"""

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from aiayn.blocks import TransformerGraph

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
    """`label_smoothed_nll` with its gradient in closed form (see above)."""
    V = logits.size(-1)
    flat, target = logits.reshape(-1, V), target.reshape(-1)
    weight = target.ne(pad_id).to(torch.float32)
    loss, nll = _SmoothedNLL.apply(flat, target, weight, eps)
    return loss, nll, weight.sum().to(torch.long)


def smoothed_nll_fusable(logits: Tensor, target: Tensor, *, eps: float, pad_id: int) -> tuple[Tensor, Tensor, Tensor]:
    """`label_smoothed_nll` in closed form without indexing by a mask (padding has weight 0), so
    that torch.compile traces it whole, with static-size outputs."""
    V = logits.size(-1)
    x, target = logits.reshape(-1, V).float(), target.reshape(-1)
    weight = target.ne(pad_id).to(torch.float32)
    a, b = 1.0 - eps - eps / (V - 1), eps / (V - 1)
    lse = torch.logsumexp(x, dim=-1)
    nll = (lse - x.gather(1, target[:, None]).squeeze(1)) * weight
    total = (V * lse - x.sum(dim=-1)) * weight  # the sum over all classes of -log p
    return (a * nll + b * total).sum(), nll.sum(), weight.sum().to(torch.long)


def batch_loss(
    model: TransformerGraph, batch: Any, *, eps: float, pad_id: int, loss: Any = smoothed_nll_chunked, fused: bool = False
) -> tuple[Tensor, Tensor, Tensor]:
    """`loss` (the chunked one, or a compiled `smoothed_nll_fusable`) of a teacher-forced batch
    (a builder.data.collate.Batch), with logits for its non-padding targets only
    (`batch.tgt_rows`), the encoder on the non-padding sources only (`batch.src_rows`),
    as training computes it. `fused`: the output projection and the loss together in chunks of
    rows (projected_loss.py), never the batch's logits."""
    target = batch.tgt_out.flatten().index_select(0, batch.tgt_rows)  # (n,)
    if fused:
        from aiayn.builder.model.projected_loss import projected_smoothed_nll

        hidden = model(batch.src, batch.tgt_in, batch.tgt_rows, batch.src_rows, project=False, **prefix_of(batch))  # (n, d_model)
        generator = model.generator
        return projected_smoothed_nll(hidden, generator.weight, generator.bias, target, eps=eps, pad_id=pad_id)
    logits = model(batch.src, batch.tgt_in, batch.tgt_rows, batch.src_rows, **prefix_of(batch))  # (n, V)
    return loss(logits, target, eps=eps, pad_id=pad_id)


def prefix_of(batch: Any) -> dict[str, Any]:
    """The batch's prefix lengths as the model takes them (only a decoder-only translation's batch has them)."""
    prefix = getattr(batch, "prefix", None)
    return {} if prefix is None else {"prefix": prefix}


def _chunks(n: int, vocab: int) -> list[slice]:
    rows = max(1, _CHUNK_ELEMENTS // vocab)
    return [slice(start, min(start + rows, n)) for start in range(0, n, rows)]


class _SmoothedNLL(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
        N, V = logits.shape
        ctx.ab = a, b = 1.0 - eps - eps / (V - 1), eps / (V - 1)
        ctx.keep_exp = logits.dtype == torch.float32 and logits.device.type == "cpu"
        if ctx.keep_exp:
            at_target = logits.gather(1, target[:, None]).squeeze(1)
            total = -logits.sum(dim=-1)
            top = logits.amax(dim=-1)
            e = (logits - top[:, None]).exp_()  # (N, V) = exp(x - max x), in the logits' place
            denominator = e.sum(dim=-1)
            lse = top + denominator.log()
            nll, total = lse - at_target, total + V * lse  # total: the sum over all classes of -log p
            ctx.save_for_backward(e, target, weight, denominator)
        else:
            nll, total = torch.empty(2, N, dtype=torch.float32, device=logits.device)
            with _no_autocast(logits):
                for rows in _chunks(N, V):
                    logp = F.log_softmax(logits[rows], dim=-1, dtype=nll.dtype)  # one pass: (n, V)
                    nll[rows] = -logp.gather(1, target[rows, None]).squeeze(1)
                    total[rows] = -logp.sum(dim=-1)
            ctx.save_for_backward(logits, target, weight)
        nll, total = nll * weight, total * weight
        return (a * nll + b * total).sum(), nll.sum()

    @staticmethod
    def backward(ctx, g_loss: Tensor, g_nll: Tensor) -> tuple[Tensor | None, ...]:
        a, b = ctx.ab
        if ctx.keep_exp:
            e, target, weight, denominator = ctx.saved_tensors
            # (softmax(x) * (g_loss + g_nll) - g_loss * b) * weight, in e's storage (a second
            # backward through the same graph is refused by autograd's check of saved tensors)
            grad = e.mul_(((g_loss + g_nll) * weight / denominator)[:, None]).sub_((g_loss * b * weight)[:, None])
            grad.scatter_add_(1, target[:, None], (-(g_loss * a + g_nll) * weight)[:, None])
            return grad, None, None, None
        logits, target, weight = ctx.saved_tensors
        scale, shift = ((g_loss + g_nll) * weight)[:, None], (-g_loss * b * weight)[:, None]
        at_target = (-(g_loss * a + g_nll) * weight)[:, None]
        grad = torch.empty_like(logits)
        with _no_autocast(logits):
            for rows in _chunks(*logits.shape):
                p = F.softmax(logits[rows], dim=-1, dtype=scale.dtype)  # one pass: (n, V)
                g = grad[rows] if grad.dtype == p.dtype else p  # written in place: no copy in fp32
                torch.addcmul(shift[rows], p, scale[rows], out=g)  # p * scale + shift, one pass
                g.scatter_add_(1, target[rows, None], at_target[rows])
                if g is p:
                    grad[rows] = p  # to the logits' dtype
        return grad, None, None, None


def _no_autocast(logits: Tensor) -> Any:
    """Autocast off: under it log_softmax and softmax would first copy the logits to fp32."""
    return torch.autocast(logits.device.type, enabled=False)
