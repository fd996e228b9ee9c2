"""Checkpoints for inference: safe loading, finding them in run directories, averaging, slim files.

A checkpoint is read with `torch.load(weights_only=True)`: tensors and plain Python data only, so
a file that would import code when unpickled is refused instead of run. Lightning's checkpoints
(optimizer, loops, callbacks, the "rng" ByteTensor) load this way as they are.

aiayn reads two layouts, both with the model's weights under "model.*" in "state_dict" and the
resolved experiment under "hyper_parameters"["experiment"] (Lightning's key):
  - Lightning's own, written by `aiayn train` (runs/<name>/version_<n>/checkpoints/*.ckpt);
  - the slim one written by `aiayn average`: only those two entries and
    "aiayn": {"format": 1, "averaged_from": [paths], "tokenizers": {file name: JSON}}, so that
    a slim checkpoint translates on its own, wherever it was written.
"""

import pickle
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from pydantic import ValidationError

from aiayn.builder.data.tokenizer import Tokenizer, check_vocabulary, load_run_tokenizers, tokenizer_from_json
from aiayn.builder.errors import UserError, missing_plugins_message, resolved
from aiayn.builder.model.build import build_model
from aiayn.builder.model.for_inference import ForInference
from aiayn.builder.plugins import default_registry
from aiayn.builder.registry import Registry
from aiayn.builder.run.atomic import atomic_write
from aiayn.builder.run.jsonfile import read_json
from aiayn.builder.run.rundir import RunDir, differences, version_dirs
from aiayn.builder.run.validation import format_validation_error
from aiayn.schemas.experiment import ExperimentSpec

FORMAT = 1  # the version of the slim layout
PREFIX = "model."  # TranslationTask keeps the EncoderDecoder at `self.model`
_WHAT = "give a .ckpt written by `aiayn train` or `aiayn average`"


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """The checkpoint at `path` (on the CPU), checked to hold an experiment and model weights."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"checkpoint not found: {path}")
    if path.is_dir():
        raise UserError(f"{path} is a directory, not a checkpoint file; {_WHAT}")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        refused = _refused_global(e)
        if refused is None:
            raise UserError(f"{path} is not an aiayn checkpoint: torch.load cannot read it; {_WHAT}") from None
        raise UserError(
            f"{path} is not a safe aiayn checkpoint: loading it would import {refused}, and aiayn "
            "loads only tensors and plain data (torch.load with weights_only=True); do not load "
            "checkpoints from sources you do not trust"
        ) from None
    except Exception:  # bytes that are no checkpoint fail in many ways (EOFError, IndexError, RuntimeError, ...)
        raise UserError(f"{path} is not an aiayn checkpoint: torch.load cannot read it; {_WHAT}") from None
    if not isinstance(ckpt, dict):
        raise UserError(f"{path} is not an aiayn checkpoint: it holds a {type(ckpt).__name__}, not a dict; {_WHAT}")
    hparams = ckpt.get("hyper_parameters")
    if not isinstance(hparams, dict) or not isinstance(hparams.get("experiment"), dict):
        raise UserError(f"{path} is not an aiayn checkpoint: it has no hyper_parameters['experiment']; {_WHAT}")
    weights = ckpt.get("state_dict")
    if not isinstance(weights, dict) or not any(isinstance(k, str) and k.startswith(PREFIX) for k in weights):
        raise UserError(f"{path} is not an aiayn checkpoint: it has no model weights (state_dict 'model.*'); {_WHAT}")
    return ckpt


def _refused_global(error: BaseException) -> str | None:
    """The dotted name of the global torch's weights-only unpickler refused, if that was the reason."""
    for e in (error, error.__context__, error.__cause__):
        match = re.search(r"GLOBAL ([\w.]+)", str(e)) if e is not None else None
        if match:
            return match.group(1)
    return None


def experiment_of(ckpt: dict[str, Any], path: str | Path, registry: Registry) -> ExperimentSpec:
    data = ckpt["hyper_parameters"]["experiment"]
    try:
        return ExperimentSpec.model_validate(data, context=registry.context)
    except ValidationError as e:
        missing = registry.missing_plugins(ckpt["hyper_parameters"].get("plugins"))
        if missing:
            raise UserError(missing_plugins_message(path, missing)) from None
        lines = "\n".join(f"  {line}" for line in format_validation_error(e, registry=registry))
        raise UserError(f"{path}: the experiment stored in the checkpoint is not valid:\n{lines}") from None


