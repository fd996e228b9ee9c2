"""train.compile: the model compiled as TranslationTask compiles it (torch.compile, dynamic shapes)
gives eager's loss and gradients, on the CPU, for batches of different shapes. The backend is
aot_eager: TorchDynamo's capture and AOT autograd's forward and backward graphs, which is where
the model's code could break compilation; inductor, what train.compile uses, adds code
generation (2 min 16 s of C++ builds for this test on 2 idle cores, too long for CI; run
`python benchmarks/train_step.py --compile` to exercise it)."""

import numpy as np
import pytest
import torch

from aiayn.builder.data.collate import TranslationCollator
from aiayn.builder.data.dataset import Example
from aiayn.builder.model.loss import batch_loss
from tests.models import BOS, EOS, PAD, tiny_model


def _batch(seed: int, n: int) -> object:
    rng = np.random.default_rng(seed)
    examples = [Example(i, rng.integers(3, 13, rng.integers(1, 9)), rng.integers(3, 13, rng.integers(0, 9))) for i in range(n)]
    return TranslationCollator(pad_id=PAD, bos_id=BOS, eos_id=EOS)(examples)


def _loss_and_grads(model: torch.nn.Module, batch: object, bf16: bool) -> tuple[torch.Tensor, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss, nll, _ = batch_loss(model, batch, eps=0.1, pad_id=PAD)
    (loss + nll).backward()
    return loss.detach(), torch.cat([p.grad.flatten() for p in model.parameters()])


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16_autocast"])
def test_compiled_model_gives_eager_loss_and_gradients(bf16):
    torch.manual_seed(0)
    eager = tiny_model(dropout=0.0, n_enc=1, n_dec=1).train()
    compiled = tiny_model(dropout=0.0, n_enc=1, n_dec=1).train()
    compiled.load_state_dict(eager.state_dict())
    compiled.compile(dynamic=True, backend="aot_eager")
    for seed, n in [(1, 5), (2, 7), (3, 3)]:  # three batch shapes through one dynamic graph
        batch = _batch(seed, n)
        loss, grads = _loss_and_grads(eager, batch, bf16)
        loss_c, grads_c = _loss_and_grads(compiled, batch, bf16)
        if not bf16:
            torch.testing.assert_close(loss_c, loss, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(grads_c, grads, rtol=1e-4, atol=1e-5)
            continue
        # bf16 keeps 8 bits of mantissa: the loss (summed in fp32) to bf16's resolution, the
        # gradient as a whole (single elements near zero may differ by an ulp of their neighbours)
        torch.testing.assert_close(loss_c, loss, rtol=2**-8, atol=0.0)
        assert ((grads_c - grads).norm() / grads.norm()).item() < 2**-7


def test_the_model_compiles_to_one_graph_with_dropout_on():
    # on the CPU, Dropout draws its bits from numpy in eager mode; compiled, it is F.dropout, so
    # nothing breaks the graph (a break would also leave the rest of the model to run eager)
    torch.manual_seed(0)
    model = tiny_model(dropout=0.1, n_enc=1, n_dec=1).train()
    graphs = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        graphs.append(gm)
        return gm.forward

    model.compile(dynamic=True, backend=backend)
    batch = _batch(1, 5)
    loss, nll, _ = batch_loss(model, batch, eps=0.1, pad_id=PAD)
    (loss + nll).backward()
    assert len(graphs) == 1
    assert all(p.grad is not None for p in model.parameters())
