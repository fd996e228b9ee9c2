"""Parsing's trees and score: Penn Treebank brackets read, linearised as Vinyals et al. 2015 do and
read back (ill-formed outputs included, never a crash), and bracketing precision, recall and F1
equal to EVALB's with COLLINS.prm. The expected numbers are what EVALB itself (evalb.c, compiled,
with COLLINS.prm) printed for these trees; on 2,000 random tree pairs it and this code agreed on
every sentence's matched, gold and test brackets and status."""

import random

import pytest

from aiayn.builder.data.trees import Tree, delinearize, linearize, read_output, read_trees, strip
from aiayn.builder.decode.evalb import COLLINS, EvalbParameters, brackets, evalb, tree_scores
from aiayn.builder.errors import UserError

GOLD = """
(TOP (S (NP-SBJ (DT The) (NN dog)) (VP (VBD barked) (ADVP (RB away))) (. .)))
(TOP (S (NP-SBJ-1 (NNS Prices)) (VP (VBD rose) (S (NP (-NONE- *-1)) (VP (TO to) (VP (VB climb))))) (. .)))
(TOP (S (NP (NP (NN x))) (VP (VBZ is) (ADJP (JJ big)))))
(TOP (S (NP (DT A) (NN cat)) (VP (VBD sat))))
(TOP (S (`` ``) (NP (PRP He)) (VP (VBD left)) (, ,) ('' '') (. .)))
"""
TEST = """
(TOP (S (NP (DT The) (NN dog)) (VP (VBD barked) (PRT (RP away))) (. .)))
(TOP (S (NP (NNS Prices)) (VP (VBD rose) (VP (TO to) (VP (VB climb)))) (. .)))
(TOP (S (NP (NN x)) (VP (VBZ is) (ADJP (ADJP (JJ big))))))
(TOP (S (NP (DT A) (NN cat))))
(TOP (S (NP (PRP He) (VBD left)) (. .)))
"""


def test_bracket_counts_and_totals_equal_evalbs_with_collins_prm():
    score = evalb(read_trees(GOLD), read_trees(TEST))
    # EVALB: matched, gold, test brackets a sentence; sentence 4 "Length unmatch (3|2)"
    assert [(s.matched, s.gold, s.test) for s in score.sentences] == [(4, 4, 4), (5, 6, 5), (4, 5, 5), (0, 0, 0), (1, 3, 2)]
    assert [s.error for s in score.sentences] == [None, None, None, "length unmatch (3|2)", None]
    assert [s.length for s in score.sentences] == [5, 5, 3, 3, 6]  # words but traces, punctuation included
    totals = score.totals()
    assert (round(totals["recall"], 2), round(totals["precision"], 2), round(totals["f1"], 2)) == (77.78, 87.50, 82.35)
    assert (totals["complete_match"], totals["errors"], totals["skipped"], totals["valid"]) == (25.0, 1, 0, 4)


def test_the_rules_one_by_one():
    [tree] = read_trees("(TOP (S (NP-SBJ=2 (-NONE- *)) (ADVP (RB up)) (, ,) (VP (VB go))))")
    found, words, length = brackets(tree)
    assert words == ["up", "go"] and length == 3  # the trace is no word; the comma goes, but counts in the length
    assert found == {("S", 0, 2): 1, ("ADVP", 0, 1): 1, ("VP", 1, 2): 1}  # TOP and the empty NP gone
    [prt] = read_trees("(TOP (S (PRT (RP up)) (VP (VB go))))")
    assert evalb([tree], [prt]).sentences[0].matched == 3  # ADVP = PRT
    unlabeled = EvalbParameters(labeled=False)
    [np] = read_trees("(TOP (NP (NP (RB up)) (VP (VB go))))")
    assert evalb([tree], [np], unlabeled).sentences[0].matched == 3 and evalb([tree], [np]).sentences[0].matched == 1
    [punctuation] = read_trees("(TOP (S (. .) (, ,)))")
    assert evalb([punctuation], [punctuation]).sentences[0].error == "skip: no words"  # EVALB's skip sentence
    assert evalb([tree], [None]).sentences[0].error == "no tree"


