"""The two-level paired bootstrap of `aiayn results`: with one seed sacreBLEU's own test, with
several the seeds resampled too (training's variance widens the interval), against a brute-force
reference; seeds paired; the column it fills and the base row it is measured from. Translations
are corrupted references."""

import csv
import itertools
import json
import re

import pytest
import sacrebleu
from sacrebleu.significance import PairedTest

from aiayn.builder.cli import main
from aiayn.builder.data.demo import generate_demo
from aiayn.builder.data.scoring import Scoring
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


def test_a_tokenized_runs_statistics_count_its_tokens_as_they_are():
    """tokenize none, lowercased: "Hello," is one token and equals "hello,", not "hello ,"."""
    hyps, refs = ["Hello, world .", "a b c d"], ["hello, world .", "a b c e"]
    scoring = Scoring(tokenized=True, lowercase=True)
    expected = sacrebleu.metrics.BLEU(tokenize="none", lowercase=True, force=True).corpus_score(hyps, [refs]).score
    assert corpus_bleu(sentence_stats(hyps, refs, scoring).sum(0)) == pytest.approx(expected, abs=1e-9)
    assert sentence_stats(hyps, refs, scoring)[0, :2].tolist() == [3, 3]  # 3 tokens each side
    assert sentence_stats(hyps, refs)[0, :2].tolist() == [4, 4]  # 13a splits the comma off


@pytest.mark.parametrize("system", [corrupt(4, offset=1), slightly_off()], ids=["clear", "slight"])
def test_one_seed_is_sacrebleus_paired_bootstrap(system):
    base = corrupt(4)
    d = paired_bootstrap([(sentence_stats(base, REFS), sentence_stats(system, REFS))])
    assert d.delta == pytest.approx(bleu(system) - bleu(base), abs=1e-9)
    assert d.p == sacrebleu_p(base, system) and d.pairs == 1
    assert d.low <= d.delta <= d.high


def test_a_slight_difference_is_not_significant_and_a_clear_one_is():
    base = sentence_stats(corpus := corrupt(4), REFS)
    slight = paired_bootstrap([(base, sentence_stats(slightly_off(), REFS))] * 3)
    clear = paired_bootstrap([(base, sentence_stats(corrupt(2), REFS))] * 3)
    assert slight.p > 0.05 and slight.low < 0 < slight.high and not slight.significant
    assert clear.p < 0.01 and clear.high < 0 and clear.significant and clear.agree == 3
    two = paired_bootstrap([(base, sentence_stats(corrupt(2), REFS))] * 2)  # as clear, but two seeds: never starred
    assert two.p < 0.01 and two.high < 0 and two.covers_training and not two.enough_seeds and not two.significant
    same = paired_bootstrap([(base, sentence_stats(corpus, REFS))] * 3)
    assert (same.delta, same.low, same.high) == (0.0, 0.0, 0.0) and not same.significant  # sacreBLEU's p is 1/1001 here


def test_seeds_that_disagree_in_sign_are_not_significant_though_each_is():
    """One seed's variant much better, the other's much worse: the test set alone would call each
    seed's difference certain; resampling the seeds says the sign is not known."""
    base = sentence_stats(corrupt(4), REFS)
    better, worse = sentence_stats(corrupt(9), REFS), sentence_stats(corrupt(2), REFS)
    alone = [paired_bootstrap([(base, v)]) for v in (better, worse)]
    assert alone[0].low > 0 > alone[1].high  # opposite, each with an interval clear of 0
    both = paired_bootstrap([(base, better), (base, worse)])
    assert both.low < 0 < both.high and not both.significant and both.agree == 1 and both.pairs == 2


def test_the_same_difference_on_every_seed_is_significant():
    pairs = [(sentence_stats(corrupt(4, offset=s), REFS), sentence_stats(corrupt(7, offset=s), REFS)) for s in range(3)]
    d = paired_bootstrap(pairs)
    assert d.significant and d.agree == 3 and d.low > 0 and d.covers_training


def test_one_seed_covers_the_test_set_only_and_is_never_significant():
    d = paired_bootstrap([(sentence_stats(corrupt(4), REFS), sentence_stats(corrupt(2), REFS))])
    assert d.p < 0.01 and d.high < 0 and not d.covers_training and not d.significant


