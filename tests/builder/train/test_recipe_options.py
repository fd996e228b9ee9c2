"""The Multi30k literature's recipe options end to end on the demo: checkpoints at epoch ends,
validation once an epoch, early stopping on the validation loss, a text pipeline with BPE by
merges, and a tokenized run scored, translated and evaluated as its literature does."""

import io
import json
import re
import sys
from contextlib import redirect_stderr

import pytest
import sacrebleu
import torch

from aiayn.builder.cli import main
from aiayn.builder.data.demo import generate_demo
from aiayn.builder.data.text import TextPipeline
from aiayn.schemas.text import LowercaseStep, MosesTokenizeStep, NormalizePunctuationStep
from tests.builder.train.test_training import DEMO, tiny
from tests.conftest import registry

EPOCH_3 = "data.n_train=100"  # 3 batches an epoch at 800 tokens a step
BY_EPOCH = ["trainer.val_check_interval=null", "trainer.check_val_every_n_epoch=1", "train.validation.bleu=false"]


def steps_in(run) -> dict[str, int]:
    return {p.name: torch.load(p, weights_only=True).get("global_step") for p in sorted((run / "checkpoints").glob("step*.ckpt"))}


def test_checkpoints_at_every_epochs_end_and_the_final_step(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = tiny(tmp_path, EPOCH_3, "trainer.max_steps=10", "trainer.val_check_interval=null", "train.checkpoint.every_n_train_steps=null", "train.checkpoint.every_n_epochs=2",
                "train.checkpoint.keep_last=10")  # fmt: skip
    assert main(["train", DEMO, *args]) == 0
    assert steps_in(tmp_path / "runs" / "demo" / "version_0") == {"step00000006.ckpt": 6, "step00000010.ckpt": 10}


def test_early_stopping_ends_a_finished_run_and_says_where(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    # no validation loss improves by 100: the first sets the best, the next is patience 1 spent
    args = tiny(tmp_path, EPOCH_3, "trainer.max_steps=30", *BY_EPOCH, "train.checkpoint.every_n_train_steps=null", "train.checkpoint.every_n_epochs=1",
                "train.checkpoint.keep_last=10", "train.early_stopping={patience: 1, min_delta: 100.0}")  # fmt: skip
    assert main(["train", DEMO, *args]) == 0
    run = tmp_path / "runs" / "demo" / "version_0"
    results = json.loads((run / "results.json").read_text())
    assert results["steps"] == 6 and json.loads((run / "status.json").read_text())["status"] == "finished"
    stopped = results["stopped_early"]
    assert {k: stopped[k] for k in ("step", "monitor", "patience")} == {"step": 6, "monitor": "loss/valid", "patience": 1}
    assert steps_in(run) == {"step00000003.ckpt": 3, "step00000006.ckpt": 6}
    state = torch.load(run / "checkpoints" / "step00000003.ckpt", weights_only=False)
    best = next(v for k, v in state["callbacks"].items() if k.startswith("EarlyStopping"))["best_score"]
    assert stopped["best"] == round(float(best), 4)  # the first epoch's validation loss


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["train.early_stopping={patience: 10}", "trainer.val_check_interval=null"],
            "train.early_stopping: patience 10 counts validations, but training never validates (trainer.val_check_interval "
            "and trainer.check_val_every_n_epoch are null); set trainer.check_val_every_n_epoch=1 (fairseq validates once "
            "an epoch) or a trainer.val_check_interval (set on the command line: train.early_stopping={patience: 10})",
        ),
        (
            ["trainer.check_val_every_n_epoch=1"],
            "trainer.check_val_every_n_epoch: validates every 1 epochs, and val_check_interval every 200 steps; set "
            "trainer.val_check_interval=null to validate by epochs (set on the command line: trainer.check_val_every_n_epoch=1)",
        ),
        (
            ["train.checkpoint.every_n_epochs=1", "train.checkpoint.every_n_train_steps=5"],
            "train.checkpoint.every_n_epochs: set one of every_n_train_steps, every_n_minutes and every_n_epochs, not "
            "every_n_train_steps (5) and every_n_epochs (1); set the others to null (set on the command line: "
            "train.checkpoint.every_n_epochs=1)",
        ),
        (
            ["train.early_stopping={monitor: BLEU/valid}"],
            "train.early_stopping.monitor: input should be 'loss/valid' or 'PPL/valid', got 'BLEU/valid'",
        ),
    ],
    ids=["patience_without_validation", "steps_and_epochs", "two_checkpoint_triggers", "monitor"],
)
def test_recipe_options_refused_with_the_fix(overrides, message, capsys):
    assert main(["validate", DEMO, *overrides]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].strip() == message


