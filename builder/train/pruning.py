"""The trial process's side of a sweep's search (builder/sweep/search.py): at every validation,
report the metric to the trial's Optuna study and stop, with a checkpoint, when its pruner says
the trial is worse than the others were at the same step. Enabled by AIAYN_SEARCH, which the
sweep sets for its search trials only."""

import json
import os
from typing import Any

import lightning as L

from aiayn.builder.run.study import ENV
from aiayn.builder.train.board import BLEU, PPL


class Pruning(L.Callback):
    def __init__(self, setting: dict[str, Any]) -> None:
        self.setting = setting
        self.trial: Any = None  # the Optuna trial, once asked
        self.pruned_at: int | None = None

    @classmethod
    def from_env(cls) -> "Pruning | None":
        value = os.environ.get(ENV)
        return cls(json.loads(value)) if value else None

    def _trial(self) -> Any:
        if self.trial is None:
            import optuna

            from aiayn.builder.run.study import make_pruner, storage
            from aiayn.schemas.search import PrunerSpec

            s = self.setting
            optuna.logging.set_verbosity(optuna.logging.WARNING)
            store = storage(s["journal"])
            study = optuna.load_study(
                study_name=s["study"], storage=store, pruner=make_pruner(PrunerSpec.model_validate(s["pruner"]))
            )
            trial_id = store.get_trial_id_from_study_id_trial_number(store.get_study_id_from_name(s["study"]), s["trial"])
            self.trial = optuna.trial.Trial(study, trial_id)
        return self.trial

    def on_validation_end(self, trainer: L.Trainer, task: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        prune = False
        if trainer.is_global_zero:
            metrics = trainer.callback_metrics
            tag = PPL if self.setting["metric"] == "ppl" else next((k for k in metrics if k.startswith(BLEU)), None)
            if tag is not None and tag in metrics:
                trial = self._trial()
                trial.report(float(metrics[tag]), step=trainer.global_step)
                prune = trial.should_prune()
        if trainer.strategy.broadcast(prune):
            self.pruned_at = trainer.global_step
            trainer.should_stop = True
