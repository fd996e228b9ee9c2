"""Dropout: the kept fraction, the scale, the gradient, and the identity in evaluation."""

import pytest
import torch

from aiayn.blocks import Dropout


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_keeps_one_minus_p_of_the_units_and_scales_them(p):
    torch.manual_seed(0)
    drop = Dropout(p).train()
    x = torch.ones(1000, 1000, requires_grad=True)
    y = drop(x)
    kept = y != 0
    # 10^6 Bernoulli draws: the kept fraction is within 5 standard deviations of 1 - p
    assert abs(kept.float().mean().item() - (1 - p)) < 5 * ((p * (1 - p)) / 1e6) ** 0.5
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 1 / (1 - p)))
    y.sum().backward()
    torch.testing.assert_close(x.grad, y.detach())  # d y / d x is the scaled mask itself


def test_identity_in_evaluation_and_at_zero():
    x = torch.randn(4, 5)
    assert Dropout(0.5).eval()(x) is x and Dropout(0.0).train()(x) is x


def test_the_same_seed_gives_the_same_mask():
    x = torch.ones(64, 64)
    torch.manual_seed(3)
    a = Dropout(0.2).train()(x)
    torch.manual_seed(3)
    assert torch.equal(a, Dropout(0.2).train()(x))


def test_probability_out_of_range():
    with pytest.raises(ValueError, match=r"^dropout \(1.0\) must be in \[0, 1\)$"):
        Dropout(1.0)
