"""One training run: config files, data, task, trainer, fit, final evaluation, results.json."""

import os
import time
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.utilities.exceptions import SIGTERMException
import yaml

from builder import rundir
from builder.config import load_experiment, parent_of
from builder.datasets import make_datamodule
from builder.evaluate import evaluate_split
from builder.errors import UserError
from builder.summary import paper_columns
from builder.model import count_params
from builder.task import TranslationTask
from builder.trainer import batching, build_trainer
from schemas.experiment import ExperimentSpec


def run(
    spec: ExperimentSpec,
    run_dir: Path,
    *,
    experiment_path: Path,
    resume: bool,
    callbacks: list[L.Callback] = (),  # type: ignore[assignment]
) -> dict[str, Any] | None:
    """Train `spec` in `run_dir`; returns the results (on rank 0) or None (other ranks, or a run
    that did not finish)."""
    L.seed_everything(spec.train.seed, workers=True, verbose=False)
    os.environ[rundir.RUN_DIR_ENV] = str(run_dir)  # processes Lightning launches join this run
    checkpoint = rundir.last_checkpoint(run_dir) if resume else None
    trainer = build_trainer(spec, run_dir, version=rundir.version_of(run_dir), callbacks=list(callbacks))
    if trainer.is_global_zero:
        _write_config(spec, run_dir, experiment_path)
        rundir.write_json(run_dir / "status.json", {"status": "running", "resumed_from": str(checkpoint) if checkpoint else None})
    max_tokens, _ = batching(spec, trainer.world_size)
    data = make_datamodule(spec, run_dir, max_tokens=max_tokens)
    task = TranslationTask(spec.model_dump(mode="json"))
    start = time.perf_counter()
    try:
        _check_vocabulary(spec, *data.prepare_tokenizers())
        trainer.fit(task, datamodule=data, ckpt_path=str(checkpoint) if checkpoint else None)
    except (KeyboardInterrupt, SIGTERMException):
        if trainer.is_global_zero:
            rundir.write_json(run_dir / "status.json", {"status": "interrupted", "step": trainer.global_step})
        raise KeyboardInterrupt from None
    except BaseException as e:
        if trainer.is_global_zero:
            rundir.write_json(run_dir / "status.json", {"status": "failed", "error": f"{type(e).__name__}: {e}"})
        raise
    wall = time.perf_counter() - start
    if not trainer.is_global_zero:
        return None
    if trainer.interrupted or trainer.global_step < spec.trainer.max_steps and spec.trainer.max_time is None:
        rundir.write_json(run_dir / "status.json", {"status": "interrupted", "step": trainer.global_step})
        return None
    metrics = evaluate_split(task.model, data, "valid", spec.decode)
    results = {
        "name": spec.name,
        "params": count_params(spec.model),
        "paper": paper_columns(spec),
        "reported": spec.reported.model_dump() if spec.reported else None,
        "split": "valid",
        "bleu": metrics["bleu"],
        "chrf": metrics["chrf"],
        "ppl": metrics["ppl"],
        "sacrebleu_signature": metrics["signature"],
        "steps": trainer.global_step,
        "wall_time_s": round(wall, 1),
        "tokens_per_s": round(task.tokens_seen * trainer.world_size / wall, 1) if wall > 0 else None,
    }
    rundir.write_json(run_dir / "results.json", results)
    rundir.write_json(run_dir / "status.json", {"status": "finished", "step": trainer.global_step})
    if trainer.logger is not None:
        trainer.logger.log_metrics({"hp/bleu": results["bleu"], "hp/ppl": results["ppl"]}, step=trainer.global_step)
        trainer.logger.finalize("success")
    return results


def _check_vocabulary(spec: ExperimentSpec, src: Any, tgt: Any) -> None:
    size = spec.model.embedding.vocab_size
    for side, tokenizer in (("source", src), ("target", tgt)):
        if tokenizer.vocab_size > size:
            raise UserError(
                f"the {side} tokenizer has {tokenizer.vocab_size} tokens but model.embedding.vocab_size "
                f"is {size}; set dims.vocab_size (or model.embedding.vocab_size) to at least {tokenizer.vocab_size}"
            )


def _write_config(spec: ExperimentSpec, run_dir: Path, experiment_path: Path) -> None:
    """config.yaml, and config.diff.yaml: what this run changes in the experiment it extends
    (or, for a root experiment, what the command-line overrides change in it)."""
    resolved = spec.model_dump(mode="json", exclude={"extends"})
    rundir.write_yaml(run_dir / "config.yaml", resolved)
    reference = parent_of(experiment_path) or experiment_path
    try:
        base = load_experiment(reference).model_dump(mode="json", exclude={"extends"})
    except UserError:  # a parent that is not a whole experiment on its own
        base = {}
    with open(run_dir / "config.diff.yaml", "w") as f:
        f.write(f"# what {experiment_path} and its overrides change in {reference}\n")
        yaml.safe_dump(rundir.diff(base, resolved), f, sort_keys=False, default_flow_style=None, width=100)
