"""Bracketing precision, recall and F1 as EVALB computes them (Sekine and Collins 1997), with the
parameters of its COLLINS.prm, the parsing literature's (and the paper's Table 4's) scorer.

Per sentence: the labels to delete go (a part-of-speech tag's word with it: punctuation and
traces; a constituent's bracket alone: TOP), constituents left with no word go too, function
tags are stripped (NP-SBJ is NP), ADVP and PRT are one label; each remaining constituent above
the tags is a (label, first word, last word) bracket, counted as a multiset (n gold and m test
brackets alike match min(n, m) times). A test tree whose words are not the gold tree's (another
number of them), or an output EVALB cannot read as a tree (unbalanced brackets, an empty
constituent: builder/data/trees.py's read_output), is an error sentence, scored as EVALB scores
it: its brackets count in neither total. Totals sum the matched, gold and test brackets of the
valid sentences; F1 is 2PR / (P + R).
"""

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aiayn.builder.data.trees import COLLINS_DELETE, Malformed, Tree, base_label, read_gold_trees, read_output
from aiayn.builder.errors import UserError


@dataclass(frozen=True)
class EvalbParameters:
    """An EVALB .prm file's settings; the defaults are COLLINS.prm's."""

    labeled: bool = True
    delete: frozenset[str] = COLLINS_DELETE
    delete_for_length: frozenset[str] = frozenset({"-NONE-"})
    equivalent: tuple[tuple[str, str], ...] = (("ADVP", "PRT"),)
    cutoff_len: int = 40

    def canonical(self, label: str) -> str:
        label = base_label(label)
        for a, b in self.equivalent:
            if label == b:
                return a
        return label if self.labeled else ""


COLLINS = EvalbParameters()


@dataclass
class SentenceScore:
    length: int
    matched: int = 0
    gold: int = 0
    test: int = 0
    error: str | None = None  # why EVALB counts the sentence as an error (then nothing else counts)


@dataclass
class EvalbScore:
    sentences: list[SentenceScore] = field(default_factory=list)

    def _valid(self, cutoff: int | None) -> list[SentenceScore]:
        return [s for s in self.sentences if s.error is None and (cutoff is None or s.length <= cutoff)]

    def totals(self, cutoff: int | None = None) -> dict[str, float | None]:
        """recall, precision, f1 and complete_match (percent, of the valid sentences; `cutoff`: of
        those of at most that many words; None where no sentence is valid, EVALB's -nan), and the
        sentences, errors, skipped and valid counts."""
        valid = self._valid(cutoff)
        matched, gold, test = (sum(getattr(s, k) for s in valid) for k in ("matched", "gold", "test"))
        recall = (100.0 * matched / gold if gold else 0.0) if valid else None
        precision = (100.0 * matched / test if test else 0.0) if valid else None
        f1 = (
            (2 * precision * recall / (precision + recall) if precision + recall else 0.0)
            if recall is not None and precision is not None
            else None
        )
        complete = 100.0 * sum(s.matched == s.gold == s.test for s in valid) / len(valid) if valid else None
        counted = [s for s in self.sentences if cutoff is None or s.length <= cutoff]
        skipped = sum(s.error is not None and s.error.startswith("skip") for s in counted)
        return {
            "recall": recall,
            "precision": precision,
            "f1": f1,
            "complete_match": complete,
            "sentences": len(counted),
            "errors": sum(s.error is not None for s in counted) - skipped,
            "skipped": skipped,
            "valid": len(valid),
        }


