"""The encoder-only graph's reading: BERT's masking (15% of the sentence tokens predicted, of them
80% <mask>, 10% a random token, 10% kept) in its proportions, never on <s> or </s>, at least one a
sentence, the labels exactly at the predicted positions; a batch masked alike wherever it is drawn,
a sentence anew in another batch; and the demo trains through it to a masked-LM accuracy."""

import json
import math

import numpy as np
import pytest
import torch

from aiayn import load_run
from aiayn.builder.cli import main
from aiayn.builder.data.dataset import Example
from aiayn.builder.errors import UserError
from aiayn.builder.graphs.masked_text import Masking, MaskingCollator
from aiayn.builder.model.size import count_params
from aiayn.builder.run.rundir import final_scores
from tests.conftest import EXPERIMENTS, load_experiment

MASK, FIRST, V = 4, 5, 1000


def examples(n: int, length: int, seed: int = 0, start: int = 0) -> list[Example]:
    rng = np.random.default_rng(seed)
    return [Example(start + i, np.zeros(0, np.int32), rng.integers(FIRST, V, size=length).astype(np.int32)) for i in range(n)]


def collator(seed: int = 7, **masking) -> MaskingCollator:
    return MaskingCollator(Masking(seed=seed, **masking), mask_id=MASK, vocab_size=V, first_token=FIRST)


def within(count: int, n: int, p: float) -> bool:
    """count is within 5 standard deviations of a binomial(n, p)'s mean."""
    return abs(count - n * p) <= 5 * math.sqrt(n * p * (1 - p))


def test_bert_masking_in_its_proportions_never_on_the_specials():
    given = examples(200, 50)
    batch = collator()(given)
    original = torch.tensor(np.stack([np.concatenate([[1], e.tgt, [2]]) for e in given]), dtype=torch.long)
    predicted = batch.tgt_out.ne(0)
    assert not predicted[:, 0].any() and not predicted[:, -1].any()  # <s> and </s>
    assert torch.equal(batch.tgt_out[predicted], original[predicted])
    assert torch.equal(batch.src[~predicted], original[~predicted])  # the rest as they are
    n, chosen = 200 * 50, int(predicted.sum())
    assert within(chosen, n, 0.15), chosen
    read = batch.src[predicted]
    masked, kept = int(read.eq(MASK).sum()), int(read.eq(original[predicted]).sum())
    other = chosen - masked - kept  # a random token other than the original
    assert within(masked, chosen, 0.8) and within(other, chosen, 0.1 * (1 - 1 / (V - FIRST))) and within(kept, chosen, 0.1)
    assert read[read.ne(MASK)].min() >= FIRST  # a random token is never a special
    assert batch.n_tgt_tokens == chosen and torch.equal(batch.tgt_rows, predicted.flatten().nonzero().flatten())
    assert batch.n_src_tokens == 200 * 52 and batch.tgt_in is batch.src


def test_every_sentence_has_a_token_to_predict_and_the_settings_are_read():
    batch = collator(probability=0.01)(examples(50, 1))
    assert batch.tgt_out.ne(0).sum(1).tolist() == [1] * 50
    everything = collator(probability=0.99, replace=1.0, random=0.0)(examples(20, 30))
    inner = everything.src[:, 1:-1]
    assert within(int(inner.eq(MASK).sum()), 600, 0.99) and int(inner.ne(MASK).sum()) == int(
        everything.tgt_out[:, 1:-1].eq(0).sum()
    )


def test_a_batch_is_masked_alike_wherever_it_is_drawn_a_sentence_anew_in_another():
    given = examples(8, 20)
    first, again = collator()(given), collator()(list(given))
    assert torch.equal(first.src, again.src) and torch.equal(first.tgt_out, again.tgt_out)
    beside_others = collator()(given[:4] + examples(4, 20, seed=3, start=100))
    assert not torch.equal(first.src[:4], beside_others.src[:4])
    assert not torch.equal(first.src, collator(seed=8)(given).src)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlm")
    overrides = ["dims.N=1", "dims.d_model=32", "dims.d_ff=64", "dims.h=2", "dims.d_k=16", "dims.d_v=16",
                 "data.n_train=600", "data.n_valid=40", "data.n_test=40", "dims.vocab_size=200",
                 "trainer.max_steps=20", "trainer.val_check_interval=10", "train.tokens_per_step=1000"]  # fmt: skip
    assert main(["train", str(EXPERIMENTS / "encoder" / "demo.yaml"), *overrides, "--runs", str(root)]) == 0
    return root / "mlm-demo" / "version_0", overrides


