"""train.compile with data.static_shapes (builder/train/compiled.py): one graph per bucket shape
and no compilation after warm-up over a whole Multi30k-size epoch (a counting backend: it is
called once per graph TorchDynamo compiles), the compiled loss equal to eager's, the CPU's
fallback from CUDA graphs, and Adam's compiled update equal to eager Adam's."""

import copy

import numpy as np
import pytest
import torch

from aiayn.builder.data.buckets import StaticCollator, bucket_shapes, bucket_widths
from aiayn.builder.data.sampler import TokenBatchSampler
from aiayn.builder.model.loss import batch_loss, smoothed_nll_fusable
from aiayn.builder.train.compiled import CompiledAdam, StaticStepLoss, compile_mode
from aiayn.builder.train.schedule import noam_lr
from aiayn.builder.train.task import TranslationTask
from tests.builder.data.test_data_buckets import MAX_TOKENS, SRC, TGT, _examples
from tests.conftest import EXPERIMENTS, load_experiment, registry
from tests.models import BOS, EOS, PAD, tiny_model


class Counting:
    """A torch.compile backend that runs the captured graph as it is and counts the graphs."""

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> object:
        self.graphs += 1
        return gm.forward


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()  # graphs other tests compiled count against the same code's limit
    yield
    torch._dynamo.reset()


def test_no_compilation_after_warm_up_over_a_whole_epoch():
    buckets = bucket_widths(np.maximum(SRC, TGT), num_buckets=6, boundaries=None)
    sampler = TokenBatchSampler(SRC, TGT, max_tokens=MAX_TOKENS, seed=5, buckets=buckets)
    collate = StaticCollator(
        bucket_shapes(sampler.batches, SRC, TGT, buckets, MAX_TOKENS, packed=True), pad_id=PAD, bos_id=BOS, eos_id=EOS
    )
    torch.manual_seed(0)
    model = tiny_model(d_model=8, d_ff=8, n_enc=1, n_dec=1, dropout=0.1).train()
    backend = Counting()
    step = StaticStepLoss(model, eps=0.1, pad_id=PAD, fused=False, backend=backend)
    batches = [collate(_examples(ids)) for ids in sampler]
    first = {}  # the first batch of each shape: the warm-up
    for i, b in enumerate(batches):
        first.setdefault(tuple(b.src.shape), i)
    for i in sorted(first.values()):
        loss, nll, _ = step(batches[i])
        (loss + nll).backward()
    assert backend.graphs == len(first) == 6  # one graph per shape: nothing breaks the graph
    for b in batches:  # the whole epoch
        loss, nll, _ = step(b)
        (loss + nll).backward()
    assert backend.graphs == 6  # no recompilation
    model.zero_grad(set_to_none=True)
    loss, nll, count = step(batches[0])  # what the graph computes is eager's (dropout off)
    model.eval()
    eager = batch_loss(model, batches[0], eps=0.1, pad_id=PAD, loss=smoothed_nll_fusable)
    compiled = step(batches[0])
    torch.testing.assert_close(compiled[0], eager[0], rtol=1e-5, atol=1e-4)
    assert int(compiled[2]) == batches[0].n_tgt_tokens == int(eager[2])


