"""aiayn's bracketing F1 (builder/decode/evalb.py) against EVALB itself, in two sets: random tree
pairs, and a parser's raw outputs (linearised trees, some with a bracket dropped, a stray closing
bracket, an empty constituent, an XX too many or too few, or nothing at all), each written as the
bracketed text EVALB reads, the words and gold tags in place of the XXs. For each set: the number
of sentences whose matched, gold and test brackets or status differ (0 expected), the error and
skip sentences each counts, and both totals. EVALB stops at its error limit (MAX_ERROR; `-e`, 10 by
default: the 11th error sentence ends it before its summary), so its parameter file here sets the
limit above the sentences, and the output says which. EVALB is not shipped: compile evalb.c
(nlp.cs.nyu.edu/evalb) and give its path.

    python benchmarks/evalb_agreement.py --evalb ./EVALB/evalb [--pairs 2000 --outputs 2000 --seed 0]
"""

import argparse
import random
import subprocess
import tempfile
from pathlib import Path

from aiayn.builder.data.trees import TAG, Tree, linearize, read_output
from aiayn.builder.decode.evalb import COLLINS, evalb

PHRASES = ["S", "NP", "VP", "PP", "ADVP", "PRT", "SBAR", "ADJP", "NP-SBJ", "VP=2", "S-TPC-1"]
TAGS = ["NN", "DT", "VB", "IN", "RB", "RP", ",", ".", "``", "''", ":", "-NONE-", "JJ"]


def random_tree(rng: random.Random, tagged: list[tuple[str, str]]) -> Tree:
    nodes: list[Tree] = [Tree(t, (w,)) for t, w in tagged]
    while len(nodes) > 1 or rng.random() < 0.2:
        i = rng.randrange(len(nodes))
        j = rng.randrange(i + 1, min(len(nodes), i + 4) + 1)
        nodes[i:j] = [Tree(rng.choice(PHRASES), tuple(nodes[i:j]))]
    return Tree("TOP", (nodes[0],))


def parameters(max_error: int) -> str:
    """COLLINS.prm's settings in EVALB's format, with its error limit at `max_error`."""
    lines = [f"MAX_ERROR {max_error}", f"CUTOFF_LEN {COLLINS.cutoff_len}", "LABELED 1"]
    lines += [f"DELETE_LABEL {label}" for label in sorted(COLLINS.delete)]
    lines += [f"DELETE_LABEL_FOR_LENGTH {label}" for label in sorted(COLLINS.delete_for_length)]
    lines += [f"EQ_LABEL {a} {b}" for a, b in COLLINS.equivalent]
    return "\n".join(lines) + "\n"


def damaged(rng: random.Random, tokens: list[str]) -> list[str]:
    """A linearised tree as a parser might write it: as it is, or with one fault."""
    tokens = list(tokens)
    fault = rng.choice(["none", "none", "drop close", "stray close", "empty", "drop XX", "extra XX", "nothing"])
    closes = [i for i, t in enumerate(tokens) if t.startswith(")")]
    if fault == "drop close" and closes:
        del tokens[rng.choice(closes)]
    elif fault == "stray close":
        tokens.insert(rng.randrange(len(tokens) + 1), ")NP")
    elif fault == "empty":
        at = rng.randrange(len(tokens) + 1)
        tokens[at:at] = ["(ADVP", ")ADVP"]
    elif fault == "drop XX" and TAG in tokens:
        tokens.remove(TAG)
    elif fault == "extra XX":
        tokens.insert(rng.randrange(len(tokens) + 1), TAG)
    elif fault == "nothing":
        tokens = []
    return tokens


def as_evalb_reads_it(tokens: list[str], tagged: list[tuple[str, str]]) -> str:
    """The bracketed text an output stands for: `(LABEL` opens, `)LABEL` closes, each XX the next
    word with its gold tag (a word past the last: `(XX <none>)`, as aiayn reads it)."""
    words = iter(tagged)
    parts = []
    for token in tokens:
        if token.startswith(")"):
            parts.append(")")
        elif token.startswith("(") and len(token) > 1:
            parts.append(token)
        else:
            tag, word = next(words, (TAG, "<none>"))
            parts.append(f"({tag} {word})")
    return " ".join(parts)