def test_the_demo_trains_through_it_to_a_masked_lm_accuracy(trained):
    run, overrides = trained
    results = json.loads((run / "results.json").read_text())
    assert results["n_sentences"] == 40 and results["mlm_tokens"] > 0 and 0 < results["mlm_accuracy"] < 1
    assert math.isfinite(results["ppl"]) and results["paper"]["graph"] == "encoder-only"
    assert "<mask>" in [t["content"] for t in json.loads((run / "tokenizer.json").read_text())["added_tokens"]]
    assert load_run(run).tokenizer.describe().endswith(" types + 5 specials")  # aiayn's four and <mask>
    spec = load_experiment(EXPERIMENTS / "encoder" / "demo.yaml", overrides)
    assert results["params"] == count_params(spec.model)
    said = f"PPL {results['ppl']:.2f}, {100 * results['mlm_accuracy']:.1f}% of the masked tokens right"
    assert final_scores(results) == said  # what aiayn train's last line says it reached


def test_a_resumed_masked_lm_run_equals_an_uninterrupted_one(tmp_path, trained):
    """Its masks are its batches': a run stopped at step 4 and resumed to 7 trains as one run of 7."""
    from tests.builder.train.test_training import checkpoint_params

    _, overrides = trained
    common = [str(EXPERIMENTS / "encoder" / "demo.yaml"), *overrides, "trainer.val_check_interval=null",
              "train.checkpoint.every_n_train_steps=4"]  # fmt: skip
    assert main(["train", *common, "trainer.max_steps=7", "--runs", str(tmp_path / "straight")]) == 0
    assert main(["train", *common, "trainer.max_steps=4", "--runs", str(tmp_path / "split")]) == 0
    assert main(["train", *common, "trainer.max_steps=7", "--runs", str(tmp_path / "split"), "--resume"]) == 0
    straight = checkpoint_params(tmp_path / "straight" / "mlm-demo" / "version_0" / "checkpoints" / "last.ckpt")
    resumed = checkpoint_params(tmp_path / "split" / "mlm-demo" / "version_0" / "checkpoints" / "last.ckpt")
    assert straight.keys() == resumed.keys()
    for name in straight:
        torch.testing.assert_close(resumed[name], straight[name], rtol=0, atol=0, msg=name)


def test_its_scores_recompute_from_the_run_and_its_masks_are_filled_by_the_model(trained, capsys):
    run, _ = trained
    results = json.loads((run / "results.json").read_text())
    lm = load_run(run)
    valid = (run / "data" / "valid.en").read_text().splitlines()
    again = lm.scores(valid)
    assert (again["ppl"], again["mlm_accuracy"], again["mlm_tokens"]) == (
        results["ppl"],
        results["mlm_accuracy"],
        results["mlm_tokens"],
    )
    assert main(["evaluate", str(run), "--split", "valid", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["ppl"], report["mlm_accuracy"], report["n_sentences"]) == (results["ppl"], results["mlm_accuracy"], 40)
    (filled,) = lm.fill_mask(["<mask> bought three <mask> ."], top_k=4)
    ids = [1, lm.mask_id, *lm.tokenizer.encode("bought three"), lm.mask_id, *lm.tokenizer.encode("."), 2]
    with torch.no_grad():
        logits = lm.model(torch.tensor([ids]))[0].float()
    logits[:, [0, lm.mask_id]] = -math.inf
    for position, candidates in zip((1, ids.index(lm.mask_id, 2)), filled):
        top = logits[position].softmax(-1).topk(4)
        assert [c.token for c in candidates] == [lm.tokenizer.id_to_token(int(i)) for i in top.indices]
        assert [c.probability for c in candidates] == pytest.approx(top.values.tolist(), abs=1e-6)
    for call, message in [
        (lambda: lm.fill_mask(["no mask here"]), "line 1 has no <mask>: write <mask> where a token is to be filled in"),
        (lambda: lm.fill_mask(["a <mask>"], top_k=0), "top_k: expected a whole number >= 1, got int 0"),
    ]:
        with pytest.raises(UserError) as e:
            call()
        assert str(e.value) == message
    for verb in (["translate", str(run), "--input", str(run / "data" / "valid.en")], ["generate", str(run), "-p", "a"],
                 ["serve", str(run), "--port", "0"]):  # fmt: skip
        assert main(verb) == 2
        assert capsys.readouterr().err.endswith(
            f"is a masked language model, which aiayn {verb[0]} does not take: aiayn evaluate scores it, and in Python "
            "aiayn.load_run(run).fill_mask(lines) fills in its <mask>s\n"
        )
