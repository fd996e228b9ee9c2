"""aiayn's bracketing F1 (builder/decode/evalb.py) against EVALB itself, on random tree pairs: the
number of sentences whose matched, gold and test brackets or status differ (0 expected), and both
totals. EVALB is not shipped: compile evalb.c (nlp.cs.nyu.edu/evalb) and give its path.

    python benchmarks/evalb_agreement.py --evalb ./EVALB/evalb [--pairs 2000 --seed 0]
"""

import argparse
import random
import subprocess
import tempfile
from pathlib import Path

from aiayn.builder.data.trees import Tree
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


def parameters() -> str:
    """COLLINS.prm's settings in EVALB's format, with no limit on error sentences."""
    lines = ["MAX_ERROR 1000000", f"CUTOFF_LEN {COLLINS.cutoff_len}", "LABELED 1"]
    lines += [f"DELETE_LABEL {label}" for label in sorted(COLLINS.delete)]
    lines += [f"DELETE_LABEL_FOR_LENGTH {label}" for label in sorted(COLLINS.delete_for_length)]
    lines += [f"EQ_LABEL {a} {b}" for a, b in COLLINS.equivalent]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--evalb", required=True, type=Path)
    p.add_argument("--pairs", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    rng = random.Random(a.seed)
    golds, tests = [], []
    for _ in range(a.pairs):
        tagged = [(rng.choice(TAGS), f"w{i}") for i in range(rng.randint(1, 12))]
        gold = random_tree(rng, tagged)
        other = tagged[:-1] if len(tagged) > 1 and rng.random() < 0.1 else tagged  # some length mismatches
        golds.append(gold)
        tests.append(gold if other is tagged and rng.random() < 0.5 else random_tree(rng, other))
    with tempfile.TemporaryDirectory() as tmp:
        files = [Path(tmp) / name for name in ("gold", "test", "prm")]
        files[0].write_text("".join(f"{t}\n" for t in golds))
        files[1].write_text("".join(f"{t}\n" for t in tests))
        files[2].write_text(parameters())
        out = subprocess.run(
            [str(a.evalb), "-p", str(files[2]), str(files[0]), str(files[1])], capture_output=True, text=True
        ).stdout
    rows = [line.split() for line in out.splitlines() if len(line.split()) >= 9 and line.split()[0].isdigit()]
    ours = evalb(golds, tests).sentences
    differ = 0
    for row, s in zip(rows, ours, strict=True):
        status, counts = int(row[2]), tuple(map(int, row[5:8]))
        mine = 0 if s.error is None else 2 if s.error.startswith("skip") else 1
        differ += (status, counts if status == 0 else ()) != (mine, (s.matched, s.gold, s.test) if mine == 0 else ())
    theirs: dict[str, str] = {}
    for line in out.splitlines():  # the summary of all sentences comes first, then that of <= 40 words
        if "=" in line:
            key, value = (part.strip() for part in line.split("=", 1))
            theirs.setdefault(key, value)
    totals = evalb(golds, tests).totals()
    print(f"{a.pairs} random tree pairs (seed {a.seed}): {differ} sentences differ")
    print(f"EVALB  recall {theirs.get('Bracketing Recall')}  precision {theirs.get('Bracketing Precision')}  "
          f"F1 {theirs.get('Bracketing FMeasure')}  complete match {theirs.get('Complete match')}")  # fmt: skip
    print(f"aiayn  recall {totals['recall']:.2f}  precision {totals['precision']:.2f}  F1 {totals['f1']:.2f}  "
          f"complete match {totals['complete_match']:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
