"""builder.model.projected_loss: the output projection and the smoothed loss in chunks equal the
reference `label_smoothed_nll(F.linear(h, W, b))`, values and gradients, fp32 and bf16."""

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from aiayn.builder.model import projected_loss
from aiayn.builder.model.loss import label_smoothed_nll
from aiayn.builder.model.projected_loss import projected_smoothed_nll

PAD = 0


def inputs(n=37, d=16, V=101, bias=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(n, d, generator=g, requires_grad=True)
    W = (torch.randn(V, d, generator=g) * 0.5).requires_grad_()
    b = (torch.randn(V, generator=g) * 0.1).requires_grad_() if bias else None
    target = torch.randint(1, V, (n,), generator=g)
    target[::5] = PAD  # padding rows count for nothing
    return h, W, b, target


def grads(loss_fn, h, W, b, target, *, eps=0.1, autocast=False):
    leaves = [t for t in (h, W, b) if t is not None]
    for t in leaves:
        t.grad = None
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss, nll, count = loss_fn(h, W, b, target, eps)
    (loss + 0.5 * nll).backward()
    return loss.detach(), nll.detach(), count, [t.grad.clone() for t in leaves]


def reference(h, W, b, target, eps):
    return label_smoothed_nll(F.linear(h, W, b), target, eps=eps, pad_id=PAD)


def fused(h, W, b, target, eps):
    return projected_smoothed_nll(h, W, b, target, eps=eps, pad_id=PAD)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("chunk", [1 << 22, 300])  # one chunk; chunks of 2 rows (V = 101)
def test_fp32_values_and_gradients_equal_the_reference(monkeypatch, bias, chunk):
    monkeypatch.setattr(projected_loss, "CHUNK_ELEMENTS", chunk)
    h, W, b, target = inputs(bias=bias)
    want = grads(reference, h, W, b, target)
    got = grads(fused, h, W, b, target)
    assert got[2] == want[2] == int((target != PAD).sum())
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[1], want[1], rtol=1e-5, atol=1e-5)
    for g, w in zip(got[3], want[3]):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


def test_bf16_autocast_values_and_gradients_match_the_reference(monkeypatch):
    monkeypatch.setattr(projected_loss, "CHUNK_ELEMENTS", 300)
    h, W, b, target = inputs(n=64, d=32, V=257)
    want = grads(reference, h, W, b, target, autocast=True)
    got = grads(fused, h, W, b, target, autocast=True)
    torch.testing.assert_close(got[0], want[0], rtol=2e-3, atol=1e-2)  # the same bf16 logits
    for g, w in zip(got[3], want[3]):
        torch.testing.assert_close(g, w, rtol=2e-2, atol=2e-2)  # bf16 products
    exact = grads(reference, h, W, b, target)  # and both close to fp32
    torch.testing.assert_close(got[0], exact[0], rtol=2e-2, atol=1e-1)


def test_a_training_step_with_the_fused_loss_equals_the_unfused_one(tmp_path):
    from aiayn.builder.model.build import PAD_ID, build_model
    from aiayn.builder.model.loss import batch_loss
    from tests.conftest import EXPERIMENTS, load_experiment

    spec = load_experiment(
        EXPERIMENTS / "demo.yaml",
        ["dims.d_model=32", "dims.d_ff=64", "dims.h=2", "dims.d_k=16", "dims.d_v=16", "dims.N=1", "dims.vocab_size=300"],
    )
    torch.manual_seed(0)
    model = build_model(spec.model).eval()  # no dropout: both passes see the same function
    src = torch.randint(4, 300, (3, 7))
    tgt = torch.randint(4, 300, (3, 6))
    tgt[2, 4:] = PAD_ID

    batch = SimpleNamespace(
        src=src,
        tgt_in=tgt,
        tgt_out=torch.roll(tgt, -1, 1),
        tgt_rows=(tgt != PAD_ID).flatten().nonzero().squeeze(1),
        src_rows=None,
    )

    out = []
    for fuse in (False, True):
        model.zero_grad()
        loss, nll, count = batch_loss(model, batch, eps=0.1, pad_id=PAD_ID, fused=fuse)
        loss.backward()
        out.append((loss.detach(), nll.detach(), count, {k: p.grad.clone() for k, p in model.named_parameters()}))
    (l0, n0, c0, g0), (l1, n1, c1, g1) = out
    assert c0 == c1
    torch.testing.assert_close(l1, l0, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(n1, n0, rtol=1e-5, atol=1e-5)
    for k in g0:
        torch.testing.assert_close(g1[k], g0[k], rtol=1e-4, atol=1e-6)