def test_the_two_level_p_value_is_the_brute_force_one():
    """Every resample of 2 seeds and 4 sentences, equally likely, enumerated: the exact
    distribution of the difference; the bootstrap's p-value (sacreBLEU's formula) estimates its."""
    refs = REFS[:4]
    hyps = {("b", 0): corrupt(4)[:4], ("v", 0): corrupt(2)[:4], ("b", 1): corrupt(5)[:4], ("v", 1): corrupt(9)[:4]}
    stats = {key: sentence_stats(h, refs) for key, h in hyps.items()}
    pairs = [(stats["b", s], stats["v", s]) for s in (0, 1)]
    per_seed = [corpus_bleu(v.sum(0)) - corpus_bleu(b.sum(0)) for b, v in pairs]
    observed = sum(per_seed) / 2
    outcomes = []
    for seeds in itertools.product(range(2), repeat=2):
        for sentences in itertools.product(range(4), repeat=4):
            rows = list(sentences)
            outcomes.append(sum(corpus_bleu(pairs[s][1][rows].sum(0)) - corpus_bleu(pairs[s][0][rows].sum(0)) for s in seeds) / 2)
    spread = [abs(d) for d in outcomes]
    mean = sum(spread) / len(spread)
    exact = sum(a - mean > abs(observed) for a in spread) / len(spread)
    d = paired_bootstrap(pairs, samples=20000)
    assert d.delta == pytest.approx(observed, abs=1e-9) and d.pairs == 2
    assert d.p == pytest.approx(exact, abs=0.01)


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
        for seed in (1, 2, 3):  # three seeds alike: the interval is the sentences', but the seeds were resampled
            trial = f"{name}-seed{seed}"
            put(
                root,
                trial,
                trial,
                ppl=5.0,
                bleu=round(bleu(hyps), 2),
                group=group,
                variant=name,
                reported={"bleu": paper},
                seed=seed,
            )
            RunDir(root / trial / "version_0").write_translations("valid", hyps, REFS)
    lines = write_results(root).splitlines()
    cells = table_cells(lines)
    assert (cells["base"]["ΔBLEU [95% CI]"], cells["base"]["vs paper"]) == ("", "")
    assert (
        re.fullmatch(r"-\d+\.\d\d \[-\d+\.\d\d, -\d+\.\d\d\] 3/3 \*", cells["worse"]["ΔBLEU [95% CI]"])
        and cells["worse"]["vs paper"] == "agrees"
    )
    assert (
        re.fullmatch(r"\+\d+\.\d\d \[\+\d+\.\d\d, \+\d+\.\d\d\] 3/3 \*", cells["better"]["ΔBLEU [95% CI]"])
        and cells["better"]["vs paper"] == "disagrees"
    )
    assert (cells["close"]["ΔBLEU [95% CI]"], cells["close"]["vs paper"]) == ("+0.67 [-0.08, +1.89] 3/3", "n.s.")
    assert cells["flat"]["vs paper"] == "paper: no change"
    assert "paper PPL" not in cells["base"]  # empty in every row: left out (the CSV keeps it)
    assert lines[-3:] == [
        "ΔBLEU: the row's BLEU minus that of base, the base row, on the same validation sentences (paired by seed, mean over seeds), "
        "with the 95% interval of a two-level paired bootstrap (1000 resamples of the seeds and of the sentences, sacreBLEU's test "
        "on the sentences), so that both training and the test set vary; k/n: the seeds whose own difference has the mean's sign; "
        "* significant: p < 0.05 and the interval excludes 0.",
        "",
        "vs paper: our ΔBLEU goes the paper's way on 1 of the 2 rows where it is significant; 1 not significant, 1 the paper's BLEU unchanged.",
    ]
    with open(root / "results.csv", newline="") as f:
        rows = {r["variant"]: r for r in csv.DictReader(f)}
    worse = Difference(*(float(rows["worse"][k]) for k in ("delta_bleu", "delta_low", "delta_high", "p_value")), pairs=3)
    assert worse.delta == pytest.approx(bleu(corrupt(2)) - bleu(corrupt(4)), abs=1e-4) and worse.p < 0.05
    assert rows["base"]["delta_bleu"] == rows["base"]["p_value"] == rows["base"]["vs_paper"] == rows["base"]["paper_ppl"] == ""
    assert (rows["worse"]["seeds_agree"], rows["worse"]["interval_over"]) == ("3/3", "seeds and sentences")
    assert [rows[v]["vs_paper"] for v in ("worse", "better", "close", "flat")] == [
        "agrees",
        "disagrees",
        "n.s.",
        "paper: no change",
    ]


