"""A score step from outside aiayn: ReLU attention (Wortsman et al. 2023, "Replacing softmax with
ReLU in Vision Transformers"): each weight relu(score) / n, n the keys the query reads. The whole
plugin is this spec, this step and one registration: masks, biases, softcap, grouped K/V, the
decoding cache and the weights TensorBoard draws are the attention's, handed this step."""

from typing import Literal

import torch

import aiayn


class ReluScoresSpec(aiayn.ScoreSpec):
    """`score: {type: relu}` on any attention."""

    type: Literal["relu"] = "relu"


class ReluScores(aiayn.ScoreStep):
    def normalize(self, scores: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
        n = (
            scores.new_tensor(float(scores.size(-1)))
            if allowed is None
            else allowed.sum(-1, keepdim=True).clamp(min=1).to(scores.dtype)
        )
        return torch.relu(scores) / n  # relu(-inf) = 0: a key not read


def register(registry: aiayn.RegistryBuilder) -> None:
    registry.add(ReluScoresSpec, slot="score", build=lambda spec, ctx: ReluScores())
