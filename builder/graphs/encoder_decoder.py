"""The paper's graph (Sec. 3, Figure 1): the encoder reads the source, the decoder the target
shifted right and the encoder's output through cross-attention. Registered as
`model.graph: {type: encoder_decoder}` (schemas/graph.py's EncoderDecoderSpec)."""

from pathlib import Path
from typing import Any

from aiayn.blocks import EncoderDecoder
from aiayn.builder.errors import UserError
from aiayn.builder.graph import Graph
from aiayn.builder.graphs.translation import translation_scores, translator, validation_translations
from aiayn.builder.model.build import EOS_ID, PAD_ID, embeddings, stack
from aiayn.schemas.experiment import ExperimentSpec
from aiayn.schemas.graph import EncoderDecoderSpec
from aiayn.schemas.model import ModelSpec


class EncoderDecoderGraph(Graph):
    name = "encoder-decoder"
    sides = ("source", "target")

    def flops_basis(self, length: int) -> str:
        return f"target token (source = target = {length} tokens)"

    def __init__(self, spec: EncoderDecoderSpec) -> None:
        super().__init__(spec)

    def build(self, model: ModelSpec) -> EncoderDecoder:
        inputs, generator = embeddings(model)
        if model.encoder is None:  # refused by EncoderDecoderSpec.check_model
            raise UserError("graph encoder_decoder: model.encoder is absent")
        return EncoderDecoder(
            src_embed=inputs["source"],
            tgt_embed=inputs["target"],
            encoder=stack(model.encoder, model.d_model, "encoder"),
            decoder=stack(model.stack("decoder"), model.d_model, "decoder"),
            generator=generator,
            pad_id=PAD_ID,
            source_eos_id=EOS_ID if model.source_eos else None,
        )

    def inference(self, loaded: Any) -> Any:
        return translator(loaded)

    def validation_callback(self, spec: ExperimentSpec) -> Any:
        return validation_translations()

    def final_scores(self, spec: ExperimentSpec, model: Any, data: Any) -> tuple[dict[str, Any], Any, Any]:
        return translation_scores(spec, model, data)

    def export(self, loaded: Any, target: str, name: str, out: Path, quantization: str | None) -> bool:
        return False  # the translator formats' route: Marian's and CTranslate2's translators hold an encoder-decoder

    def check_translator_export(self, model: ModelSpec, target: str) -> None:
        """Marian and CTranslate2 hold this graph; formats/limits.py refuses the settings they cannot."""