def model_weights(ckpt: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The EncoderDecoder's state dict (the "model." prefix removed)."""
    return {k[len(PREFIX) :]: v for k, v in ckpt["state_dict"].items() if k.startswith(PREFIX)}


# ---- where the checkpoint and its tokenizer are ------------------------------------------------


def resolve_run_or_checkpoint(arg: str | Path) -> tuple[Path, RunDir | None]:
    """(checkpoint file, run directory or None) for a .ckpt file or a run directory.

    A run directory gives its model (RunDir.model_checkpoint: averaged.ckpt where the run averaged
    its last checkpoints, as results.json reports, else last.ckpt); a directory of runs
    (runs/<name>, holding version_<n>/) gives that of its latest version with a checkpoint. A checkpoint file's run
    directory is the nearest of its directory and that directory's parent that holds the run's
    tokenizer.
    """
    path = Path(arg)
    if not path.exists():
        resolved(path)  # a link that leads back to itself is named as one
        raise UserError(
            f"{path} does not exist: give a run directory (runs/<name>/version_<n>), a .ckpt file or a Hugging Face folder (Marian, GPT-2, Llama)"
        )
    if path.is_file():
        return path, next((RunDir(d) for d in (path.parent, path.parent.parent) if RunDir(d).has_tokenizer), None)
    run = RunDir(path)
    if not run.checkpoints.is_dir() and version_dirs(path):
        latest = RunDir.latest_in(path)
        if latest is None:
            raise UserError(
                f"{path}: none of its runs ({', '.join(p.name for p in version_dirs(path))}) has a checkpoint "
                "yet; train one first"
            )
        run = latest
    if not run.last_checkpoint.is_file():
        if run.version is None and not any(p.exists() for p in (run.checkpoints, run.config, run.status_file)):
            raise UserError(
                f"{path} is not a run directory: it has no checkpoints/ and no version_<n>/ runs; "
                "give a run directory (runs/<name>/version_<n>), a .ckpt file or a Hugging Face folder (Marian, GPT-2, Llama)"
            )
        raise UserError(f"{run.path} has no checkpoint to load ({run.last_checkpoint} does not exist); has it trained yet?")
    return run.model_checkpoint, run


def load_tokenizers(ckpt: dict[str, Any], ckpt_path: Path, run: RunDir | None, registry: Registry) -> tuple[Tokenizer, Tokenizer]:
    """(source, target) tokenizer: those stored in a slim checkpoint, else the run directory's."""
    stored = ckpt.get("aiayn", {}).get("tokenizers") if isinstance(ckpt.get("aiayn"), dict) else None
    if stored:
        loaded = {
            name: tokenizer_from_json(text, f"{ckpt_path} ({name}): the stored tokenizer", registry)
            for name, text in stored.items()
        }
        shared, _ = RunDir(Path()).tokenizer_files(joint=True)
        src, tgt = RunDir(Path()).tokenizer_files(joint=False)
        if shared.name in loaded:
            return loaded[shared.name], loaded[shared.name]
        if src.name in loaded and tgt.name in loaded:
            return loaded[src.name], loaded[tgt.name]
    if run is not None:
        return load_run_tokenizers(run, registry)
    places = " and ".join(str(d) for d in dict.fromkeys((ckpt_path.parent, ckpt_path.parent.parent)))
    raise UserError(
        f"no tokenizer for {ckpt_path}: looked for tokenizer.json (or tokenizer.src.json and "
        f"tokenizer.tgt.json) in {places}; give the run directory instead, or copy the run's "
        "tokenizer.json next to the checkpoint"
    )


def tokenizer_files(ckpt: dict[str, Any], run: RunDir | None, registry: Registry) -> dict[str, str]:
    """{file name: JSON} of the tokenizer(s) that go with `ckpt`, to store in a slim checkpoint."""
    stored = ckpt.get("aiayn", {}).get("tokenizers") if isinstance(ckpt.get("aiayn"), dict) else None
    if stored:
        return dict(stored)
    if run is None:
        return {}
    names = [*run.tokenizer_files(joint=True)[:1], *run.tokenizer_files(joint=False)]
    files = {}
    for path in (p for p in names if p.is_file()):  # read as a tokenizer: a damaged one is never copied
        try:
            files[path.name] = path.read_text(encoding="utf-8")
        except (OSError, ValueError) as e:  # UnicodeDecodeError is a ValueError
            raise UserError(
                f"{path} is not a valid tokenizer file ({e}); it is the run's tokenizer, which the model needs"
            ) from None
        tokenizer_from_json(files[path.name], str(path), registry)
    return files


def load_for_inference(arg: str | Path, registry: Registry | None = None) -> ForInference:
    """The model (eval mode, CPU), its experiment and tokenizers from a run directory or .ckpt,
    or from a Hugging Face Marian folder (builder/formats/from_marian.py); `registry` reads its
    types (default: aiayn.load_registry())."""
    registry = registry if registry is not None else default_registry()
    kind = hf_model_type(Path(arg))
    if kind == "marian":
        from aiayn.builder.formats.from_marian import load_marian  # transformers, only for such a folder

        return load_marian(arg, registry)
    if kind is not None:
        from aiayn.builder.formats.from_causal_lm import load_causal_lm

        return load_causal_lm(arg, registry)
    ckpt_path, run = resolve_run_or_checkpoint(arg)
    ckpt = load_checkpoint(ckpt_path)
    spec = experiment_of(ckpt, ckpt_path, registry)
    src_tok, tgt_tok = load_tokenizers(ckpt, ckpt_path, run, registry)
    check_vocabulary(
        spec.model.embedding.vocab_size, src_tok, tgt_tok, where=f"{ckpt_path}: ", fix="the tokenizer belongs to another run"
    )
    model = build_model(spec.model)
    weights = model_weights(ckpt)
    mismatch = weights_mismatch(model.state_dict(), weights)
    if mismatch:
        raise UserError(f"{ckpt_path}: the weights do not fit the model its experiment describes: {mismatch}")
    model.load_state_dict(weights, strict=True)
    averaged = ckpt.get("aiayn", {}).get("averaged_from") if isinstance(ckpt.get("aiayn"), dict) else None
    if averaged:
        what = ("the mean of " if len(averaged) > 1 else "a slim copy of ") + ", ".join(Path(p).name for p in averaged)
    else:
        what = f"step {ckpt['global_step']}" if "global_step" in ckpt else "its weights"
    step = ckpt.get("global_step", (run.results() or {}).get("steps") if run is not None else None)
    return ForInference(model.eval(), spec, src_tok, tgt_tok, ckpt_path, what, step)


def source_model(path: str, registry: Registry) -> dict[str, Any]:
    """The model section of the trained model at `path` (a run, a .ckpt, a Marian or opus-mt folder):
    what an experiment with `init_from: path` and no model section takes (run/config.py's load_config)."""
    return load_source_model(path, registry).spec.model.model_dump(mode="json")


def load_source_model(path: str, registry: Registry) -> ForInference:
    """init_from's trained model, read as `aiayn translate` reads it; a refusal says init_from."""
    if not Path(path).exists():
        try:
            resolved(path)
        except UserError as e:
            raise UserError(f"init_from: {e}") from None
        raise UserError(
            f"init_from: {path} does not exist; give a run directory (runs/<name>/version_<n>), a .ckpt file or a Hugging Face folder (Marian, GPT-2, Llama)"
        )
    try:
        return load_for_inference(path, registry)
    except UserError as e:
        raise UserError(f"init_from: {e}") from None


def weights_mismatch(expected: dict[str, torch.Tensor], given: dict[str, torch.Tensor]) -> str:
    """What keeps `given` from loading as `expected`, in one short line ("" when it fits)."""

    def names(keys: list[str]) -> str:
        return ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")

    missing = [k for k in expected if k not in given]
    unexpected = [k for k in given if k not in expected]
    shapes = [
        f"{k} {tuple(given[k].shape)} for {tuple(v.shape)}"
        for k, v in expected.items()
        if k in given and given[k].shape != v.shape
    ]
    parts = [
        f"{what} {names(keys)}" for what, keys in (("missing", missing), ("unexpected", unexpected), ("shape", shapes)) if keys
    ]
    return "; ".join(parts)


# ---- averaging (Sec 6.1: the last 5 or 20 checkpoints) -------------------------------------------


def average_checkpoints(paths: Sequence[Path], registry: Registry | None = None) -> dict[str, Any]:
    """A slim checkpoint whose model parameters are the mean of those of `paths` (accumulated in
    float32 or wider, stored in each parameter's own dtype). Refuses checkpoints of different
    experiments or shapes. One path gives a slim copy with the same weights."""
    if not paths:
        raise UserError("aiayn average: give at least one checkpoint")
    registry = registry if registry is not None else default_registry()
    first_path = Path(paths[0])
    first_run = resolve_run_or_checkpoint(first_path)[1]
    first = load_checkpoint(first_path)
    spec = experiment_of(first, first_path, registry)
    reference = model_weights(first)
    tokenizers = tokenizer_files(first, first_run, registry)
    sums = {k: v.to(torch.promote_types(v.dtype, torch.float32)).clone() for k, v in reference.items()}
    for path in map(Path, paths[1:]):
        ckpt = load_checkpoint(path)
        other = experiment_of(ckpt, path, registry)
        weights = model_weights(ckpt)
        _check_compatible(first_path, path, spec, other, reference, weights)
        theirs = tokenizer_files(ckpt, resolve_run_or_checkpoint(path)[1], registry)
        if tokenizers and theirs and theirs != tokenizers:
            raise UserError(f"cannot average {first_path} and {path}: their runs have different tokenizers")
        for k, v in weights.items():
            sums[k] += v.to(sums[k].dtype)
    n = len(paths)
    shared: dict[tuple[int, int], torch.Tensor] = {}  # tied weights stay one tensor in the file
    state = {}
    for k, v in reference.items():
        key = (v.untyped_storage().data_ptr(), int(v.storage_offset()))
        if key not in shared:
            shared[key] = (sums[k] / n).to(v.dtype) if v.is_floating_point() else v.clone()
        state[PREFIX + k] = shared[key]
    return {
        "state_dict": state,
        "hyper_parameters": {k: v for k, v in first["hyper_parameters"].items() if k in ("experiment", "plugins")},
        "hparams_name": "kwargs",
        "aiayn": {"format": FORMAT, "averaged_from": [str(p) for p in paths], "tokenizers": tokenizers},
    }


def _check_compatible(
    a: Path,
    b: Path,
    spec_a: ExperimentSpec,
    spec_b: ExperimentSpec,
    weights_a: dict[str, torch.Tensor],
    weights_b: dict[str, torch.Tensor],
) -> None:
    prefix = f"cannot average {a} and {b}"
    for k, va in weights_a.items():
        if k not in weights_b:
            raise UserError(f"{prefix}: parameter {k} is in the first but not in the second; average checkpoints of one run")
        vb = weights_b[k]
        if va.shape != vb.shape:
            raise UserError(
                f"{prefix}: parameter {k} has shape {tuple(va.shape)} in the first and "
                f"{tuple(vb.shape)} in the second; average checkpoints of one run"
            )
        if not va.is_floating_point() and not torch.equal(va, vb):
            raise UserError(f"{prefix}: integer tensor {k} differs, so it cannot be averaged")
    extra = [k for k in weights_b if k not in weights_a]
    if extra:
        raise UserError(f"{prefix}: parameter {extra[0]} is in the second but not in the first; average checkpoints of one run")
    model_a, model_b = spec_a.model.model_dump(mode="json"), spec_b.model.model_dump(mode="json")
    where = differences(model_a, model_b, "model")
    if where:
        field, va, vb = where[0]
        raise UserError(f"{prefix}: their models differ at {field} ({va!r} and {vb!r}); average checkpoints of one run")
    if spec_a.name != spec_b.name:
        raise UserError(
            f"{prefix}: they belong to different experiments ({spec_a.name!r} and {spec_b.name!r}); "
            "average checkpoints of one run"
        )


def save_checkpoint(ckpt: dict[str, Any], path: Path) -> None:
    """torch.save to a temporary file renamed into place: a kill leaves no half-written file."""
    with atomic_write(Path(path)) as f:
        torch.save(ckpt, f)


HF_MODEL_TYPES = {"marian": "Marian", "gpt2": "GPT-2", "llama": "Llama"}  # config.json's model_type -> what aiayn reads


def hf_model_type(path: Path) -> str | None:
    """ "marian", "gpt2" or "llama": a folder whose config.json says that model_type (a Hugging Face
    MarianMTModel, GPT2LMHeadModel or LlamaForCausalLM); None for anything else without one, or a
    run directory. A folder with a config.json that is none of these nor a run directory is a
    UserError that says what it holds (a damaged file, another kind of model), not "no run directory"."""
    config = path / "config.json"
    if not config.is_file():
        return None
    try:
        data = read_json(config)
    except (ValueError, OSError):
        data = None
    kind = data.get("model_type") if isinstance(data, dict) else None
    if isinstance(kind, str) and kind in HF_MODEL_TYPES:  # a list or an object is no model type (and no dict key)
        return kind
    if _looks_like_a_run(path):
        return None
    if not isinstance(data, dict):
        from aiayn.builder.formats.marian_config import read_config  # says what is wrong with the file

        read_config(path)
    raise UserError(
        f"{path} is neither a run directory nor a Hugging Face model aiayn reads: its config.json says model_type "
        f"{kind!r}, and aiayn reads 'marian' (as opus-mt's), 'gpt2' and 'llama'; give a run directory, a .ckpt file "
        "or such a folder"
    )


def is_marian_folder(path: Path) -> bool:
    """A Hugging Face Marian folder (`hf_model_type`)."""
    return hf_model_type(path) == "marian"


def _looks_like_a_run(path: Path) -> bool:
    run = RunDir(path)
    return bool(version_dirs(path)) or any(p.exists() for p in (run.checkpoints, run.config, run.status_file))
