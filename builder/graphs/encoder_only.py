"""The encoder alone (BERT's graph; RoBERTa's, ModernBERT's): `model.encoder`, bidirectional, over
one language's text, with the masked-LM head. Registered as `model.graph: {type: encoder_only}`
(schemas/graph.py's EncoderOnlySpec)."""

from typing import Any

from torch import nn

from aiayn.blocks import EncoderOnly, HeadTransform
from aiayn.builder.graph import Graph
from aiayn.builder.graphs.masked_text import MaskedTextReading, Masking
from aiayn.builder.model.build import PAD_ID, embeddings, stack, stack_context
from aiayn.builder.model.builtin import activation_of
from aiayn.builder.model.parts import build
from aiayn.schemas.experiment import ExperimentSpec
from aiayn.schemas.graph import EncoderOnlySpec
from aiayn.schemas.model import ModelSpec


class EncoderOnlyGraph(Graph):
    name = "encoder-only"
    sides = ("target",)  # one embedding, tied to the output projection where embedding.share says
    spec: EncoderOnlySpec

    def __init__(self, spec: EncoderOnlySpec) -> None:
        super().__init__(spec)

    def build(self, model: ModelSpec) -> EncoderOnly:
        inputs, generator = embeddings(model)
        return EncoderOnly(
            embed=inputs["target"],
            encoder=stack(model.stack("encoder"), model.d_model, "encoder"),
            transform=self.head_transform(model),
            generator=generator,
            pad_id=PAD_ID,
        )

    def head_transform(self, model: ModelSpec) -> HeadTransform:
        """The masked-LM head's transform: d_model x d_model (a bias where head_bias), head_activation, the stack's norm."""
        encoder = model.stack("encoder")
        return HeadTransform(
            dense=nn.Linear(model.d_model, model.d_model, bias=self.spec.head_bias),
            activation=activation_of(self.spec.head_activation),
            norm=build(encoder.add_norm.norm, stack_context(encoder, model.d_model, "encoder")),
        )

    def extra_parameters(self, model: ModelSpec) -> list[tuple[str, Any]]:
        activation, bias = self.spec.head_activation, "" if self.spec.head_bias else ", no bias"
        return [(f"masked-LM head transform (linear{bias}, {activation}, norm)", self.head_transform(model))]

    def tokenizer_layout(self, spec: ExperimentSpec) -> str | None:
        kind = spec.data.tokenizer.layout(True).partition(",")[0]  # one side's text: no second side to share with
        return f"{kind}, one model and one vocabulary of {spec.data.side} text"

    def languages(self, spec: ExperimentSpec) -> tuple[str, str]:
        side = spec.data.side
        return (side, side) if side is not None else super().languages(spec)

    def reading(self, spec: ExperimentSpec) -> MaskedTextReading:
        assert spec.data.side is not None  # EncoderOnlySpec.check_experiment
        g = self.spec
        return MaskedTextReading(spec.data.side, Masking(g.mask_probability, g.mask_replace, g.mask_random, spec.train.seed))

    def inference(self, loaded: Any) -> Any:
        from aiayn.builder.decode.masked_language_model import MaskedLanguageModel

        return MaskedLanguageModel(loaded.model, loaded.spec, loaded.tgt_tokenizer, loaded.checkpoint, loaded.what)

    def ensemble_refusal(self, spec: ExperimentSpec, path: Any) -> str | None:
        return f"{path} is an encoder-only masked language model: an ensemble translates"

    def validation_callback(self, spec: ExperimentSpec) -> Any:
        from lightning.pytorch import Callback

        return Callback()  # the validation's masked-LM loss and PPL are the task's own logs

    def final_scores(self, spec: ExperimentSpec, model: Any, data: Any) -> tuple[dict[str, Any], Any, Any]:
        from aiayn.builder.decode.metrics import masked_lm_scores

        return masked_lm_scores(model, data._eval_loader("valid")), None, None
