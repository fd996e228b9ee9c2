"""A trained model as a Python object, for a notebook or a script: `aiayn.load_run(path)` gives
a `Translator` whose `translate(lines)` gives what `aiayn translate` gives (the run's model,
averaged where it averaged; its tokenizers; its text pipeline on the input; its decode settings,
each overridable by name)."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from pydantic import ValidationError

from aiayn.blocks import EncoderDecoder
from aiayn.builder.data.text import TextPipeline, pipelines_of
from aiayn.builder.data.tokenizer import Tokenizer
from aiayn.builder.decode.checkpoint import load_for_inference
from aiayn.builder.decode.translate import translate_texts
from aiayn.builder.errors import UserError
from aiayn.builder.run.validation import format_validation_error
from aiayn.schemas.decode import DecodeSpec
from aiayn.schemas.experiment import ExperimentSpec


@dataclass
class Translator:
    model: EncoderDecoder  # in eval mode
    spec: ExperimentSpec
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    checkpoint: Path  # the file the weights came from
    what: str  # which model that is: "step 300", "the mean of step...ckpt, ..."

    @property
    def pipelines(self) -> tuple[TextPipeline, TextPipeline] | None:
        """The run's text pipeline (source's, target's), None where it has none."""
        return pipelines_of(self.spec.data)

    def decode_spec(self, **overrides: Any) -> DecodeSpec:
        """The run's decode settings with `overrides` (beam=5, alpha=1.0, length_penalty=...), checked."""
        try:
            return DecodeSpec.model_validate({**self.spec.decode.model_dump(), **overrides})
        except ValidationError as e:
            raise UserError("decode: " + "; ".join(format_validation_error(e, root=DecodeSpec))) from None

    def translate(
        self, lines: Sequence[str] | str, *, detokenize: bool = False, on_batch: Callable[[int], None] | None = None, **decode: Any
    ) -> list[str]:
        """The translation of each line (a str: of that one line), as `aiayn translate` writes it:
        through the run's text pipeline, beam search, its output text (`detokenize`: plain text
        from a run trained on tokenized text). `decode` overrides the run's decode settings."""
        lines = [lines] if isinstance(lines, str) else list(lines)
        pipelines = self.pipelines
        if detokenize and (pipelines is None or pipelines[1].tokenizer is None):
            raise UserError("detokenize: this run was trained on untokenized text (data.pipeline has no moses_tokenize)")
        if pipelines is not None:
            lines = pipelines[0].lines(lines)
        hyps = translate_texts(self.model, self.src_tokenizer, self.tgt_tokenizer, lines, self.decode_spec(**decode), on_batch=on_batch, what="input")
        if detokenize and pipelines is not None:
            return [pipelines[1].detokenize(h) for h in hyps]
        return hyps

    def to(self, device: str | torch.device) -> "Translator":
        self.model.to(device)
        return self


def load_run(path: str | Path, *, device: str | torch.device | None = None) -> Translator:
    """The model of a run directory (runs/<name>/version_<n>, or runs/<name> for its latest) or of
    a .ckpt file, ready to translate; on `device` (default: the CPU)."""
    loaded = load_for_inference(path)
    translator = Translator(loaded.model, loaded.spec, loaded.src_tokenizer, loaded.tgt_tokenizer, loaded.checkpoint, loaded.what)
    return translator.to(device) if device is not None else translator
