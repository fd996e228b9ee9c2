import math

import numpy as np
import pytest
import torch

from aiayn.builder.data.collate import TranslationCollator
from aiayn.builder.data.dataset import Example
from aiayn.builder.model import loss as loss_module
from aiayn.builder.model.loss import batch_loss, label_smoothed_nll, smoothed_nll_chunked, smoothed_nll_fusable
from aiayn.builder.train.schedule import noam_lr
from tests.models import tiny_model


def test_noam_closed_form():
    d, w = 512, 4000
    for step in (1, 10, 3999, 4000, 4001, 100_000):
        assert noam_lr(step, d_model=d, warmup_steps=w) == pytest.approx(d**-0.5 * min(step**-0.5, step * w**-1.5))
    # the peak is at warmup: d^-0.5 * w^-0.5
    assert noam_lr(4000, d_model=d, warmup_steps=w) == pytest.approx(1 / math.sqrt(512 * 4000))
    assert noam_lr(4000, d_model=d, warmup_steps=w, factor=2.0) == pytest.approx(2 / math.sqrt(512 * 4000))
    assert (
        noam_lr(2000, d_model=d, warmup_steps=w)
        < noam_lr(4000, d_model=d, warmup_steps=w)
        > noam_lr(8000, d_model=d, warmup_steps=w)
    )


def test_label_smoothing_by_hand():
    # V = 3, two real targets and one padding position
    logits = torch.tensor([[[0.0, 1.0, 2.0], [1.0, 1.0, 1.0], [5.0, 0.0, 0.0]]])
    target = torch.tensor([[2, 1, 0]])  # pad_id 0 at the end
    eps = 0.1
    loss, nll, count = label_smoothed_nll(logits, target, eps=eps, pad_id=0)

    def logp(row):
        z = sum(math.exp(v) for v in row)
        return [v - math.log(z) for v in row]

    a, b = logp([0.0, 1.0, 2.0]), logp([1.0, 1.0, 1.0])
    expected_nll = -a[2] - b[1]
    expected_loss = (1 - eps) * -a[2] + eps / 2 * (-a[0] - a[1]) + (1 - eps) * -b[1] + eps / 2 * (-b[0] - b[2])
    assert count.item() == 2
    assert nll.item() == pytest.approx(expected_nll, rel=1e-6)
    assert loss.item() == pytest.approx(expected_loss, rel=1e-6)


def test_no_smoothing_is_cross_entropy():
    torch.manual_seed(0)
    logits, target = torch.randn(2, 4, 7), torch.randint(1, 7, (2, 4))
    loss, nll, count = label_smoothed_nll(logits, target, eps=0.0, pad_id=0)
    ref = torch.nn.functional.cross_entropy(logits.reshape(-1, 7), target.reshape(-1), reduction="sum")
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(nll, ref)
    assert count.item() == 8


def _reference_and_chunked(logits: torch.Tensor, target: torch.Tensor, eps: float):
    outputs = []
    for fn in (label_smoothed_nll, smoothed_nll_chunked):
        x = logits.detach().clone().requires_grad_(True)
        loss, nll, count = fn(x, target, eps=eps, pad_id=0)
        (loss * 0.7 + nll * 0.3).backward()  # both outputs carry gradient
        outputs.append((loss, nll, count, x.grad))
    return outputs


@pytest.mark.parametrize(
    ("dtype", "chunk"),
    [(torch.float32, 1 << 24), (torch.float64, 1 << 24), (torch.float64, 50)],  # 50 // 37: chunks of one row
)
def test_chunked_loss_equals_the_reference_with_gradients(monkeypatch, dtype, chunk):
    # fp32 on the CPU keeps exp(x - max) for the backward pass; other dtypes recompute it in chunks
    monkeypatch.setattr(loss_module, "_CHUNK_ELEMENTS", chunk)
    torch.manual_seed(0)
    logits, target = (torch.randn(3, 5, 37) * 3).to(dtype), torch.randint(1, 37, (3, 5))
    target[0, 3:] = 0  # padding
    target[2, 1:] = 0
    (loss, nll, count, grad), (loss2, nll2, count2, grad2) = _reference_and_chunked(logits, target, eps=0.1)
    torch.testing.assert_close(loss2, loss)
    torch.testing.assert_close(nll2, nll)
    assert count2.item() == count.item() == 9
    assert grad2.dtype == dtype
    torch.testing.assert_close(grad2, grad, rtol=1.3e-6, atol=1e-5)  # both computed in fp32
    assert torch.all(grad2[target == 0] == 0)  # padding positions get no gradient


