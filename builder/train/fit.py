"""One training run: checks, run directory, data, task, Trainer.fit, final evaluation, results.json.

`fit` is the I/O shell; what it decides is in small pure functions (`results_record`,
`finished`) that tests call directly.
"""

import contextlib
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import EarlyStopping
from lightning.pytorch.utilities.exceptions import SIGTERMException

from aiayn.builder.data.spec import check_data_files, make_datamodule
from aiayn.builder.data.tokenizer import check_vocabulary
from aiayn.builder.decode.checkpoint import average_checkpoints, model_weights, save_checkpoint, source_model
from aiayn.builder.errors import UserError
from aiayn.builder.graph import graph_of
from aiayn.builder.model.summary import identity
from aiayn.builder.registry import registry_of
from aiayn.builder.run.config import load_experiment, parent_of, stored_spec
from aiayn.builder.run.cpu import fixed_share
from aiayn.builder.run.outputs import hold_run, release_run
from aiayn.builder.run.rundir import RUN_DIR_ENV, RunDir, diff
from aiayn.builder.train.attributes import callbacks_of
from aiayn.builder.train.board import BLEU, BPB, PPL, Board
from aiayn.builder.train.checkpoints import StepCheckpoints, step_checkpoint_name
from aiayn.builder.train.checks import Resumable, check_memory, check_resumable
from aiayn.builder.train.init_from import config_note, load_source, start_from, with_source_pipeline
from aiayn.builder.train.pruning import Pruning
from aiayn.builder.train.requeue import SIGNAL, in_slurm_job
from aiayn.builder.train.task import TranslationTask
from aiayn.builder.train.threads import AdaptiveThreads, cpu_threads, threads_note
from aiayn.builder.train.trainer import batching, build_trainer
from aiayn.schemas.experiment import ExperimentSpec


def fit(
    spec: ExperimentSpec,
    run: RunDir,
    *,
    experiment_path: Path,
    resume: bool,
    callbacks: Sequence[L.Callback] = (),
) -> dict[str, Any] | None:
    """Train `spec` in `run`; returns the results (on rank 0) or None (other ranks, or a run
    that did not finish). Nothing is written before the Trainer's settings check out, and a new
    run directory that fails with a user error before its first checkpoint is removed."""
    try:
        return _fit(spec, run, experiment_path, resume, list(callbacks))
    finally:
        release_run(run.path)  # the run is free again once this returns (a process that ends frees it anyway)
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            # each rank leaves its process group before it exits: a gloo group still open at exit
            # can abort the process (std::terminate in its threads) once its peers have gone
            torch.distributed.destroy_process_group()


def _fit(
    spec: ExperimentSpec, run: RunDir, experiment_path: Path, resume: bool, callbacks: list[L.Callback]
) -> dict[str, Any] | None:
    L.seed_everything(spec.train.seed, workers=True, verbose=False)
    source = None if resume else load_source(spec)  # a resumed run's weights are its own checkpoint's
    theirs = source.loaded.spec if source else stored_spec(run.config, registry_of(spec)) if resume else None
    spec = with_source_pipeline(spec, theirs)
    check_data_files(spec)
    pruning = Pruning.from_env()  # a sweep's search trial: its study may stop it at a validation
    adaptive = [AdaptiveThreads()] if spec.train.cpu_threads == "auto" and fixed_share() is None else []
    trainer = build_trainer(spec, run, callbacks=[*callbacks, *([pruning] if pruning else []), *adaptive])
    device, max_tokens = trainer.strategy.root_device, batching(spec, trainer.world_size)[0]
    check_memory(spec, device, max_tokens)
    if device.type == "cpu":
        _set_threads(spec, trainer, adaptive=bool(adaptive))
    resumable = check_resumable(spec, run, resume=resume)
    if trainer.is_global_zero:
        for caution in spec.cautions:
            print(f"warning: {caution}", file=sys.stderr, flush=True)
    checkpoint = run.resume_checkpoint if resume else None
    # the data and the model before the run directory: a refusal of either leaves nothing behind
    data = make_datamodule(
        spec, run.path, max_tokens=max_tokens, on_gpu=device.type == "cuda", tokenizers=source and source.tokenizers
    )
    task = _task(spec)
    started_from = start_from(task.model, source) if source else (run.status() or {}).get("init_from") if resume else None
    made = [p for p in (run.path, *run.path.parents) if not p.exists()]  # a new run, and the folders made for it
    sessions = _open_run(spec, run, experiment_path, trainer, resumable, checkpoint, started_from)
    with _recording_failures(run, trainer, sessions, made=made):
        wall, pruned = _train(spec, run, trainer, task, data, checkpoint, pruning)
    if not trainer.is_global_zero:
        return None
    stopped = stopped_early(trainer)
    if not finished(spec, trainer.global_step, interrupted=trainer.interrupted, stopped_early=stopped is not None):
        sessions.end("pruned" if pruned else "interrupted", trainer.global_step, wall)
        return None
    sessions.end("finished", trainer.global_step, wall, write=False)  # written with results.json
    with _time_limit_signal_ignored():  # the evaluation may still end before the limit
        return _finalise(spec, run, trainer, task, data, sessions, wall, stopped, started_from)


