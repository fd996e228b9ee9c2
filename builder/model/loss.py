"""Label-smoothed cross-entropy (Sec. 5.4, Szegedy et al. 2016)."""

import torch
import torch.nn.functional as F
from torch import Tensor


def label_smoothed_nll(logits: Tensor, target: Tensor, *, eps: float, pad_id: int) -> tuple[Tensor, Tensor, Tensor]:
    """Sums over the non-padding targets of: the smoothed loss, the plain NLL, and their count.

    The target class gets probability 1 - eps and each of the V-1 other classes eps / (V-1);
    the loss is the cross-entropy against that distribution. Perplexity is exp(nll / count).
    """
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