WSJ = """( (S
    (NP-SBJ (NNP Pierre) (NNP Vinken) )
    (, ,)
    (VP (MD will)
      (VP (VB join)
        (NP (DT the) (NN board) )
        (PP-CLR (IN as)
          (NP (DT a) (JJ nonexecutive) (NN director) ))
        (NP-TMP (NNP Nov.) (CD 29) )))
    (. .) ))
( (S (NP-SBJ (-NONE- *)) (VP (VB Go)) (. !) ))"""


def test_a_wsj_tree_linearises_as_vinyals_et_al_and_reads_back():
    first, second = read_trees(WSJ, "wsj_0001.mrg")
    tree = strip(first)
    assert str(tree) == (
        "(S (NP (NNP Pierre) (NNP Vinken)) (, ,) (VP (MD will) (VP (VB join) (NP (DT the) (NN board)) (PP (IN as) "
        "(NP (DT a) (JJ nonexecutive) (NN director))) (NP (NNP Nov.) (CD 29)))) (. .))"
    )
    assert " ".join(linearize(tree)) == (
        "(S (NP XX XX )NP XX (VP XX (VP XX (NP XX XX )NP (PP XX (NP XX XX XX )NP )PP (NP XX XX )NP )VP )VP XX )S"
    )
    words, tags = tree.words(), [t for t, _ in tree.tagged()]
    assert delinearize(linearize(tree), words, tags) == tree
    assert str(strip(second)) == "(S (VP (VB Go)) (. !))"  # the trace and its empty subject gone


def test_ill_formed_outputs_are_error_sentences_as_evalb_counts_them_and_trees_when_repaired():
    """EVALB reads an output as the bracketed text it stands for: unbalanced brackets and an empty
    constituent (which it reads as a word) make an error sentence. The repair, a named option of
    its own (parse_f1_repaired), closes what is open and drops the stray and the empty."""
    [gold] = read_trees("(TOP (S (NP (DT The) (NN dog)) (VP (VBD barked))))")
    words, tags = ["The", "dog", "barked"], ["DT", "NN", "VBD"]
    outputs = {
        "unclosed": "(S (NP XX XX )NP (VP XX",
        "stray": ")VP (S XX XX XX )S )S )NP",
        "empty constituent": "(S (NP XX XX )NP (ADVP )ADVP (VP XX )VP )S",
        "short": "(S XX XX )S",
        "long": "(S XX XX XX XX )S",
        "nothing": "",
        "deep": " ".join(["(S"] * 5000 + ["XX", "XX", "XX"] + [")S"] * 5000),  # far deeper than Python's recursion limit
    }
    read = {name: read_output(text.split(), words, tags) for name, text in outputs.items()}
    repaired = {name: read_output(text.split(), words, tags, repair=True) for name, text in outputs.items()}
    assert [read[name].reason for name in ("unclosed", "stray", "empty constituent", "deep")] == [
        "too many open brackets", "too many close brackets", "an empty constituent (ADVP)", "nests deeper than 200 levels"
    ]  # fmt: skip
    assert read["empty constituent"].terminals == ("DT", "NN", "ADVP", "VBD")  # what EVALB reads as words
    assert str(repaired["unclosed"]) == "(S (NP (DT The) (NN dog)) (VP (VBD barked)))"  # closed at the end
    assert str(repaired["stray"]) == "(S (DT The) (NN dog) (VBD barked))"  # closings with nothing open dropped
    assert str(repaired["empty constituent"]) == "(S (NP (DT The) (NN dog)) (VP (VBD barked)))"  # the empty one dropped
    assert repaired["deep"].reason == "nests deeper than 200 levels"  # no tree the repair could give either
    strict = evalb([gold] * 7, list(read.values()))
    assert [s.error for s in strict.sentences] == [
        "too many open brackets", "too many close brackets", "an empty constituent (ADVP)", "length unmatch (3|2)",
        "length unmatch (3|4)", "skip: no words", "nests deeper than 200 levels",
    ]  # fmt: skip
    mended = evalb([gold] * 7, list(repaired.values())).sentences
    assert [s.error for s in mended][:3] == [None, None, None] and [(s.matched, s.gold, s.test) for s in mended[:3]] == [
        (3, 3, 3), (1, 3, 1), (3, 3, 3)
    ]  # fmt: skip
    # a constituent of punctuation alone, `(, )`, EVALB reads as the punctuation COLLINS.prm deletes: no error
    with_comma = read_output("(S (NP XX XX )NP (, ) (VP XX )VP )S".split(), words, tags)
    assert str(with_comma) == "(S (NP (DT The) (NN dog)) (VP (VBD barked)))"  # what EVALB scores once it deleted it
    scored = evalb([gold], [with_comma]).sentences[0]
    assert (scored.error, scored.matched, scored.gold, scored.test) == (None, 3, 3, 3)
    [comma] = read_trees("(TOP (S (, ,) (. .)))")
    unbalanced = read_output("(S XX XX".split(), [",", "."], [",", "."])  # no word EVALB keeps: a skip, not an error
    assert evalb([comma], [unbalanced]).sentences[0].error == "skip: no words"
    with pytest.raises(ValueError, match="^the output nests deeper than 200 levels$"):
        delinearize(outputs["deep"].split(), words, tags)