def table_cells(lines: list[str]) -> dict[str, dict[str, str]]:
    """{variant: {column: cell}} of the markdown table at the top of `lines`."""
    split = lambda line: [c.strip() for c in line.strip().strip("|").split("|")]  # noqa: E731
    head, rows = split(lines[0]), [split(line) for line in lines[2:] if line.startswith("|")]
    return {row[head.index("variant")].removesuffix(" †"): dict(zip(head, row)) for row in rows}


def test_any_variant_can_be_the_base_and_one_seed_is_marked(tmp_path, capsys):
    root = tmp_path / "mine"
    for name, hyps in (("small", corrupt(2)), ("large", corrupt(5))):
        put(root, f"{name}-seed1", f"{name}-seed1", ppl=5.0, bleu=round(bleu(hyps), 2), variant=name)
        RunDir(root / f"{name}-seed1" / "version_0").write_translations("valid", hyps, REFS)
    lines = write_results(root).splitlines()  # no paper's base, no sweep.json: the first row is the base
    cells = table_cells(lines)
    assert list(cells["large"]) == ["variant", "N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "eps_ls", "positional",
                                    "steps", "runs", "PPL", "BLEU", "ΔBLEU [95% CI]", "params ×10⁶"]  # no empty column  # fmt: skip
    assert cells["large"]["ΔBLEU [95% CI]"] == "" and re.fullmatch(
        r"-\d+\.\d\d \[-\d+\.\d\d, -\d+\.\d\d\] ‡", cells["small"]["ΔBLEU [95% CI]"]
    )
    assert lines[-3].startswith("ΔBLEU: the row's BLEU minus that of large, the base row,")
    assert lines[-1] == (
        "‡ fewer than 3 seeds: with one, the interval covers the test set's sampling only, not another training run's; "
        "with two, a resample of the seeds has only three distinct means, too few to bound another run's difference. "
        "Neither is ever marked significant: give the sweep 3 seeds or more."
    )
    assert main(["results", str(root), "--base", "small"]) == 0
    lines = capsys.readouterr().out.splitlines()
    cells = table_cells(lines)
    assert cells["small"]["ΔBLEU [95% CI]"] == "" and re.fullmatch(
        r"\+\d+\.\d\d \[\+\d+\.\d\d, \+\d+\.\d\d\] ‡", cells["large"]["ΔBLEU [95% CI]"]
    )
    assert any(line.startswith("ΔBLEU: the row's BLEU minus that of small, the base row,") for line in lines)
    assert main(["results", str(root), "--base", "medium"]) == 2
    assert (
        capsys.readouterr().err
        == "aiayn results: error: --base medium: no finished runs of that variant; the variants are large, small\n"
    )


def test_a_sweep_of_ones_own_is_measured_from_its_base_experiment(tmp_path):
    root = tmp_path / "heads"
    outputs = {"demo-h2": corrupt(3), "demo-h4": corrupt(4), "demo-h8": corrupt(6)}
    trials = []
    for variant, hyps in outputs.items():
        own = [] if variant == "demo-h4" else [f"dims.h={variant[-1]}"]
        for seed in (1, 2):
            trial = f"{variant}-seed{seed}"
            put(root, trial, trial, ppl=5.0, bleu=round(bleu(hyps), 2), variant=variant, seed=seed)
            RunDir(root / trial / "version_0").write_translations("valid", hyps, REFS)
            trials.append(
                {
                    "variant": variant,
                    "experiment": "/x/demo.yaml",
                    "overrides": ["reported=null", *own, f"train.seed={seed}", f"name={trial}"],
                }
            )
    (root / "sweep.json").write_text(json.dumps({"name": "heads", "trials": trials}))
    lines = write_results(root).splitlines()
    cells = table_cells(lines)
    assert [v for v in cells] == ["demo-h2", "demo-h4", "demo-h8"] and cells["demo-h4"]["ΔBLEU [95% CI]"] == ""
    assert cells["demo-h8"]["ΔBLEU [95% CI]"].endswith(" 2/2 ‡")  # clear, but two seeds: never a star
    assert any(line.startswith("ΔBLEU: the row's BLEU minus that of demo-h4, the base row,") for line in lines)
