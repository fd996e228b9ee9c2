"""Loading a trained model for inference: `aiayn.load_run(path)` (a Translator, or a LanguageModel:
what the model's graph makes of it, builder/graph.py) and `aiayn.load_ensemble(paths)`."""

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from aiayn.builder.data.tokenizer import Tokenizer
from aiayn.builder.decode.checkpoint import ForInference, load_for_inference
from aiayn.builder.decode.device import resolve_device
from aiayn.builder.decode.ensemble import Ensemble
from aiayn.builder.decode.translator import Translator
from aiayn.builder.errors import UserError, described, path_argument
from aiayn.builder.graph import graph_of
from aiayn.builder.plugins import default_registry
from aiayn.builder.registry import Registry

if TYPE_CHECKING:
    from aiayn.builder.decode.language_model import LanguageModel


def load_run(
    path: str | Path | Sequence[str | Path], *, device: str | torch.device | None = None, registry: Registry | None = None
) -> "Translator | LanguageModel":
    """The model of a run, ready to translate (a Translator), or a language model's run as a
    LanguageModel (`.generate`).

    :param path: a run directory (runs/<name>/version_<n>, or runs/<name> for its latest), a .ckpt
        file or a Hugging Face Marian folder; a list of two or more: their ensemble, a Translator
        (`load_ensemble`)
    :param device: a torch device (default: CUDA where present, else the CPU, as `aiayn translate`)
    :param registry: the registrations that read it (default: aiayn's own blocks and the installed
        plugins, `aiayn.load_registry()`)
    :returns: a Translator, or a LanguageModel
    :raises UserError: a path that is none of these, or a run that cannot be read, said in one line"""
    if isinstance(path, (list, tuple)):
        if len(path) != 1:
            return load_ensemble(path, device=device, registry=registry)
        return load_run(path[0], device=device, registry=registry)
    path = path_argument(path, "path")
    target = resolve_device(device)  # a bad device is told before the model loads
    loaded = load_for_inference(path, registry or default_registry())
    model = graph_of(loaded.spec).inference(loaded)  # a Translator, or a LanguageModel: the graph's
    model.model.to(target)
    return model


def load_ensemble(
    paths: Sequence[str | Path], *, device: str | torch.device | None = None, registry: Registry | None = None
) -> Translator:
    """The ensemble of two or more trained translation models that read and write the same
    tokens: a Translator whose next-token probabilities are the mean of theirs
    (builder/decode/ensemble.py). Its decode settings, text pipeline and tokenizers are the first
    model's.

    :param paths: two or more runs, checkpoints or Marian folders, as `load_run` takes each
    :param device: a torch device (default: CUDA where present, else the CPU)
    :param registry: the registrations that read them (default: `aiayn.load_registry()`)
    :returns: a Translator
    :raises UserError: fewer than two, or members that do not read and write alike (which differs)"""
    if isinstance(paths, (str, Path)) or not isinstance(paths, (list, tuple)) or len(paths) < 2:
        got = f"a list of {len(paths)}" if isinstance(paths, (list, tuple)) else described(paths)
        raise UserError(f"paths: an ensemble takes a list of two or more models, got {got}")
    paths = [path_argument(p, f"paths[{i}]") for i, p in enumerate(paths)]
    target = resolve_device(device)
    loaded = load_models(paths, registry or default_registry())
    loaded.model.to(target)
    return Translator(loaded.model, loaded.spec, loaded.src_tokenizer, loaded.tgt_tokenizer, loaded.checkpoint, loaded.what)


def load_models(paths: Sequence[str | Path], registry: Registry) -> ForInference:
    """`load_for_inference` of one path; of several, their ensemble as one model (on the CPU),
    with the first one's settings and tokenizers, each member checked to read and write what the
    first does."""
    if len(paths) == 1:
        return load_for_inference(paths[0], registry)
    loaded = [load_for_inference(p, registry) for p in paths]
    for p, one in zip(paths, loaded):
        refusal = graph_of(one.spec).ensemble_refusal(one.spec, Path(p))
        if refusal is not None:
            raise UserError(refusal)
    first = loaded[0]
    for p, one in zip(paths[1:], loaded[1:]):
        _check_member(Path(paths[0]), first, Path(p), one)
    model = Ensemble([one.model for one in loaded])
    what = f"an ensemble of {len(loaded)}: " + ", ".join(f"{one.checkpoint} ({one.what})" for one in loaded)
    return first._replace(model=model, what=what)


def _check_member(first_path: Path, first: Any, path: Path, one: Any) -> None:
    """`one` reads and writes what `first` does: the same tokenizers, text pipeline and graph."""
    where = f"{path} cannot join an ensemble with {first_path}"
    for side, a, b in (("source", first.src_tokenizer, one.src_tokenizer), ("target", first.tgt_tokenizer, one.tgt_tokenizer)):
        difference = vocabulary_difference(a, b)
        if difference:
            raise UserError(
                f"{where}: their {side} vocabularies differ ({difference}); ensemble models trained with one tokenizer"
            )
    if first.spec.data.pipeline != one.spec.data.pipeline:
        raise UserError(f"{where}: their text pipelines (data.pipeline) differ, so they read different text")
    graphs = graph_of(first.spec).name, graph_of(one.spec).name
    if graphs[0] != graphs[1]:
        raise UserError(f"{where}: one is an {graphs[0]} and the other a {graphs[1]} model; ensemble models of one graph")
    sizes = (first.model.generator.vocab_size, one.model.generator.vocab_size)
    if sizes[0] != sizes[1]:
        raise UserError(f"{where}: their output layers have {sizes[1]} and {sizes[0]} rows; an ensemble averages one vocabulary")
    if first.model.source_eos_id != one.model.source_eos_id:
        raise UserError(f"{where}: one ends its sources with </s> and the other not (model.source_eos differs)")


def vocabulary_difference(a: Tokenizer, b: Tokenizer) -> str | None:
    """None where the tokenizers split text alike into the same ids, else what differs, in a few words."""
    if type(a) is not type(b):
        return f"{type(a).__name__} and {type(b).__name__}"
    ta, tb = a.tokens(), b.tokens()
    if len(ta) != len(tb):
        return f"{len(ta)} and {len(tb)} tokens"
    diff = next((i for i, (x, y) in enumerate(zip(ta, tb)) if x != y), None)
    if diff is not None:
        return f"token {diff} is {ta[diff]!r} in one and {tb[diff]!r} in the other"
    if a.to_json() != b.to_json():
        return "the same tokens, split from text by different rules"
    return None
