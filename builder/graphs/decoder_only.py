"""The decoder alone (GPT's graph, fairseq's transformer_lm): no encoder, no cross-attention, one
embedding. It reads one language's text (`data.side`: a language model, which generates and scores
lines) or a pair as one sequence, `<s> source <sep> target` (a translation model, whose source its
self-attention reads causally or, `source_mask: prefix`, all at once). Registered as
`model.graph: {type: decoder_only}` (schemas/graph.py's DecoderOnlySpec)."""

import importlib.util
from pathlib import Path
from typing import Any

from aiayn.blocks import DecoderOnly
from aiayn.builder.errors import UserError
from aiayn.builder.graph import Graph
from aiayn.builder.graphs.joint import JointLayout
from aiayn.builder.graphs.readings import JointReading, TextReading
from aiayn.builder.graphs.translation import translation_scores, translator, validation_translations
from aiayn.builder.model.build import BOS_ID, PAD_ID, embeddings, stack
from aiayn.schemas.experiment import ExperimentSpec
from aiayn.schemas.graph import DecoderOnlySpec
from aiayn.schemas.model import ModelSpec


def _language_model(spec: ExperimentSpec) -> bool:
    """It reads one language's text (data.side), not pairs."""
    return spec.data.side is not None


class DecoderOnlyGraph(Graph):
    name = "decoder-only"
    sides = ("target",)
    spec: DecoderOnlySpec

    def __init__(self, spec: DecoderOnlySpec) -> None:
        super().__init__(spec)

    def build(self, model: ModelSpec) -> DecoderOnly:
        inputs, generator = embeddings(model)
        return DecoderOnly(
            embed=inputs["target"],
            decoder=stack(model.stack("decoder"), model.d_model, "decoder"),
            generator=generator,
            pad_id=PAD_ID,
            bos_id=BOS_ID,
            prefix_source=self.spec.source_mask == "prefix",
        )

    def tokenizer_layout(self, spec: ExperimentSpec) -> str | None:
        if not _language_model(spec):
            return None
        kind = spec.data.tokenizer.layout(True).partition(",")[0]  # one side's text: no second side to share with
        return f"{kind}, one model and one vocabulary of {spec.data.side} text"

    def languages(self, spec: ExperimentSpec) -> tuple[str, str]:
        side = spec.data.side
        return (side, side) if side is not None else super().languages(spec)  # a language model's one language

    def reading(self, spec: ExperimentSpec) -> JointReading | TextReading:
        if spec.data.side is not None:  # a language model's text
            return TextReading(spec.data.side, spec.data.block_size)
        return JointReading(JointLayout(source_loss=spec.train.source_loss, prefix=self.spec.source_mask == "prefix"))

    def inference(self, loaded: Any) -> Any:
        if not _language_model(loaded.spec):
            return translator(loaded)
        from aiayn.builder.decode.language_model import LanguageModel

        return LanguageModel(loaded.model, loaded.spec, loaded.tgt_tokenizer, loaded.checkpoint, loaded.what)

    def ensemble_refusal(self, spec: ExperimentSpec, path: Path) -> str | None:
        if _language_model(spec):
            return f"{path} is a language model: an ensemble translates, and aiayn generate takes one language model"
        return None

    def validation_callback(self, spec: ExperimentSpec) -> Any:
        from aiayn.builder.train.callbacks import ValidationSamples

        if not _language_model(spec):
            return validation_translations()
        return ValidationSamples()

    def final_scores(self, spec: ExperimentSpec, model: Any, data: Any) -> tuple[dict[str, Any], Any, Any]:
        if not _language_model(spec):
            return translation_scores(spec, model, data)
        from aiayn.builder.decode.metrics import language_model_scores

        # teacher-forced: loss, PPL, bits per byte; nothing to translate
        metrics = language_model_scores(model, data._eval_loader("valid"), data.tokens_per_byte["valid"])
        if spec.data.block_size is not None:  # the rows read were blocks of the sentences
            metrics.update(n_blocks=metrics["n_sentences"], n_sentences=data.sentences["valid"], block_size=spec.data.block_size)
        return metrics, None, None

    def check_translator_export(self, model: ModelSpec, target: str) -> None:
        raise UserError(
            f"cannot export to {target}: model.encoder is absent (a decoder-only model); {target} holds an encoder-decoder"
        )

    def export(self, loaded: Any, target: str, name: str, out: Path, quantization: str | None) -> bool:
        """GPT-2's or Llama's family, through transformers."""
        from aiayn.builder.formats import to_causal_lm
        from aiayn.builder.run.atomic import staged_folder

        if not _language_model(loaded.spec):
            raise UserError(
                f"cannot export to {name}: a decoder-only translation model (<s> source <sep> target) has no counterpart there"
            )
        to_causal_lm.family(loaded.spec.model, name)
        if importlib.util.find_spec("transformers") is None:
            raise UserError(
                f'--to {target} of a decoder-only model goes through transformers, which is not installed: pip install -e ".[export]"'
            )
        write = to_causal_lm.write_ctranslate2 if target == "ctranslate2" else to_causal_lm.write
        with staged_folder(out) as folder:
            write(loaded, folder, quantization=quantization)
        return True
