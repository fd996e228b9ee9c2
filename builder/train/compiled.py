"""train.compile: what torch.compile compiles of a training step, and how.

  - without data.static_shapes: the model and the loss, each with dynamic shapes (one graph for
    every batch shape; validation runs them too);
  - with data.static_shapes: the step's loss as one function (`StaticStepLoss`: the model's
    forward and the loss, fed tensors only) with dynamic=False, one graph per bucket shape, so
    after one batch of each bucket nothing compiles again; validation stays eager. The modes
    that record CUDA graphs (reduce-overhead, max-autotune) need these static shapes, and on a
    GPU they also compile Adam's update (`CompiledAdam`), so that it replays as a graph too.

On a CPU there are no CUDA graphs: reduce-overhead compiles as mode default, saying so once.
"""

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from aiayn.blocks import TransformerGraph
from aiayn.builder.data.collate import Batch
from aiayn.builder.model.loss import batch_loss, smoothed_nll_fusable

CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")  # torch.compile's modes that record CUDA graphs on a GPU


def compile_mode(setting: bool | str, device: torch.device) -> tuple[str | None, str | None]:
    """(torch.compile's mode, or None for eager; a note for the user, or None)."""
    if setting is False:
        return None, None
    mode = "default" if setting is True else str(setting)
    if mode == "reduce-overhead" and device.type != "cuda":
        return (
            "default",
            f"train.compile: reduce-overhead records CUDA graphs, which a {device.type} run has not; compiling with mode default",
        )
    return mode, None


class StaticStepLoss:
    """`batch_loss` of a Batch, compiled with static shapes: the function traced is fed the
    batch's tensors alone (a decoder-only translation's prefix lengths among them) (the Python ints a Batch also holds would be guarded on and
    compile again for every new token count)."""

    def __init__(self, model: TransformerGraph, *, eps: float, pad_id: int, fused: bool, **compile_options: Any) -> None:
        def step_loss(
            src: Tensor, tgt_in: Tensor, tgt_out: Tensor, tgt_rows: Tensor, src_rows: Tensor | None, prefix: Tensor | None
        ) -> tuple[Tensor, Tensor, Tensor]:
            batch = Batch(src, tgt_in, tgt_out, src.new_empty(0), 0, 0, tgt_rows, src_rows, prefix)  # ids and counts unread
            return batch_loss(model, batch, eps=eps, pad_id=pad_id, loss=smoothed_nll_fusable, fused=fused)

        self.compiled = torch.compile(step_loss, dynamic=False, **compile_options)

    def __call__(self, batch: Batch) -> tuple[Tensor, Tensor, Tensor]:
        loss, nll, count = self.compiled(batch.src, batch.tgt_in, batch.tgt_out, batch.tgt_rows, batch.src_rows, batch.prefix)
        # a CUDA graph's outputs live in its memory pool and its next replay writes over them;
        # the task keeps the loss across steps (the logged window's sum): three scalars copied
        return loss.clone(), nll.clone(), count.clone()


class CompiledAdam(torch.optim.Adam):
    """Adam whose update (everything after the closure's forward and backward) runs compiled, so
    that under a CUDA-graph mode it replays as one graph. The learning rate is a tensor, which the
    schedule fills in place: as a float it would be a constant of the graph, compiled again at
    every step. TorchDynamo does not trace fused Adam (torch.optim's fused kernels run outside
    its graph), so the update is the multi-tensor (foreach) one, capturable on a GPU, which
    inductor fuses into a few kernels."""

    def __init__(self, params: Any, *, compile_options: dict[str, Any] | None = None, **adam: Any) -> None:
        lr = torch.tensor(float(adam.pop("lr", 1e-3)))
        super().__init__(params, lr=lr, foreach=True, capturable=True, **adam)
        self._update: Callable[[], Any] = torch.compile(self._eager_update, **(compile_options or {}))

    def _eager_update(self) -> None:
        torch.optim.Adam.step(self)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._update()
        return loss

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """A checkpoint of any Adam (fused, a float learning rate: a run that compiled otherwise)
        continues as this one: its moments and steps, this update."""
        groups = [
            {**group, "lr": torch.tensor(float(group["lr"])), "foreach": True, "fused": None, "capturable": True}
            for group in state_dict["param_groups"]
        ]
        super().load_state_dict({**state_dict, "param_groups": groups})