@pytest.mark.parametrize("src_lengths", [(4, 2, 7), (5, 5, 5)], ids=["padded_sources", "sources_without_padding"])
def test_batch_loss_on_the_non_padding_rows_equals_the_loss_of_all_logits(src_lengths):
    rng = np.random.default_rng(1)
    examples = [
        Example(i, rng.integers(3, 13, n), rng.integers(3, 13, m)) for i, (n, m) in enumerate(zip(src_lengths, (6, 1, 3)))
    ]
    batch = TranslationCollator(pad_id=0, bos_id=1, eos_id=2)(examples)
    sums, grads = [], []
    for full in (False, True):
        torch.manual_seed(0)
        model = tiny_model().eval()
        if full:
            loss, nll, count = smoothed_nll_chunked(model(batch.src, batch.tgt_in), batch.tgt_out, eps=0.1, pad_id=0)
        else:
            loss, nll, count = batch_loss(model, batch, eps=0.1, pad_id=0)
        (loss + nll).backward()
        sums.append(torch.stack([loss, nll, count.float()]))
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    torch.testing.assert_close(sums[0], sums[1])
    assert sums[0][2].item() == batch.n_tgt_tokens == 13
    torch.testing.assert_close(grads[0], grads[1])


def test_fp32_loss_refuses_a_second_backward_through_its_reused_storage():
    logits = torch.randn(4, 7, requires_grad=True)
    loss, _, _ = smoothed_nll_chunked(logits, torch.tensor([1, 2, 0, 3]), eps=0.1, pad_id=0)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_chunked_loss_is_pytorchs_label_smoothing_over_v_classes():
    torch.manual_seed(1)
    V, eps = 11, 0.2
    logits, target = torch.randn(2, 6, V), torch.randint(1, V, (2, 6))
    loss, _, _ = smoothed_nll_chunked(logits, target, eps=eps, pad_id=0)
    ref = torch.nn.functional.cross_entropy(
        logits.reshape(-1, V), target.reshape(-1), label_smoothing=eps * V / (V - 1), reduction="sum"
    )
    torch.testing.assert_close(loss, ref)


def test_chunked_loss_of_bf16_logits_is_computed_in_fp32():
    torch.manual_seed(2)
    logits, target = (torch.randn(4, 9, 50) * 4).bfloat16(), torch.randint(1, 50, (4, 9))
    (loss, nll, _, grad), (loss2, nll2, _, grad2) = _reference_and_chunked(logits, target, eps=0.1)
    assert loss2.dtype == torch.float32 and grad2.dtype == torch.bfloat16
    torch.testing.assert_close(loss2, loss)  # the same bf16 inputs, both in fp32
    torch.testing.assert_close(grad2, grad.bfloat16())


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fusable_loss_equals_the_reference_with_gradients(compiled, dtype):
    # what train.compile compiles (aot_eager here: TorchDynamo's capture and AOT autograd's graphs)
    fn = torch.compile(smoothed_nll_fusable, dynamic=True, backend="aot_eager") if compiled else smoothed_nll_fusable
    torch.manual_seed(3)
    for rows in (15, 8):  # two shapes through one dynamic graph
        logits, target = (torch.randn(rows, 37) * 3).to(dtype), torch.randint(1, 37, (rows,))
        target[rows // 2 :: 3] = 0  # padding
        results = []
        for loss_fn in (label_smoothed_nll, fn):
            x = logits.detach().clone().requires_grad_(True)
            loss, nll, count = loss_fn(x, target, eps=0.1, pad_id=0)
            (loss * 0.7 + nll * 0.3).backward()
            results.append((loss, nll, count, x.grad))
        (loss, nll, count, grad), (loss2, nll2, count2, grad2) = results
        assert loss2.dtype == torch.float32 and grad2.dtype == dtype
        torch.testing.assert_close(loss2, loss)
        torch.testing.assert_close(nll2, nll)
        assert count2.item() == count.item() == int(target.ne(0).sum())
        torch.testing.assert_close(grad2, grad, rtol=1.3e-6 if dtype == torch.float32 else 1.6e-2, atol=1e-5)
        assert torch.all(grad2[target == 0] == 0)
