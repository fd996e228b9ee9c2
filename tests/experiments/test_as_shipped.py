"""Every shipped experiment runs as shipped, as a user runs it: its corpus written by `aiayn data`
from downloads in their own formats (tests/experiments/corpora.py; the demo's corpus is built in),
then `aiayn validate`, `aiayn train` of a few steps with nothing overridden but `trainer.*`, and a
decode of the run (`translate`, `generate`, or a parser's `evaluate`). The shipped sizes are kept:
the corpora are small, so a step is too. A recipe whose BPE merges fix its vocabulary
(`data.tokenizer.merges`) trains on Multi30k's real training captions (from $AIAYN_DATA's
multi30k/, skipped without them): the merges a small corpus allows make another vocabulary.

Slow tier: fifty-five trainings of a step (about 18 CPU-minutes on one thread of an AMD EPYC)."""

import json
from functools import partial
from pathlib import Path

import pytest

from aiayn.builder.decode.checkpoint import source_model
from aiayn.builder.sweep.plan import load_sweep
from tests.builder.formats.causal_lm import hf_folder
from tests.builder.formats.opus_mt import opus_mt_folder
from tests.conftest import EXPERIMENTS, SHARED_DATA, load_experiment, registry
from tests.experiments.corpora import aiayn, corpus_folder, multi30k, prepare

pytestmark = pytest.mark.slow

SHIPPED = sorted(p.relative_to(EXPERIMENTS).as_posix() for p in EXPERIMENTS.rglob("*.yaml") if not p.name.endswith(".sweep.yaml"))
SWEEPS = sorted(EXPERIMENTS.rglob("*.sweep.yaml"))
STEPS = ["trainer.max_steps=1", "trainer.enable_progress_bar=false"]  # the only overrides
REAL_LINES = {"train": None, "val": 10, "test_2016_flickr": 10}  # the real captions: every training pair, 10 of the others
FROM_DEMO_RUN = {"demo-finetune.yaml", "demo-gqa.yaml"}  # init_from: runs/demo, as the docs say: train the demo first


def real_multi30k(root: Path) -> Path | None:
    """`aiayn data multi30k` of the real captions (Multi30k's train, its first valid and test lines),
    from the repository's layout; None where $AIAYN_DATA has no multi30k/."""
    shared = SHARED_DATA / "multi30k"
    if not (shared / "train.en").is_file():
        return None
    names = {"train": "train", "val": "valid", "test_2016_flickr": "test2016"}
    splits = {}
    for split, keep in REAL_LINES.items():
        en, de = ((shared / f"{names[split]}.{lang}").read_text(encoding="utf-8").splitlines()[:keep] for lang in ("en", "de"))
        splits[split] = (en, de)
    code, out, err = aiayn("data", "multi30k", root / "data" / "multi30k", "--from", multi30k(root / "repo", splits=splits))
    assert code == 0, err
    return root / "data"


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> dict[str, Path | None]:
    root = tmp_path_factory.mktemp("as-shipped")
    return {"small": prepare(root / "small"), "real": real_multi30k(root / "real"), "cache": root / "cache"}


def test_every_sweep_sweeps_shipped_experiments():
    """A sweep's base and its variants' experiments are shipped files, so the test below runs them."""
    for sweep_path in SWEEPS:
        sweep = load_sweep(sweep_path)
        for file in [sweep.base, *(v.experiment for v in sweep.all_variants if v.experiment)]:
            assert (sweep_path.parent / file).resolve().relative_to(EXPERIMENTS).as_posix() in SHIPPED, (sweep_path, file)


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_experiment_trains_and_decodes_as_shipped(name, corpora, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # runs/ and the like, relative to where a user runs aiayn
    monkeypatch.setenv("AIAYN_CACHE", str(corpora["cache"]))
    data = corpora["small"]
    monkeypatch.setenv("AIAYN_DATA", str(data))
    if name == "finetune-opus-mt.yaml":  # the folder and the corpus its comments ask for
        monkeypatch.setenv("OPUS_MT", str(opus_mt_folder(tmp_path / "opus-mt-en-de")))
        monkeypatch.setenv("FINETUNE_DATA", str(corpus_folder(tmp_path / "corpus")))  # train, valid, test .en/.de
    if name == "lm/finetune-hf.yaml":  # the folder its comments ask for: a Llama one (GQA, untied) made by transformers' classes
        monkeypatch.setenv("HF_MODEL", str(hf_folder(tmp_path / "gpt2", "llama-gqa-untied")))
    shipped = load_experiment(EXPERIMENTS / name, model_of=partial(source_model, registry=registry()))  # init_from's model too
    if shipped.data.tokenizer.merges_asked() is not None:
        if corpora["real"] is None:
            pytest.skip(
                f"{name} asks for BPE merges, which need Multi30k's real captions: set AIAYN_DATA to a folder with multi30k/"
            )
        monkeypatch.setenv("AIAYN_DATA", str(corpora["real"]))
    if name in FROM_DEMO_RUN:
        assert aiayn("train", EXPERIMENTS / "demo.yaml", *STEPS)[0] == 0  # runs/demo
    code, out, err = aiayn("validate", EXPERIMENTS / name)
    assert code == 0, err
    code, out, err = aiayn("train", EXPERIMENTS / name, *STEPS)
    assert code == 0, err
    last = out.splitlines()[-1]
    assert last.startswith("finished in ") and last.endswith(f"runs/{shipped.name}/version_0"), last
    run = tmp_path / "runs" / shipped.name / "version_0"
    results = json.loads((run / "results.json").read_text())
    assert results["steps"] == 1 and results["ppl"] >= 1
    if shipped.task == "language_model":
        code, out, err = aiayn("generate", run, "--prompt", "two", "-n", "5", "--seed", "3")
        assert code == 0 and out.startswith("two"), err
    elif shipped.task == "masked_lm":  # nothing to decode: its scores are results.json's
        assert 0 <= results["mlm_accuracy"] <= 1 and results["mlm_tokens"] > 0 and results["bleu"] is None
        code, out, err = aiayn("translate", run, "--input", EXPERIMENTS / "demo.yaml")
        assert code == 2 and "is a masked language model, which aiayn translate does not take: aiayn evaluate" in err, err
    elif "parse_f1" in results:  # the final evaluation decoded the validation trees (beam 21, input + 300 tokens)
        scored = [results[k] for k in ("parse_f1", "parse_f1_repaired") if results[k] is not None]  # None: no valid tree
        assert all(0 <= f1 <= 100 for f1 in scored)
        assert results["bleu"] is None and (
            results["parse_f1"] is not None or results["parse_errors"] + results["parse_skipped"] > 0
        )
    else:
        source = tmp_path / "source.txt"
        source.write_text("two dogs run .\nthe man sees a cat .\n")
        code, out, err = aiayn("translate", run, "--input", source)
        assert code == 0 and len(out.splitlines()) == 2, err