def _train(
    spec: ExperimentSpec,
    run: RunDir,
    trainer: L.Trainer,
    task: TranslationTask,
    data: Any,
    checkpoint: Path | None,
    pruning: Pruning | None,
) -> tuple[float, bool]:
    """trainer.fit on the run's data, the final step saved: (its wall-clock seconds, whether a
    search's study pruned it)."""
    start = time.perf_counter()
    check_vocabulary(
        spec.model.embedding.vocab_size,
        *data.prepare_tokenizers(),
        where="",
        fix="set dims.vocab_size (or model.embedding.vocab_size) to at least the tokenizer's size",
        merges=spec.data.tokenizer.merges_asked(),
    )
    trainer.fit(task, datamodule=data, ckpt_path=str(checkpoint) if checkpoint else None)
    wall = time.perf_counter() - start
    pruned = pruning is not None and pruning.pruned_at is not None  # a search trial its study stopped: no result to keep
    unsaved = not pruned and not (run.checkpoints / step_checkpoint_name(trainer.global_step)).is_file()
    if trainer.strategy.broadcast(unsaved):  # rank 0's files decide: every rank must join the save
        _step_checkpoints(trainer).save(trainer)  # the final step has its step file, whatever the interval
    return wall, pruned


def _task(spec: ExperimentSpec) -> TranslationTask:
    """The LightningModule of `spec`, with the plugins its types come from (kept in its checkpoints)."""
    experiment, registry = spec.model_dump(mode="json"), registry_of(spec)
    return TranslationTask(experiment, plugins=registry.plugins_used(experiment), registry=registry)


def _set_threads(spec: ExperimentSpec, trainer: L.Trainer, *, adaptive: bool) -> None:
    """The threads of a CPU run (train.cpu_threads), said where auto took fewer than its share."""
    processes = len(trainer.device_ids)
    threads = cpu_threads(spec.train.cpu_threads, processes_here=processes)
    torch.set_num_threads(threads)
    note = threads_note(threads, processes_here=processes) if trainer.is_global_zero and adaptive else None
    if note:
        print(note, flush=True)


def _open_run(
    spec: ExperimentSpec,
    run: RunDir,
    experiment_path: Path,
    trainer: L.Trainer,
    resumable: Resumable,
    checkpoint: Path | None,
    started_from: Any,
) -> "Sessions":
    """Hold the run (rank 0), point the processes Lightning launches at it, write its config and
    status.json: the first writes of a run, after every refusal."""
    resume = checkpoint is not None
    if trainer.is_global_zero:  # the run is this process's until it ends (its ranks are its own)
        hold_run(run.path, doing="resume it" if resume else "train again (a new run takes the next version)")
    os.environ[RUN_DIR_ENV] = str(run.path)  # processes Lightning launches join this run
    sessions = Sessions(run, resumed=resume, step=resumable.step, changed=resumable.changed)
    if trainer.is_global_zero:
        for stale in run.checkpoints.glob(".*.tmp"):  # what a killed save left half-written
            stale.unlink()
        write_config(spec, run, experiment_path, note=config_note(started_from) if started_from else None)
        sessions.write(
            "running",
            resumed_from=str(checkpoint) if checkpoint else None,
            **({"init_from": started_from} if started_from else {}),
        )
    return sessions