def brackets(tree: Tree, params: EvalbParameters = COLLINS) -> tuple[Counter[tuple[str, int, int]], list[str], int]:
    """(the brackets EVALB scores, the words it keeps, the sentence's length as EVALB counts it)."""
    found: Counter[tuple[str, int, int]] = Counter()
    words: list[str] = []
    length = sum(1 for tag, _ in tree.tagged() if tag not in params.delete_for_length)

    def walk(node: Tree) -> int:  # the number of kept words under node
        if node.is_tag:
            if base_label(node.label) in params.delete:
                return 0
            words.append(str(node.children[0]))
            return 1
        start = len(words)
        n = sum(walk(child) for child in node.children if isinstance(child, Tree))
        if n and base_label(node.label) not in params.delete:
            found[(params.canonical(node.label), start, start + n)] += 1
        return n

    walk(tree)
    return found, words, length


def score_sentence(gold: Tree, test: Tree | Malformed | None, params: EvalbParameters = COLLINS) -> SentenceScore:
    """`test`: a tree, an output that is none (read_output's Malformed), or None (no output)."""
    gold_brackets, gold_words, length = brackets(gold, params)
    if test is None:
        return SentenceScore(length, error="no tree")
    if isinstance(test, Malformed):  # EVALB skips a sentence whose output keeps no word, before its error counts
        kept = [label for label in test.terminals if base_label(label) not in params.delete]
        return SentenceScore(length, error=test.reason if kept else "skip: no words")
    test_brackets, test_words, _ = brackets(test, params)
    if not test_words:  # nothing to score (all punctuation and traces): EVALB skips it
        return SentenceScore(length, error="skip: no words")
    if len(test_words) != len(gold_words):
        return SentenceScore(length, error=f"length unmatch ({len(gold_words)}|{len(test_words)})")
    if test_words != gold_words:
        return SentenceScore(length, error="words unmatch")
    matched = sum((gold_brackets & test_brackets).values())
    return SentenceScore(length, matched, sum(gold_brackets.values()), sum(test_brackets.values()))


def evalb(gold: Sequence[Tree], test: Sequence[Tree | Malformed | None], params: EvalbParameters = COLLINS) -> EvalbScore:
    """Each test tree against its gold tree (Malformed: an output that is no tree; None: no output)."""
    if len(gold) != len(test):
        raise ValueError(f"{len(gold)} gold trees and {len(test)} test trees: EVALB compares them line by line")
    return EvalbScore([score_sentence(g, t, params) for g, t in zip(gold, test)])


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def tree_scores(gold_path: Path, hyps: Sequence[str]) -> dict[str, float | int | str | None]:
    """Bracketing F1 of linearised trees (a parsing model's output, one a line) against the gold
    trees `aiayn data wsj` wrote beside the split (`{split}.gold`), each output read back over its
    gold tree's words and tags (builder/data/trees.py): the keys `aiayn evaluate` adds. parse_f1
    and the others are EVALB's on the output as it is (an unbalanced or empty output an error
    sentence); parse_f1_repaired and parse_errors_repaired score the outputs repaired first."""
    gold = read_gold_trees(gold_path)
    if len(gold) != len(hyps):
        raise UserError(f"{gold_path} holds {len(gold)} trees for {len(hyps)} outputs; is it the split's?")
    scores: dict[str, float | int | str | None] = {}
    for repair, suffix in ((False, ""), (True, "_repaired")):
        tests = [read_output(h.split(), g.words(), [tag for tag, _ in g.tagged()], repair=repair) for h, g in zip(hyps, gold)]
        totals = evalb(gold, tests).totals()
        scores[f"parse_f1{suffix}"] = _rounded(totals["f1"])  # None (null): no valid sentence, EVALB's -nan
        if not repair:
            scores.update(
                parse_recall=_rounded(totals["recall"]),
                parse_precision=_rounded(totals["precision"]),
                parse_complete_match=_rounded(totals["complete_match"]),
            )
        scores[f"parse_errors{suffix}"] = int(totals["errors"] or 0)
        scores[f"parse_skipped{suffix}"] = int(totals["skipped"] or 0)  # EVALB's skip: an output with no word it keeps
    scores["parse_scorer"] = "EVALB's rules, COLLINS.prm (aiayn), on the output as it is; _repaired: brackets mended first"
    return scores
