"""What `aiayn train` checks before it writes anything: that the model fits this machine, and
that a run it resumes holds the same model and a readable checkpoint."""

import os
from dataclasses import dataclass
from typing import Any

import torch
from lightning.pytorch.accelerators import CUDAAccelerator
from pydantic import ValidationError

from aiayn.builder.data.spec import check_data_files
from aiayn.builder.decode.checkpoint import load_checkpoint
from aiayn.builder.errors import UserError
from aiayn.builder.model.build import build_model
from aiayn.builder.model.size import memory_estimate
from aiayn.builder.registry import Registry, registry_of
from aiayn.builder.run.config import read_run_config
from aiayn.builder.run.rundir import RunDir, differences
from aiayn.builder.train.init_from import load_source, start_from, with_source_pipeline
from aiayn.builder.train.threads import check_cpu_threads
from aiayn.builder.train.trainer import accelerator, batching, check_strategy, world_size
from aiayn.schemas.experiment import ExperimentSpec


def machine_memory(device: torch.device) -> int:
    """Bytes of memory of the device training runs on (the host's RAM for the CPU)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_before_training(spec: ExperimentSpec) -> None:
    """What `aiayn train` refuses before it starts, without training: the data files, the
    devices and strategy asked for, whether the model fits the first device's memory, and
    whether init_from's weights go into it."""
    source = load_source(spec)
    if source is not None:
        spec = with_source_pipeline(spec, source.loaded.spec)
        start_from(build_model(spec.model), source)
    check_data_files(spec)
    check_strategy(spec.trainer)
    check_cpu_threads(spec.train.cpu_threads)
    size = world_size(spec)
    gpu = accelerator(spec.trainer) is CUDAAccelerator
    check_memory(spec, torch.device("cuda", 0) if gpu else torch.device("cpu"), batching(spec, size)[0])


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


# What a resumed run may set otherwise than the run it continues: how it runs, validates, saves
# and decodes; never what it trains (the model, the data, the loss, the optimizer, the schedule).
MAY_CHANGE = (
    "description",
    "reported",
    "decode",
    "train.validation",
    "train.checkpoint",
    "train.compile",
    "train.activation_checkpointing",
    "train.cpu_threads",
    "train.max_tokens_per_batch",
    "train.average_last",
    "data.num_workers",
    "data.cache_dir",
    "trainer.accelerator",
    "trainer.devices",
    "trainer.strategy",
    "trainer.num_nodes",
    "trainer.precision",
    "trainer.max_steps",
    "trainer.max_time",
    "trainer.val_check_interval",
    "trainer.check_val_every_n_epoch",
    "trainer.log_every_n_steps",
    "trainer.num_sanity_val_steps",
    "trainer.limit_val_batches",
    "trainer.deterministic",
    "trainer.enable_progress_bar",
    "trainer.enable_model_summary",
)


@dataclass(frozen=True)
class Resumable:
    step: int  # the step the run continues from (0: a new run)
    changed: dict[str, list[Any]]  # what may change and did: {key: [the run's, this one's]}


def check_resumable(spec: ExperimentSpec, run: RunDir, *, resume: bool) -> Resumable:
    """A run directory that already holds a config must hold this training: only what MAY_CHANGE
    differs. A run to resume has a checkpoint that loads, and a max_steps that does not end it
    before its step, or at it when it finished."""
    changed: list[tuple[str, Any, Any]] = []
    texts = [run.translations / f"{split}.{suffix}" for split in ("valid", "test") for suffix in ("hyp", "ref")]
    tokenizers = [*run.tokenizer_files(joint=True), *run.tokenizer_files(joint=False)]
    lightning = run.path / "hparams.yaml"  # what Lightning's logger writes into the run
    langs = (spec.data.src_lang, spec.data.tgt_lang)
    texts += [run.data / f"{split}.{lang}" for split in ("train", "valid", "test") for lang in langs]  # the demo's text
    for path in (
        run.config,
        run.config_diff,
        run.status_file,
        run.results_file,
        run.last_checkpoint,
        lightning,
        *tokenizers,
        *texts,
    ):
        if path.is_dir():
            raise UserError(f"{path} is a folder where the run keeps a file of its own; move it away, or train a new run")
    if run.config.is_file():
        where = [
            (k.lstrip("."), a, b) for k, a, b in differences(_stored_experiment(run, registry_of(spec)), _experiment(spec), "")
        ]
        refused = [d for d in where if not d[0].startswith(tuple(f"{k}." for k in MAY_CHANGE)) and d[0] not in MAY_CHANGE]
        if refused:
            model = [d for d in refused if d[0].startswith("model.")]
            what = "trained another model" if model else "was trained otherwise"
            shown = "; ".join(f"{key}: {old!r} -> {new!r}" for key, old, new in (model or refused)[:5])
            more = f" (and {len(model or refused) - 5} more)" if len(model or refused) > 5 else ""
            raise UserError(
                f"{run.path} {what} ({shown}{more}); its checkpoints cannot continue as this "
                "one: train a new run (without --resume / --run-dir), or drop the changed settings"
            )
        changed = where
    if not resume:
        return Resumable(0, {})
    step = int(load_checkpoint(run.resume_checkpoint).get("global_step", 0))  # a clear refusal for a damaged file
    finished = (run.status() or {}).get("status") == "finished"
    if spec.trainer.max_steps < step or spec.trainer.max_steps == step and finished:
        raise UserError(
            f"trainer.max_steps ({spec.trainer.max_steps}) would end {run.path} at or before step {step}, "
            f"where it {'finished' if finished else 'stopped'}; a run is never cut short: give trainer.max_steps > {step} "
            "to train it further, or train a new run"
        )
    return Resumable(step, {key: [old, new] for key, old, new in changed})


def _experiment(spec: ExperimentSpec) -> dict[str, Any]:
    return spec.model_dump(mode="json", exclude={"extends"})


def _stored_experiment(run: RunDir, registry: Registry) -> Any:
    """The run's config.yaml as this release writes it (an older release's form, such as 0.1's
    add_norm.eps, is read as the same experiment), or as written where it is no valid spec."""
    stored = read_run_config(run.config)
    try:
        return _experiment(ExperimentSpec.model_validate(stored, context=registry.context))
    except ValidationError:
        return stored