def test_the_score_of_a_split_says_both_f1s(tmp_path):
    """tree_scores: parse_f1 on the output as it is (EVALB's number), parse_f1_repaired on it mended."""
    gold = "(TOP (S (NP (DT The) (NN dog)) (VP (VBD barked))))\n(TOP (S (NP (DT A) (NN cat)) (VP (VBD sat))))\n"
    (tmp_path / "valid.gold").write_text(gold)
    hyps = ["(S (NP XX XX )NP (VP XX )VP )S", "(S (NP XX XX )NP (VP XX )VP"]  # the second never closes its S
    scores = tree_scores(tmp_path / "valid.gold", hyps)
    assert {k: v for k, v in scores.items() if k != "parse_scorer"} == {
        "parse_f1": 100.0, "parse_recall": 100.0, "parse_precision": 100.0, "parse_complete_match": 100.0,
        "parse_errors": 1, "parse_skipped": 0, "parse_f1_repaired": 100.0, "parse_errors_repaired": 0,
        "parse_skipped_repaired": 0,
    }  # fmt: skip
    empty = tree_scores(tmp_path / "valid.gold", ["(S (NP XX XX )NP (VP XX )VP )S", ""])  # EVALB's skip, not its error
    assert (empty["parse_errors"], empty["parse_skipped"], empty["parse_f1"]) == (0, 1, 100.0)
    scores = tree_scores(tmp_path / "valid.gold", ["(S (NP XX XX )NP (VP XX )VP )S", "(S (NP XX )NP (VP XX XX )VP"])
    assert (scores["parse_f1"], scores["parse_errors"], scores["parse_f1_repaired"], scores["parse_errors_repaired"]) == (
        100.0, 1, round(2 * 4 / 6 * 4 / 6 / (4 / 6 + 4 / 6) * 100, 2), 0
    )  # fmt: skip


def test_a_tree_read_back_from_its_own_linearisation_scores_100():
    rng = random.Random(0)
    labels = ["S", "NP", "VP", "PP", "SBAR", "ADJP"]
    golds, tests = [], []
    for _ in range(200):
        nodes: list[Tree | str] = [Tree(rng.choice(["NN", "VB", ",", "DT"]), (f"w{i}",)) for i in range(rng.randint(1, 15))]
        while len(nodes) > 1:
            i = rng.randrange(len(nodes))
            j = rng.randrange(i + 1, min(len(nodes), i + 4) + 1)
            nodes[i:j] = [Tree(rng.choice(labels), tuple(nodes[i:j]))]
        tree = nodes[0] if not nodes[0].is_tag else Tree("S", (nodes[0],))
        golds.append(tree)
        tests.append(delinearize(linearize(tree), tree.words(), [t for t, _ in tree.tagged()]))
    assert tests == golds
    totals = evalb(golds, tests).totals()
    assert totals["f1"] == 100.0 and totals["complete_match"] == 100.0


