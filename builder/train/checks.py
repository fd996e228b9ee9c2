"""What `aiayn train` checks before it writes anything: that the model fits this machine, and
that a run it resumes holds the same model and a readable checkpoint."""

import os
from typing import Any

import torch
import yaml
from pydantic import ValidationError

from aiayn.builder.decode.checkpoint import load_checkpoint
from aiayn.builder.errors import UserError
from aiayn.builder.model.size import memory_estimate
from aiayn.builder.run.rundir import RunDir, differences
from aiayn.schemas.experiment import ExperimentSpec
from aiayn.schemas.model import ModelSpec


def machine_memory(device: torch.device) -> int:
    """Bytes of memory of the device training runs on (the host's RAM for the CPU)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_memory(spec: ExperimentSpec, device: torch.device, tokens_per_batch: int) -> None:
    need = memory_estimate(spec.model, tokens_per_batch)["total"]
    have = machine_memory(device)
    if need > have:
        raise UserError(
            f"the model needs about {need / 2**30:,.1f} GiB to train (fp32 weights, gradients and Adam, and "
            f"the activations of {tokens_per_batch:,} tokens per batch: see `aiayn show`) but this "
            f"{'GPU' if device.type == 'cuda' else 'machine'} has {have / 2**30:,.1f} GiB; use smaller dims, "
            "or lower train.max_tokens_per_batch"
        )


def check_resumable(spec: ExperimentSpec, run: RunDir, *, resume: bool) -> None:
    """A run directory that already holds a config must hold this model; a run to resume, a
    checkpoint that loads."""
    if run.config.is_file():
        where = differences(_stored_model(run), spec.model.model_dump(mode="json"), "model")
        if where:
            shown = "; ".join(f"{key}: {old!r} -> {new!r}" for key, old, new in where[:5])
            more = f" (and {len(where) - 5} more)" if len(where) > 5 else ""
            raise UserError(
                f"{run.path} trained another model ({shown}{more}); its checkpoints cannot continue as this "
                "one: train a new run (without --resume / --run-dir), or drop the changed settings"
            )
    if resume:
        load_checkpoint(run.last_checkpoint)  # a clear refusal for a damaged file


def _stored_model(run: RunDir) -> Any:
    """The model of the run's config.yaml as this release writes it (an older release's form,
    such as 0.1's add_norm.eps, is read as the same model), or as written where it is no valid spec."""
    stored = _read_config(run).get("model")
    try:
        return ModelSpec.model_validate(stored).model_dump(mode="json")
    except ValidationError:
        return stored


def _read_config(run: RunDir) -> dict[str, Any]:
    try:
        config = yaml.safe_load(run.config.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise UserError(f"{run.config}: cannot read the run's config ({e}); is it a run directory of aiayn train?") from None
    return config if isinstance(config, dict) else {}