class Sessions:
    """The processes that trained a run, in status.json and then results.json: the step each
    started from, where it ended and after how many seconds of training, and what it changed
    (on resume: what may change, such as a larger trainer.max_steps). A killed process records no
    end: what it trained after its last checkpoint is trained again by the next one."""

    def __init__(self, run: RunDir, *, resumed: bool, step: int, changed: dict[str, list[Any]]) -> None:
        earlier = (run.status() or {}).get("sessions", []) if resumed else []
        self.run = run
        self.all: list[dict[str, Any]] = [*earlier, {"started_at_step": step, **({"changed": changed} if changed else {})}]

    def write(self, status: str, **fields: Any) -> None:
        self.run.write_status(status, **fields, sessions=self.all)

    def end(self, status: str, step: int, wall: float, *, write: bool = True, **fields: Any) -> None:
        self.all[-1].update(ended_at_step=step, wall_time_s=round(wall, 1))
        if write:
            self.write(status, step=step, **fields)

    @property
    def wall_time_s(self) -> float:
        """Seconds of training, every process's that recorded its end."""
        return round(sum(s.get("wall_time_s", 0.0) for s in self.all), 1)


def _finalise(
    spec: ExperimentSpec,
    run: RunDir,
    trainer: L.Trainer,
    task: TranslationTask,
    data: Any,
    sessions: Sessions,
    wall: float,
    stopped: dict[str, Any] | None,
    started_from: dict[str, Any] | None,
) -> dict[str, Any]:
    """The final evaluation on the validation split: results.json, status.json, TensorBoard."""
    averaged = average_final(spec, run, trainer, task) if spec.train.average_last else None
    task.model.to(trainer.strategy.root_device)
    metrics, hyps, refs = graph_of(spec).final_scores(spec, task.model, data)  # BLEU (a parser's F1), or a language model's PPL
    results = results_record(spec, metrics, steps=trainer.global_step, wall_time_s=sessions.wall_time_s)
    results["tokens_per_s"] = round(task.tokens_seen * trainer.world_size / wall, 1) if wall > 0 else None  # this process's
    results["sessions"] = sessions.all
    if hyps is not None and refs is not None:
        run.write_translations("valid", hyps, refs)
    if averaged is not None:
        results["averaged_checkpoints"] = averaged
    if stopped is not None:
        results["stopped_early"] = stopped
    if started_from is not None:
        results["init_from"] = started_from
    run.write_results(results)
    sessions.write("finished", step=trainer.global_step, **({"init_from": started_from} if started_from else {}))
    if isinstance(trainer.logger, Board):
        final = {k: v for k, v in ((BLEU, results["bleu"]), (PPL, results["ppl"]), (BPB, results.get("bpb"))) if v is not None}
        if task.validated_at == trainer.global_step:  # that validation logged these already
            final = {k: v for k, v in final.items() if k not in trainer.logged_metrics}
        trainer.logger.log_final(final, step=trainer.global_step)
        trainer.logger.end_session("success")
        trainer.logger.finalize("success")
    return results


def _step_checkpoints(trainer: L.Trainer) -> StepCheckpoints:
    return next(c for c in callbacks_of(trainer) if isinstance(c, StepCheckpoints))


def average_final(spec: ExperimentSpec, run: RunDir, trainer: L.Trainer, task: TranslationTask) -> list[str]:
    """Sec. 6.1: the final weights become the mean of the train.average_last newest step
    checkpoints (the final step's among them), kept as checkpoints/averaged.ckpt. Returns the
    names of the checkpoints averaged."""
    paths = run.step_checkpoints()[-(spec.train.average_last or 1) :]
    averaged = average_checkpoints(paths, registry_of(spec))
    save_checkpoint(averaged, run.averaged_checkpoint)
    task.model.load_state_dict(model_weights(averaged))
    return [path.name for path in paths]


def finished(spec: ExperimentSpec, steps: int, *, interrupted: bool, stopped_early: bool = False) -> bool:
    """Reached max_steps, or stopped by max_time (a budget, not an interruption) or by train.early_stopping."""
    return not interrupted and (steps >= spec.trainer.max_steps or spec.trainer.max_time is not None or stopped_early)