def run_evalb(binary: Path, golds: list[str], tests: list[str], max_error: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        files = [Path(tmp) / name for name in ("gold", "test", "prm")]
        files[0].write_text("".join(f"{t}\n" for t in golds))
        files[1].write_text("".join(f"{t}\n" for t in tests))
        files[2].write_text(parameters(max_error))
        done = subprocess.run([str(binary), "-p", str(files[2]), str(files[0]), str(files[1])], capture_output=True, text=True)
    return done.stdout


def compare(name: str, out: str, score) -> None:
    """Sentence by sentence, then the totals, of EVALB's output and aiayn's score."""
    rows = [line.split() for line in out.splitlines() if len(line.split()) >= 9 and line.split()[0].isdigit()]
    differ = 0
    for row, s in zip(rows, score.sentences, strict=True):
        status, counts = int(row[2]), tuple(map(int, row[5:8]))
        mine = 0 if s.error is None else 2 if s.error.startswith("skip") else 1
        differ += (status, counts if status == 0 else ()) != (mine, (s.matched, s.gold, s.test) if mine == 0 else ())
    theirs: dict[str, str] = {}
    for line in out.splitlines():  # the summary of all sentences comes first, then that of <= 40 words
        if "=" in line:
            key, value = (part.strip() for part in line.split("=", 1))
            theirs.setdefault(key, value)
    totals = score.totals()
    print(f"{name}: {len(rows)} sentences, {differ} differ")
    print(f"  EVALB  recall {theirs.get('Bracketing Recall')}  precision {theirs.get('Bracketing Precision')}  "
          f"F1 {theirs.get('Bracketing FMeasure')}  complete match {theirs.get('Complete match')}  "
          f"error sentences {theirs.get('Number of Error sentence')}  skipped {theirs.get('Number of Skip  sentence')}")  # fmt: skip
    print(f"  aiayn  recall {totals['recall']:.2f}  precision {totals['precision']:.2f}  F1 {totals['f1']:.2f}  "
          f"complete match {totals['complete_match']:.2f}  error sentences {totals['errors']}  skipped {totals['skipped']}")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--evalb", required=True, type=Path)
    p.add_argument("--pairs", type=int, default=2000)
    p.add_argument("--outputs", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    rng = random.Random(a.seed)
    max_error = max(a.pairs, a.outputs) + 1
    print(f"EVALB {a.evalb} with COLLINS.prm's settings and MAX_ERROR {max_error} (above the sentences: EVALB's default, 10, "
          "would stop it at the 11th error sentence, before its summary)")  # fmt: skip
    golds, tests = [], []
    for _ in range(a.pairs):
        tagged = [(rng.choice(TAGS), f"w{i}") for i in range(rng.randint(1, 12))]
        gold = random_tree(rng, tagged)
        other = tagged[:-1] if len(tagged) > 1 and rng.random() < 0.1 else tagged  # some length mismatches
        golds.append(gold)
        tests.append(gold if other is tagged and rng.random() < 0.5 else random_tree(rng, other))
    out = run_evalb(a.evalb, [str(t) for t in golds], [str(t) for t in tests], max_error)
    compare(f"{a.pairs} random tree pairs (seed {a.seed})", out, evalb(golds, tests))
    golds, outputs, texts = [], [], []
    for _ in range(a.outputs):
        tagged = [(rng.choice(TAGS), f"w{i}") for i in range(rng.randint(1, 12))]
        gold = random_tree(rng, tagged)
        tokens = damaged(
            rng, linearize(gold.children[0]) if rng.random() < 0.5 else linearize(random_tree(rng, tagged).children[0])
        )
        golds.append(gold)
        texts.append(as_evalb_reads_it(tokens, gold.tagged()))
        outputs.append(read_output(tokens, gold.words(), [tag for tag, _ in gold.tagged()]))
    out = run_evalb(a.evalb, [str(t) for t in golds], texts, max_error)
    compare(f"{a.outputs} raw outputs, a fault in 6 of 8 (seed {a.seed})", out, evalb(golds, outputs))


if __name__ == "__main__":
    main()
