"""train.activation_checkpointing: each layer's activations recomputed in backward (each layer runs
twice a training step, once in evaluation), to the loss and the gradients of keeping them, dropout
included (the RNG state kept); every graph's stacks take it, and the task sets it from the YAML."""

import copy

import pytest
import torch

from aiayn.builder.model.build import build_model
from aiayn.builder.model.loss import batch_loss
from aiayn.builder.train.task import TranslationTask
from tests.builder.model.test_variants import SMALL, VARIANTS, _batch
from tests.conftest import EXPERIMENTS, load_experiment, registry


def runs_of_layers(model):
    """Counts the calls of each layer (a pre-hook a layer: a recomputation may stop before its end), as a list read after the calls."""
    counts = []
    for stack in model.stacks().values():
        for layer in stack.layers:
            counts.append(0)
            index = len(counts) - 1
            layer.register_forward_pre_hook(lambda *_, i=index: counts.__setitem__(i, counts[i] + 1))
    return counts


@pytest.mark.parametrize("variant", [None, "pre_rms_norm", "rope"])
def test_the_same_loss_and_gradients_with_each_layer_recomputed(variant):
    torch.manual_seed(0)
    overrides = [*SMALL, *(VARIANTS[variant] if variant else []), "model.dropout=0.3"]
    kept = build_model(load_experiment(EXPERIMENTS / "base.yaml", overrides).model).train()
    recomputed = copy.deepcopy(kept)
    for stack in recomputed.stacks().values():
        stack.checkpointing = True
    runs = runs_of_layers(recomputed)
    batch = _batch(3, 6)
    found = []
    for model in (kept, recomputed):
        torch.manual_seed(11)  # the same dropout masks: checkpoint replays the RNG state it began with
        loss, nll, _ = batch_loss(model, batch, eps=0.1, pad_id=0)
        (loss + nll).backward()
        found.append((loss.detach(), [p.grad for p in model.parameters()]))
    torch.testing.assert_close(found[1][0], found[0][0], rtol=0, atol=0)
    for a, b in zip(found[1][1], found[0][1]):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    assert runs == [2] * len(runs)  # forward, then again in backward
    recomputed.eval()
    with torch.no_grad():
        recomputed(batch.src, batch.tgt_in)
    assert runs == [3] * len(runs)  # evaluation keeps nothing for backward: once


@pytest.mark.parametrize("experiment", ["demo.yaml", "lm/demo.yaml", "encoder/demo.yaml"])
def test_the_task_sets_it_on_every_stack_of_every_graph(experiment):
    spec = load_experiment(EXPERIMENTS / experiment, ["train.activation_checkpointing=true"])
    task = TranslationTask(spec.model_dump(mode="json"), registry=registry())
    stacks = task.model.stacks()
    assert stacks and all(stack.checkpointing for stack in stacks.values())
    plain = TranslationTask(load_experiment(EXPERIMENTS / experiment).model_dump(mode="json"), registry=registry())
    assert not any(stack.checkpointing for stack in plain.model.stacks().values())