def stopped_early(trainer: L.Trainer) -> dict[str, Any] | None:
    """Where train.early_stopping stopped training, None where it did not: the step, the
    monitored metric's best value, and the patience spent."""
    stopping = next((c for c in callbacks_of(trainer) if isinstance(c, EarlyStopping)), None)
    if stopping is None or stopping.wait_count < stopping.patience:
        return None
    best = round(float(stopping.best_score), 4)
    return {"step": trainer.global_step, "monitor": stopping.monitor, "best": best, "patience": stopping.patience}


def results_record(spec: ExperimentSpec, metrics: dict[str, Any], *, steps: int, wall_time_s: float) -> dict[str, Any]:
    """results.json: who the run is, its final scores on the validation split, and its cost
    (seconds of training over all the processes that trained it)."""
    return {
        **identity(spec),
        "seed": spec.train.seed,
        "split": "valid",
        "n_sentences": metrics["n_sentences"],
        "bleu": metrics.get("bleu"),  # None: a language model's
        "chrf": metrics.get("chrf"),
        "ppl": metrics["ppl"],
        **({"bpb": metrics["bpb"], "n_tokens": metrics["n_tokens"]} if "bpb" in metrics else {}),
        **{key: metrics[key] for key in ("n_blocks", "block_size") if key in metrics},  # a language model read in blocks
        # a parsing run's bracketing F1, a masked language model's accuracy on the tokens it predicts
        **{key: value for key, value in metrics.items() if key.startswith(("parse_", "mlm_"))},
        "sacrebleu_signature": metrics.get("signature"),
        "steps": steps,
        "wall_time_s": round(wall_time_s, 1),
    }


@contextmanager
def _recording_failures(run: RunDir, trainer: L.Trainer, sessions: Sessions, *, made: Sequence[Path] = ()) -> Iterator[None]:
    """status.json says how a run stopped; a new run (`made`: it and the folders made for it) that a
    user error stopped before its first checkpoint leaves nothing behind."""
    zero, start = trainer.is_global_zero, time.perf_counter()
    try:
        yield
    except (KeyboardInterrupt, SIGTERMException):
        if zero:
            sessions.end("interrupted", trainer.global_step, time.perf_counter() - start)
        raise KeyboardInterrupt from None
    except UserError as e:
        if zero and run.path in made and not run.has_checkpoint:
            shutil.rmtree(run.path, ignore_errors=True)
            for parent in made[1:]:  # the folders made for it (runs/, runs/demo/), while nothing else is in them
                with contextlib.suppress(OSError):
                    parent.rmdir()
        elif zero:
            sessions.end("failed", trainer.global_step, time.perf_counter() - start, error=str(e))
        raise
    except BaseException as e:
        if zero:
            sessions.end("failed", trainer.global_step, time.perf_counter() - start, error=f"{type(e).__name__}: {e}")
        raise


@contextmanager
def _time_limit_signal_ignored() -> Iterator[None]:
    """In a SLURM task, the time-limit signal (USR1) after training is ignored, not fatal (its
    default action): the final evaluation goes on, and the time limit, if it comes first, ends it."""
    if not in_slurm_job() or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(SIGNAL, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(SIGNAL, previous)


def write_config(spec: ExperimentSpec, run: RunDir, experiment_path: Path, *, note: str | None = None) -> None:
    """config.yaml (its first line a comment `note`, if given), and config.diff.yaml: what this run
    changes in the experiment it extends (or, for a root experiment, what the command-line
    overrides change in it)."""
    resolved = spec.model_dump(mode="json", exclude={"extends"})
    reference = parent_of(experiment_path) or experiment_path
    try:
        registry = registry_of(spec)
        parent = load_experiment(reference, registry=registry, model_of=partial(source_model, registry=registry))
        base = parent.model_dump(mode="json", exclude={"extends"})
    except UserError:  # a parent that is not a whole experiment on its own
        base = {}
    run.write_config(resolved, diff(base, resolved), f"what {experiment_path} and its overrides change in {reference}", note=note)
