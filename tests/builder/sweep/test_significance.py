"""The paired bootstrap of `aiayn results`: sacreBLEU's own test and statistics, the difference's
interval, seeds paired, and the column it fills. Translations are corrupted references."""

import csv
import re

import pytest
import sacrebleu
from sacrebleu.significance import PairedTest

from aiayn.builder.cli import main
from aiayn.builder.data.demo import generate_demo
from aiayn.builder.run.rundir import RunDir
from aiayn.builder.sweep.results import write_results
from aiayn.builder.sweep.significance import Difference, compare_to_base, corpus_bleu, paired_bootstrap, sentence_stats
from tests.builder.sweep.test_sweep_results import put

REFS = list(generate_demo(10, 200, 5, seed=0)["valid"][1])


def corrupt(every: int, offset: int = 0) -> list[str]:
    """The references with every `every`-th word dropped."""
    return [" ".join(w for j, w in enumerate(ref.split()) if (i + j + offset) % every) for i, ref in enumerate(REFS)]


def slightly_off() -> list[str]:
    """corrupt(4) with its first 4 sentences corrupted more or less."""
    return [corrupt(3)[i] if i % 2 else corrupt(5)[i] for i in range(4)] + corrupt(4)[4:]


def bleu(hyps: list[str]) -> float:
    return sacrebleu.corpus_bleu(hyps, [REFS]).score


def sacrebleu_p(base: list[str], system: list[str]) -> float:
    test = PairedTest(
        [("base", base), ("system", system)], {"BLEU": sacrebleu.metrics.BLEU()}, [REFS], test_type="bs", n_samples=1000
    )
    return test()[1]["BLEU"][1].p_value


def test_sentence_statistics_sum_to_sacrebleus_corpus_bleu():
    hyps = corrupt(4)
    assert corpus_bleu(sentence_stats(hyps, REFS).sum(0)) == pytest.approx(bleu(hyps), abs=1e-9)


@pytest.mark.parametrize("system", [corrupt(4, offset=1), slightly_off()], ids=["clear", "slight"])
def test_one_seed_is_sacrebleus_paired_bootstrap(system):
    base = corrupt(4)
    d = paired_bootstrap([(sentence_stats(base, REFS), sentence_stats(system, REFS))])
    assert d.delta == pytest.approx(bleu(system) - bleu(base), abs=1e-9)
    assert d.p == sacrebleu_p(base, system) and d.pairs == 1
    assert d.low <= d.delta <= d.high


def test_a_slight_difference_is_not_significant_and_a_clear_one_is():
    base = sentence_stats(corpus := corrupt(4), REFS)
    slight = paired_bootstrap([(base, sentence_stats(slightly_off(), REFS))])
    clear = paired_bootstrap([(base, sentence_stats(corrupt(2), REFS))])
    assert slight.p > 0.05 and slight.low < 0 < slight.high and not slight.significant
    assert clear.p < 0.01 and clear.high < 0 and clear.significant
    same = paired_bootstrap([(base, sentence_stats(corpus, REFS))])
    assert (same.delta, same.low, same.high) == (0.0, 0.0, 0.0) and not same.significant  # sacreBLEU's p is 1/1001 here


def test_seeds_are_paired_and_the_difference_is_their_mean(tmp_path):
    outputs = {
        ("base", 1): corrupt(4),
        ("base", 2): corrupt(5),
        ("v", 1): corrupt(3),
        ("v", 2): corrupt(4, offset=2),
        ("v", 3): corrupt(2),
    }
    trials: dict[str, list] = {}
    for (variant, seed), hyps in outputs.items():
        RunDir(run := tmp_path / f"{variant}-{seed}").write_translations("valid", hyps, REFS)
        trials.setdefault(variant, []).append((seed, run))
    d = compare_to_base(trials, "base")["v"]  # seed 3 has no base run: left out
    expected = ((bleu(outputs["v", 1]) - bleu(outputs["base", 1])) + (bleu(outputs["v", 2]) - bleu(outputs["base", 2]))) / 2
    assert d.pairs == 2 and d.delta == pytest.approx(expected, abs=1e-9) and d.low <= d.delta <= d.high


def test_runs_without_comparable_translations_get_no_difference(tmp_path):
    RunDir(tmp_path / "base").write_translations("valid", corrupt(4), REFS)
    RunDir(tmp_path / "other-refs").write_translations("valid", corrupt(4), corrupt(9))
    RunDir(tmp_path / "other-seed").write_translations("valid", corrupt(4), REFS)
    (tmp_path / "older").mkdir()  # a run from before translations were saved
    trials = {
        "base": [(1, tmp_path / "base")],
        "a": [(1, tmp_path / "other-refs")],
        "b": [(2, tmp_path / "other-seed")],
        "c": [(1, tmp_path / "older")],
    }
    assert compare_to_base(trials, "base") == {}


