"""The score step's seam: what handing attention its step from scores to weights costs, and what
each step costs, in a self-attention's forward (and backward) at given sizes.

    python benchmarks/score_step.py [--d-model 512 --heads 8 --batch 32 --length 64 --repeats 20 --threads 1]

Reference, in the same process: the paper's attention written as one SDPA call on the module's own
projections (what MultiHeadAttention.forward was before the seam). Rows: aiayn's SelfAttention
with the default softmax (through the seam, SDPA), with softcap 50 (the scores written out), and
sigmoid attention; causal (the decoder's) and with padding (the encoder's). Medians of --repeats
interleaved calls after a warm-up; ratios to the reference.
"""

import argparse

import torch
import torch.nn.functional as F
from common import interleaved_medians

from aiayn.blocks import CausalMask, LayerContext, SelfAttention, Sigmoid, Softmax


def reference(module: SelfAttention, x: torch.Tensor, ctx: LayerContext) -> torch.Tensor:
    """The attention as one SDPA call, the mask built as the module builds it."""
    from aiayn.blocks.masks import attention_mask

    q, k, v, key_padding = module.project(x, ctx)
    B, T = q.size(0), q.size(2)
    mask, is_causal = attention_mask(module.mask, key_padding, None, T, k.size(2), like=q)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)
    return module.w_o(out.transpose(1, 2).reshape(B, T, module.h * module.d_v))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    d, h, B, T = args.d_model, args.heads, args.batch, args.length
    x = torch.randn(B, T, d, requires_grad=True)
    padding = torch.zeros(B, T, dtype=torch.bool)
    padding[B // 2 :, T * 3 // 4 :] = True  # half the batch a quarter shorter
    print(
        f"self-attention d_model {d}, h {h}, batch {B} x {T} tokens, {args.threads} thread(s), medians of {args.repeats} rounds"
    )
    for name, mask, ctx in (("causal", CausalMask(), LayerContext()), ("padded", None, LayerContext(self_padding_mask=padding))):
        modules = {
            "softmax (aiayn, the seam)": SelfAttention(d_model=d, h=h, d_k=d // h, d_v=d // h, mask=mask, score=Softmax()),
            "softmax, softcap 50": SelfAttention(d_model=d, h=h, d_k=d // h, d_v=d // h, mask=mask, score=Softmax(softcap=50.0)),
            "sigmoid (-log n)": SelfAttention(d_model=d, h=h, d_k=d // h, d_v=d // h, mask=mask, score=Sigmoid()),
        }
        ref_module = modules["softmax (aiayn, the seam)"]
        calls = {"one SDPA call (reference)": lambda: reference(ref_module, x, ctx).sum().backward()}
        calls.update({label: (lambda m=m: m(x, ctx).sum().backward()) for label, m in modules.items()})
        results = interleaved_medians(calls, args.repeats)
        base = results["one SDPA call (reference)"]
        print(f"\n{name}: forward + backward")
        for label, t in results.items():
            print(f"  {label:<28} {t * 1e3:8.2f} ms   {t / base:5.2f}x")


if __name__ == "__main__":
    main()