MOSES = ["data.pipeline=[lowercase,normalize_punctuation,moses_tokenize]", "data.tokenizer.merges=60"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A demo run on lowercased, Moses-tokenized text with a BPE of 60 merges; the first try, with
    a vocabulary other than the merges give, says the size and leaves nothing behind."""
    tmp = tmp_path_factory.mktemp("tokenized")
    args = tiny(tmp, *MOSES, "trainer.max_steps=6", "trainer.val_check_interval=null", "--runs", str(tmp / "runs"))
    run, err = tmp / "runs" / "demo" / "version_0", io.StringIO()
    with redirect_stderr(err):
        assert main(["train", DEMO, *args]) == 2
    assert not run.exists()
    message = err.getvalue().strip().splitlines()[-1]
    size = int(re.search(r"to (\d+)$", message).group(1))
    assert message == (
        f"aiayn train: error: data.tokenizer.merges (60) gave the source a dictionary of {size} (60 merges, {size - 4} types "
        f"+ 4 specials) but the model's vocabulary has 300; set dims.vocab_size (or model.embedding.vocab_size) to {size}"
    )
    assert main(["train", DEMO, *args, f"dims.vocab_size={size}"]) == 0
    return run, size


def test_a_tokenized_run_is_scored_on_its_tokenized_lowercased_text(trained):
    run, size = trained
    results = json.loads((run / "results.json").read_text())
    assert results["sacrebleu_signature"].startswith("nrefs:1|case:lc|eff:no|tok:none|smooth:exp|")
    tokenizer = json.loads((run / "tokenizer.json").read_text())
    assert len(tokenizer["model"]["merges"]) == 60 and len(tokenizer["model"]["vocab"]) == size
    _, refs = generate_demo(400, 12, 12, 1234)["valid"]
    moses = TextPipeline([LowercaseStep(), NormalizePunctuationStep(), MosesTokenizeStep()], "de", registry())
    expected = [moses(r) for r in refs]
    assert (run / "translations" / "valid.ref").read_text().splitlines() == expected
    hyps = (run / "translations" / "valid.hyp").read_text().splitlines()
    bleu = sacrebleu.metrics.BLEU(tokenize="none", lowercase=True, force=True).corpus_score(hyps, [expected]).score
    assert results["bleu"] == round(bleu, 2)
    assert "  - {type: moses_tokenize, escape: true, aggressive_dash_splits: false}\n" in (run / "config.yaml").read_text()


def test_translate_applies_the_runs_pipeline_and_detokenizes_on_request(trained, tmp_path, capsys, monkeypatch):
    run, _ = trained
    sources, _ = generate_demo(400, 12, 12, 1234)["test"]
    lower = tmp_path / "lower.en"
    lower.write_text("".join(s.lower() + "\n" for s in sources[:4]))
    shouting = tmp_path / "upper.en"
    shouting.write_text("".join(s.upper() + "\n" for s in sources[:4]))
    outputs = []
    for path, extra in ((lower, []), (shouting, []), (lower, ["--detokenize"])):
        assert main(["translate", str(run), "--input", str(path), *extra]) == 0
        outputs.append(capsys.readouterr().out.splitlines())
    assert outputs[0] == outputs[1]  # the input is lowercased by the run's pipeline
    detok = TextPipeline([MosesTokenizeStep()], "de", registry()).detokenize
    assert outputs[2] == [detok(line) for line in outputs[0]]


def test_evaluate_scores_the_tokenized_text_and_the_detokenized_beside_it(trained, tmp_path, capsys):
    run, _ = trained
    assert main(["evaluate", str(run), "--split", "valid", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    results = json.loads((run / "results.json").read_text())
    assert (report["bleu"], report["signature"]) == (results["bleu"], results["sacrebleu_signature"])
    hyps = (run / "translations" / "valid.hyp").read_text().splitlines()
    _, raw_refs = generate_demo(400, 12, 12, 1234)["valid"]
    detok = TextPipeline([MosesTokenizeStep()], "de", registry()).detokenize
    expected = sacrebleu.metrics.BLEU().corpus_score([detok(h) for h in hyps], [raw_refs])
    assert report["detok_bleu"] == round(expected.score, 2)
    assert report["detok_bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|")
    # the run's tokenized reference as --ref: refused through the pipeline, read as it is with --no-pipeline
    src, ref = tmp_path / "v.en", tmp_path / "v.de"
    src.write_text(" ".join(["a"]) + "\n")
    ref.write_text("ein mann &apos;s hut\n")
    assert main(["evaluate", str(run), "--src", str(src), "--ref", str(ref)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"aiayn evaluate: error: {ref} looks tokenized already (line 1 holds '&apos;', which Moses' tokenizer writes), "
        "and moses_tokenize would tokenize it again; give --no-pipeline to score it as it is"
    )
    assert main(["evaluate", str(run), "--src", str(src), "--ref", str(ref), "--no-pipeline", "--json"]) == 0
    assert "detok_bleu" not in json.loads(capsys.readouterr().out)


def test_detokenize_refused_for_an_untokenized_run(tmp_path, capsys, monkeypatch):
    from tests.builder.decode.test_checkpoint import make_run

    run = make_run(tmp_path, seed=1)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a b\n"), encoding="utf-8"))
    assert main(["translate", str(run), "--detokenize"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"aiayn translate: error: --detokenize: {run} was trained on untokenized text (data.pipeline has no "
        "moses_tokenize); drop --detokenize"
    )


def test_score_puts_both_sides_through_the_runs_pipeline(trained):
    """Raw text scores as its lowercased, tokenized form does: what `aiayn score` is given is what
    `aiayn translate` is given, raw text."""
    import aiayn

    run, _ = trained
    translator = aiayn.load_run(run, device="cpu")
    sources, refs = generate_demo(400, 12, 12, 1234)["test"]
    raw = translator.score(sources[:4], [r.upper() for r in refs[:4]])
    moses_de = TextPipeline([LowercaseStep(), NormalizePunctuationStep(), MosesTokenizeStep()], "de", registry())
    ids = [translator.tgt_tokenizer.encode(moses_de(r)) for r in refs[:4]]
    assert [s.ids for s in raw] == ids  # the target lowercased and tokenized
    assert [s.score for s in raw] == [s.score for s in translator.score([x.upper() for x in sources[:4]], refs[:4])]