def test_translations_round_trip_line_by_line(tmp_path):
    run = RunDir(tmp_path)
    run.write_translations("valid", ["a b", "", "c\nd", "e\r"], ["x", "y", "z", "w"])
    assert run.translations_of("valid") == (["a b", "", "c d", "e "], ["x", "y", "z", "w"])
    assert run.translations_of("test") is None


def test_results_table_shows_the_difference_to_base_and_the_papers_direction(tmp_path):
    root = tmp_path / "sweep"
    trials = (  # (name, group, translations, the paper's BLEU)
        ("base", "base", corrupt(4), 25.8),
        ("worse", "A", corrupt(2), 24.9),  # lower in the paper too
        ("better", "A", corrupt(5), 24.9),  # lower in the paper
        ("close", "B", slightly_off(), 25.5),
        ("flat", "C", corrupt(3), 25.8),
    )
    for name, group, hyps, paper in trials:
        trial = f"{name}-seed1"
        put(root, trial, trial, ppl=5.0, bleu=round(bleu(hyps), 2), group=group, variant=name, reported={"bleu": paper})
        RunDir(root / trial / "version_0").write_translations("valid", hyps, REFS)
    lines = write_results(root).splitlines()
    cells = {line.split(" | ")[1]: (line.split(" | ")[15], line.split(" | ")[-1].removesuffix(" |")) for line in lines[2:7]}
    assert cells["base"] == ("", "")
    assert re.fullmatch(r"-\d+\.\d\d \[-\d+\.\d\d, -\d+\.\d\d\] \*", cells["worse"][0]) and cells["worse"][1] == "agrees"
    assert re.fullmatch(r"\+\d+\.\d\d \[\+\d+\.\d\d, \+\d+\.\d\d\] \*", cells["better"][0]) and cells["better"][1] == "disagrees"
    assert cells["close"] == ("+0.67 [-0.08, +1.89]", "n.s.")  # p = 0.118
    assert cells["flat"][1] == "paper: no change"
    assert lines[-3:] == [
        "ΔBLEU: the row's BLEU minus that of base on the same validation sentences (paired by seed, mean over seeds), "
        "with the 95% interval of a paired bootstrap (1000 resamples, sacreBLEU's test); * significant: p < 0.05 and the interval excludes 0.",
        "",
        "vs paper: our ΔBLEU goes the paper's way on 1 of the 2 rows where it is significant; 1 not significant, 1 the paper's BLEU unchanged.",
    ]
    with open(root / "results.csv", newline="") as f:
        rows = {r["variant"]: r for r in csv.DictReader(f)}
    worse = Difference(*(float(rows["worse"][k]) for k in ("delta_bleu", "delta_low", "delta_high", "p_value")), pairs=1)
    assert worse.delta == pytest.approx(bleu(corrupt(2)) - bleu(corrupt(4)), abs=1e-4) and worse.p < 0.05
    assert rows["base"]["delta_bleu"] == rows["base"]["p_value"] == rows["base"]["vs_paper"] == ""
    assert [rows[v]["vs_paper"] for v in ("worse", "better", "close", "flat")] == [
        "agrees",
        "disagrees",
        "n.s.",
        "paper: no change",
    ]


def test_any_variant_can_be_the_base(tmp_path, capsys):
    root = tmp_path / "mine"
    for name, hyps in (("small", corrupt(2)), ("large", corrupt(5))):
        put(root, f"{name}-seed1", f"{name}-seed1", ppl=5.0, bleu=round(bleu(hyps), 2), variant=name)
        RunDir(root / f"{name}-seed1" / "version_0").write_translations("valid", hyps, REFS)
    assert "ΔBLEU: the row's" not in write_results(root)  # no row of the paper's base: no ΔBLEU
    assert main(["results", str(root), "--base", "small"]) == 0
    lines = capsys.readouterr().out.splitlines()
    cells = {line.split(" | ")[1]: line.split(" | ")[15] for line in lines[2:4]}
    assert cells["small"] == "" and re.fullmatch(r"\+\d+\.\d\d \[\+\d+\.\d\d, \+\d+\.\d\d\] \*", cells["large"])
    assert lines[5].startswith("ΔBLEU: the row's BLEU minus that of small on the same validation sentences")
    assert main(["results", str(root), "--base", "medium"]) == 2
    assert (
        capsys.readouterr().err
        == "aiayn results: error: --base medium: no finished runs of that variant; the variants are large, small\n"
    )
