"""`aiayn data wsj --from TREEBANK`: a treebank made here in the WSJ layout (wsj/SS/wsj_SSNN.mrg,
sections 02-23) becomes the parsing experiment's splits (words, linearised trees, gold trees);
what it cannot use is named; the shipped recipe validates with its exact parameter count; and a
parsing run's `aiayn evaluate` adds bracketing F1 (slow tier: it trains)."""

import json
from pathlib import Path

import pytest

from aiayn.builder.data.trees import read_trees
from aiayn.builder.decode.evalb import tree_scores
from aiayn.builder.model.size import count_params
from tests.builder.cli.test_bad_inputs import cli
from tests.conftest import EXPERIMENTS, load_experiment

TREES = [
    "( (S (NP-SBJ (DT The) (NN dog)) (VP (VBD barked)) (. .)) )",
    "( (S (NP-SBJ (-NONE- *)) (VP (VB Go) (ADVP (RB home))) (. !)) )",
    "( (S (NP-SBJ (PRP He)) (VP (VBD gave) (NP (PRP her)) (NP (DT a) (NN book))) (. .)) )",
]


def treebank(root: Path, sections=range(0, 25)) -> Path:
    for section in sections:
        folder = root / "wsj" / f"{section:02d}"
        folder.mkdir(parents=True)
        (folder / f"wsj_{section:02d}01.mrg").write_text("\n".join(TREES[: 1 + section % 3]) + "\n")
    return root


def test_the_wsj_splits_are_written_as_the_parsing_literature_takes_them(tmp_path):
    out = tmp_path / "wsj"
    code, stdout, err = cli("data", "wsj", out, "--from", treebank(tmp_path / "tb"))
    assert (code, err) == (0, "")
    trees = sum(1 + s % 3 for s in range(2, 22))
    assert stdout.splitlines() == [
        f"wsj: wrote {out} from {tmp_path / 'tb'}",
        f"train: {trees} trees of sections 02-21 (20 files)",
        "valid: 2 trees of section 22 (1 files)",
        "test: 3 trees of section 23 (1 files)",
    ]
    assert (out / "test.en").read_text() == "The dog barked .\nGo home !\nHe gave her a book .\n"
    assert (out / "test.tree").read_text().splitlines()[1] == "(S (VP XX (ADVP XX )ADVP )VP XX )S"  # no trace, no subject
    assert [str(t) for t in read_trees((out / "test.gold").read_text())][1] == "(S (VP (VB Go) (ADVP (RB home))) (. !))"
    assert json.loads((out / "prepared.json").read_text())["splits"]["valid"] == {"sections": ["22"], "files": 1, "trees": 2}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "wsj: give --from, the folder of your copy of the Penn Treebank's WSJ .mrg files (it is licensed: no download)"),
        (["--from", "TB", "--clean"], "--clean is a choice of the parallel corpora, not of wsj (its trees are read as they are)"),
        (["--from", "TB", "--pipeline", "lowercase"], "--pipeline is a choice of the parallel corpora, not of wsj (its trees are read as they are)"),
    ],
)  # fmt: skip
def test_what_wsj_cannot_take_is_named(tmp_path, args, message):
    root = treebank(tmp_path / "tb")
    args = [str(root) if a == "TB" else a for a in args]
    assert cli("data", "wsj", tmp_path / "out", *args) == (2, "", f"aiayn data: error: {message}\n")
    assert not (tmp_path / "out").exists()


def test_a_treebank_without_its_sections_is_named(tmp_path):
    root = treebank(tmp_path / "tb", sections=range(2, 23))
    assert cli("data", "wsj", tmp_path / "out", "--from", root) == (2, "", (
        f"aiayn data: error: --from {root} has no wsj_SSNN.mrg files of section 23; it should hold the Penn Treebank's "
        "WSJ sections 02-23\n"
    ))  # fmt: skip


def test_the_parsing_recipe_is_the_papers():
    """Sec. 6.3 names 4 layers and d_model 1024; the rest is the base model's (d_ff 2048, 8 heads of
    d_model / h); wsj-big.yaml is tensor2tensor's transformer_parsing_big sizes at those 4 layers."""
    spec = load_experiment(EXPERIMENTS / "parsing" / "wsj.yaml")
    assert count_params(spec.model) == 100_384_768  # the paper gives none
    assert (spec.model.encoder.num_layers, spec.model.d_model, spec.model.embedding.vocab_size) == (4, 1024, 16000)
    attention, ffn = spec.model.encoder.layer
    assert (ffn.d_ff, attention.h, attention.d_k, attention.d_v, spec.model.dropout) == (2048, 8, 128, 128, 0.1)
    big = load_experiment(EXPERIMENTS / "parsing" / "wsj-big.yaml")
    attention, ffn = big.model.encoder.layer
    assert (count_params(big.model), ffn.d_ff, attention.h, attention.d_k) == (133_955_584, 4096, 16, 64)
    assert (spec.decode.beam, spec.decode.alpha, spec.decode.max_len_b) == (21, 0.3, 300)
    assert (spec.data.src_lang, spec.data.tgt_lang, spec.data.test) == ("en", "tree", "test")