def test_the_fused_output_loss_compiles_into_the_static_step():
    shapes = bucket_shapes([[0, 1, 2]], SRC, TGT, [40, 70], 640, packed=True)
    batch = StaticCollator(shapes, pad_id=PAD, bos_id=BOS, eos_id=EOS)(_examples([0, 1, 2]))
    model = tiny_model(dropout=0.0, tied=False)  # with the projection's bias
    backend = Counting()
    results = []
    for step in (StaticStepLoss(model, eps=0.1, pad_id=PAD, fused=True, backend=backend), None):
        loss, nll, count = step(batch) if step else batch_loss(model, batch, eps=0.1, pad_id=PAD, fused=True)
        (loss + nll).backward()
        results.append((loss.detach(), int(count), torch.cat([p.grad.flatten() for p in model.parameters()])))
        model.zero_grad(set_to_none=True)
    assert backend.graphs == 1  # train.fused_output_loss's autograd.Function inside the one graph
    (loss_c, count_c, grads_c), (loss_e, count_e, grads_e) = results
    assert count_c == count_e == batch.n_tgt_tokens
    torch.testing.assert_close(loss_c, loss_e, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(grads_c, grads_e, rtol=1e-5, atol=1e-6)


def test_reduce_overhead_compiles_as_default_on_a_cpu():
    assert compile_mode(False, torch.device("cpu")) == (None, None)
    assert compile_mode(True, torch.device("cpu")) == ("default", None)
    assert compile_mode("reduce-overhead", torch.device("cuda")) == ("reduce-overhead", None)
    assert compile_mode("reduce-overhead", torch.device("cpu")) == (
        "default",
        "train.compile: reduce-overhead records CUDA graphs, which a cpu run has not; compiling with mode default",
    )


def test_the_task_compiles_the_static_step_once(tmp_path, capsys):
    overrides = ["train.compile=reduce-overhead", "data.static_shapes.num_buckets=2", "dims.d_model=16", "dims.d_ff=16"]
    spec = load_experiment(EXPERIMENTS / "demo.yaml", overrides)
    task = TranslationTask(spec.model_dump(mode="json"), registry=registry())
    task.compile_for(torch.device("cpu"), say=False, backend=(backend := Counting()))  # a test's backend
    assert capsys.readouterr().out == ""  # say=False: not rank zero
    assert isinstance(task.compiled_loss, StaticStepLoss) and task.criterion is not smoothed_nll_fusable
    task.compile_for(torch.device("cpu"))  # once
    assert task.compile_options == {"backend": backend}
    fresh = TranslationTask(spec.model_dump(mode="json"), registry=registry())
    fresh.compile_for(torch.device("cpu"), say=True)
    assert capsys.readouterr().out == (
        "train.compile: reduce-overhead records CUDA graphs, which a cpu run has not; compiling with mode default\n"
    )
    assert fresh.compile_options == {"mode": "default"}


def _schedule(optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: noam_lr(s + 1, d_model=16, warmup_steps=3))


def _train(optimizer: torch.optim.Optimizer, schedule: torch.optim.lr_scheduler.LRScheduler, params: list, steps: range) -> None:
    for step in steps:
        for k, p in enumerate(params):
            p.grad = torch.sin(torch.arange(p.numel(), dtype=torch.float32) + 10 * step + k).view_as(p)
        optimizer.step()
        schedule.step()


def test_compiled_adam_updates_as_adam_and_compiles_once():
    torch.manual_seed(0)
    start = [torch.randn(4, 3), torch.randn(5)]
    eager = [torch.nn.Parameter(t.clone()) for t in start]
    compiled = [torch.nn.Parameter(t.clone()) for t in start]
    settings = dict(lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    reference = torch.optim.Adam(eager, **settings, fused=True)
    backend = Counting()
    adam = CompiledAdam(compiled, compile_options={"backend": backend}, **settings)
    reference_schedule = _schedule(reference)
    _train(reference, reference_schedule, eager, range(6))
    _train(adam, _schedule(adam), compiled, range(6))  # the learning rate changes at every step
    assert backend.graphs == 1
    assert isinstance(adam.param_groups[0]["lr"], torch.Tensor)
    for a, b in zip(compiled, eager):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # a checkpoint of a fused Adam (a float learning rate) continues under the compiled update
    resumed = [torch.nn.Parameter(p.detach().clone()) for p in eager]
    again = CompiledAdam(resumed, compile_options={"backend": backend}, **settings)
    schedule = _schedule(again)  # Lightning's order: configure_optimizers, then the states
    again.load_state_dict(copy.deepcopy(reference.state_dict()))  # as saved and loaded: tensors of its own
    schedule.load_state_dict(reference_schedule.state_dict())
    assert again.param_groups[0]["foreach"] and isinstance(again.param_groups[0]["lr"], torch.Tensor)
    _train(reference, reference_schedule, eager, range(6, 9))
    _train(again, schedule, resumed, range(6, 9))
    for a, b in zip(resumed, eager):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