def test_a_damaged_treebank_is_named():
    with pytest.raises(UserError, match=r"^wsj_0002.mrg: tree 2: a bracket \(VP\) is never closed$"):
        read_trees("(S (NP (NN a)))\n(S (VP (VB go)", "wsj_0002.mrg")
    for depth in (300, 5000):  # a few hundred levels reached a RecursionError past the reading
        with pytest.raises(
            UserError,
            match=r"^deep.mrg: tree 1 nests its brackets more than 200 levels deep; aiayn reads trees of at most 200 levels$",
        ):
            read_trees("(S " * depth + "(NN x)" + ")" * depth, "deep.mrg")
    assert len(read_trees("(S " * 199 + "(NN x)" + ")" * 199)) == 1
    with pytest.raises(UserError, match=r"^x.mrg: tree 1: 'word' outside any bracket$"):
        read_trees("word (S)", "x.mrg")
    assert COLLINS.canonical("PRT") == "ADVP" and COLLINS.canonical("NP-SBJ-1") == "NP"


def test_no_valid_sentence_has_no_score_as_evalbs_nan_not_zero(tmp_path):
    """EVALB prints -nan for recall, precision and F1 where no sentence is valid (0 of 0 brackets);
    aiayn says there is no score (null, "n/a"), never 0.00, which would read as a parser's result."""
    from aiayn.builder.cli.evaluate import _f
    from aiayn.builder.run.rundir import final_scores

    gold = "(TOP (S (NP (DT The) (NN dog)) (VP (VBD barked))))\n(TOP (S (NP (DT A) (NN cat)) (VP (VBD sat))))\n"
    (tmp_path / "valid.gold").write_text(gold)
    totals = evalb(read_trees(gold), [None, None]).totals()
    assert [totals[k] for k in ("recall", "precision", "f1", "complete_match", "errors", "valid")] == [None] * 4 + [2, 0]
    scores = tree_scores(tmp_path / "valid.gold", ["(S (NP XX XX )NP", ""])  # an error and a skip: nothing valid
    assert [scores[k] for k in ("parse_f1", "parse_recall", "parse_precision", "parse_complete_match")] == [None] * 4
    assert (scores["parse_errors"], scores["parse_skipped"], scores["parse_f1_repaired"]) == (1, 1, None)  # 2 words of 3
    assert _f(None, 6) == "   n/a" and _f(82.3456, 6) == " 82.35"
    line = final_scores({"parse_f1": None, "parse_errors": 2, "bleu": None, "ppl": 9.5})
    assert line == "bracketing F1 n/a (no valid sentence: 2 errors), PPL 9.50"
    one = evalb(read_trees(gold), [read_trees(gold)[0], None]).totals()  # a valid sentence: scores, and 100
    assert (one["f1"], one["complete_match"]) == (100.0, 100.0)


def test_a_stray_close_bracket_offset_by_an_open_one_is_an_error_sentence():
    """EVALB reads `)` with no bracket open below its stack (undefined behaviour in evalb.c's popb);
    where a later `(` balances the counts it scores what it read. aiayn's rule is EVALB's wherever the
    counts do not balance: an error sentence, before any bracket counts."""
    [gold] = read_trees("(TOP (S (NP (DT a) (NN b)) (VP (VB c) (NN d))))")
    test = read_output("(S (NP XX XX )NP )S )S (VP XX XX".split(), gold.words(), [t for t, _ in gold.tagged()])
    [sentence] = evalb([gold], [test]).sentences
    assert (sentence.error, sentence.matched, sentence.test) == ("too many close brackets", 0, 0)
    repaired = read_output("(S (NP XX XX )NP )S )S (VP XX XX".split(), gold.words(), [t for t, _ in gold.tagged()], repair=True)
    assert evalb([gold], [repaired]).sentences[0].error is None  # the repaired score reads it as a tree