@pytest.mark.slow
def test_a_parsing_run_is_evaluated_by_bracketing_f1(tmp_path):
    data = tmp_path / "wsj"
    assert cli("data", "wsj", data, "--from", treebank(tmp_path / "tb"))[0] == 0
    tiny = ["dims.N=1", "dims.d_model=32", "dims.d_ff=64", "dims.h=2", "dims.vocab_size=200", "train.tokens_per_step=400",
            "trainer.max_steps=3", "trainer.val_check_interval=null", "trainer.enable_progress_bar=false", "decode.beam=2",
            "decode.max_len_b=20", "trainer.precision=32-true", f"data.dir={data}", "train.max_tokens_per_batch=400"]  # fmt: skip
    code, out, err = cli("train", EXPERIMENTS / "parsing" / "wsj.yaml", *tiny, "--runs", tmp_path / "runs")
    assert code == 0, err
    run = tmp_path / "runs" / "parsing-wsj" / "version_0"
    final, valid = json.loads((run / "results.json").read_text()), (run / "translations" / "valid.hyp").read_text().splitlines()
    assert {k: final[k] for k in final if k.startswith("parse_")} == tree_scores(data / "valid.gold", valid)  # as training ends
    f1 = (
        f"{final['parse_f1']:.2f} (EVALB's)" if final["parse_f1"] is not None else "n/a (no valid sentence: "
    )  # 3 steps: maybe none
    assert "finished in " in out and f": bracketing F1 {f1}" in out and final["bleu"] is None
    code, out, err = cli("evaluate", tmp_path / "runs" / "parsing-wsj", "--json", "--hyps", tmp_path / "hyps.txt")
    assert code == 0, err
    result = json.loads(out)
    hyps = (tmp_path / "hyps.txt").read_text().splitlines()
    assert {k: result[k] for k in result if k.startswith("parse_")} == tree_scores(data / "test.gold", hyps)
    valid = result["n_sentences"] - result["parse_errors"] - result["parse_skipped"]  # None where none is (EVALB's -nan)
    assert (0 <= result["parse_f1"] <= 100 if valid else result["parse_f1"] is None) and result["n_sentences"] == 3


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe(", "cannot read it ('utf-8' codec can't decode byte 0xff in position 0: invalid start byte); is the treebank intact?"),
        (b"", None),
        (b"(S (NP", "tree 1: a bracket (NP) is never closed"),
    ],
)  # fmt: skip
def test_a_damaged_treebank_file_is_named_and_nothing_is_written(tmp_path, content, message):
    root = treebank(tmp_path / "tb")
    bad = root / "wsj" / "22" / "wsj_2201.mrg"
    bad.write_bytes(content)
    expected = f"{bad}: {message}" if message else "valid: the treebank's files of this split hold no trees"
    assert cli("data", "wsj", tmp_path / "out", "--from", root) == (2, "", f"aiayn data: error: {expected}\n")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda gold: gold.write_bytes(b"\xff" + gold.read_bytes()), "the gold trees are not UTF-8 text ('utf-8' codec can't decode byte 0xff in position 0: invalid start byte); write them again with aiayn data wsj"),
        (lambda gold: gold.write_text(gold.read_text()[:-3]), "tree 2: a bracket (.) is never closed"),
        (lambda gold: gold.write_text(gold.read_text().replace("dog", "cat", 1)), "tree 1's words are not line 1 of {source}; write the corpus again with aiayn data wsj"),
        (lambda gold: gold.write_text(gold.read_text().splitlines()[0] + "\n"), "holds 1 tree for the 2 lines of {source}; write the corpus again with aiayn data wsj"),
    ],
)  # fmt: skip
def test_a_parsers_gold_trees_are_checked_before_it_trains(tmp_path, damage, message):
    """A split's gold trees are what its outputs are scored against once training ends: damaged
    ones are named before any training, and no run directory is made."""
    data = tmp_path / "wsj"
    assert cli("data", "wsj", data, "--from", treebank(tmp_path / "tb"))[0] == 0
    gold = data / "valid.gold"
    damage(gold)
    expected = message.format(source=data / "valid.en")
    separator = " " if expected.startswith("holds") else ": "
    small = ["dims.N=1", "dims.d_model=32", "dims.d_ff=64", "dims.h=2", "dims.d_k=16", "dims.d_v=16", "dims.vocab_size=200",
             "trainer.max_steps=1", "decode.max_len_b=5", "trainer.precision=32-true"]  # fmt: skip
    code, out, err = cli("train", EXPERIMENTS / "parsing" / "wsj.yaml", f"data.dir={data}", *small, "--runs", tmp_path / "runs")
    assert (code, err) == (2, f"aiayn train: error: {gold}{separator}{expected}\n")
    assert not (tmp_path / "runs").exists()
