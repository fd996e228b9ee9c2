"""A search worker's bookkeeping around one trial, with a stand-in for the trial's process: what
a sweep killed at any moment leaves behind (the slow tier kills a real one)."""

import json

from aiayn.builder.sweep import search
from aiayn.builder.sweep.launch import Outcome
from aiayn.builder.sweep.plan import expand, load_sweep
from aiayn.schemas.search import CategoricalParam, SearchSpec
from tests.conftest import EXPERIMENTS


def test_a_trials_checkpoints_are_gone_before_the_study_hears_it_finished(write, tmp_path, monkeypatch):
    """A sweep killed right after the study counts a trial never runs it again, so nothing would
    ever drop the checkpoints it still had."""
    path = write("s.sweep.yaml", f"name: s\nbase: {EXPERIMENTS / 'demo.yaml'}\nvariants: [{{}}]\nseeds: [1]\n")
    variants = expand(load_sweep(path), path)
    spec = SearchSpec(params={"train.lr_schedule.factor": CategoricalParam(choices=(1.0,))}, n_trials=2, sampler="random")
    told = []

    def tell(study, trial, run, outcome, search_spec):
        told.append((trial.number, run.checkpoints.exists()))
        return real_tell(study, trial, run, outcome, search_spec)

    def run(job, env):
        (job.run_dir / "checkpoints").mkdir(parents=True)
        (job.run_dir / "checkpoints" / "last.ckpt").write_bytes(b"")
        (job.run_dir / "results.json").write_text(json.dumps({"bleu": 1.0, "ppl": 2.0}))
        return Outcome(0, 1.0, None)

    real_tell = search._tell
    monkeypatch.setattr(search, "_tell", tell)
    search.Worker(spec, tmp_path, tuple(variants), (), seed=2)(run, report=lambda line: None)
    assert told == [(0, False), (1, False)]
