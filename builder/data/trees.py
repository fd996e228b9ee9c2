"""Constituency trees for the paper's parsing experiment (Sec. 6.3): Penn Treebank brackets read
(a WSJ .mrg file holds `( (S ...) )` trees over several lines), linearised as Vinyals et al. 2015
linearise them for a sequence-to-sequence model, and read back from a model's output.

The linearised target of a tree is its brackets in order, each opening as `(LABEL` and closing as
`)LABEL`, every part-of-speech tag as `XX` (Vinyals et al. normalise the tags; the words are the
source), function tags and traces removed: `(S (NP XX XX )NP (VP XX )VP )S` for "The dog barked".

A model's output is read back as EVALB reads the bracketed text it stands for (`read_output`),
the words filling the `XX`s in order: a closing bracket with none open, a bracket left open and an
empty constituent (`(NP )NP`, which EVALB reads as a word) make it an error sentence, and a tree
whose `XX`s are not as many as the words keeps its own length (EVALB's length mismatch). The
repair (`repair=True`, a named option of the score: parse_f1_repaired) drops the stray closing
brackets and the empty constituents and closes what is left open, so that every output is a tree.

Trees nest at most MAX_DEPTH levels: deeper ones are refused when read (a treebank's) or errors
(a model's output), never a RecursionError.
"""

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from aiayn.builder.errors import UserError

TAG = "XX"  # every part-of-speech tag in a linearised tree
TRACE = "-NONE-"
MAX_DEPTH = 200  # brackets inside brackets, at most: a treebank's trees nest a few dozen levels
PUNCTUATION = frozenset({",", ":", "``", "''", "."})
# COLLINS.prm's DELETE_LABEL: EVALB drops these labels' brackets, and their words where they are tags
COLLINS_DELETE = frozenset({"TOP", "-NONE-", *PUNCTUATION})
_TOKEN = re.compile(r"\(|\)|[^\s()]+")


@dataclass(frozen=True)
class Tree:
    """A constituent: its label and children; a part-of-speech tag's one child is its word."""

    label: str
    children: tuple["Tree | str", ...]

    @property
    def is_tag(self) -> bool:
        return len(self.children) == 1 and isinstance(self.children[0], str)

    def words(self) -> list[str]:
        return [w for _, w in self.tagged()]

    def tagged(self) -> list[tuple[str, str]]:
        """(tag, word) of each word, in order."""
        if self.is_tag:
            return [(self.label, str(self.children[0]))]
        return [pair for child in self.children if isinstance(child, Tree) for pair in child.tagged()]

    def __str__(self) -> str:
        inner = " ".join(str(c) for c in self.children)
        return f"({self.label} {inner})" if self.label else f"( {inner})"


def read_trees(text: str, source: str = "the treebank") -> list[Tree]:
    """Every tree of a bracketed file (whitespace and line breaks anywhere), or a UserError
    naming the first bracket that does not close, the text outside a tree, or a tree nesting
    deeper than MAX_DEPTH."""
    trees: list[Tree] = []
    stack: list[tuple[str, list[Tree | str]]] = []  # the brackets open: (label, children so far)
    tokens = _TOKEN.findall(text)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "(":
            label = tokens[i + 1] if i + 1 < len(tokens) and tokens[i + 1] not in "()" else ""
            i += 2 if label else 1
            stack.append((label, []))
            if len(stack) > MAX_DEPTH:
                raise UserError(
                    f"{source}: tree {len(trees) + 1} nests its brackets more than {MAX_DEPTH} levels deep; aiayn reads "
                    f"trees of at most {MAX_DEPTH} levels"
                )
            continue
        if not stack:
            raise UserError(f"{source}: tree {len(trees) + 1}: {token!r} outside any bracket")
        i += 1
        if token != ")":
            stack[-1][1].append(token)
            continue
        label, children = stack.pop()
        tree = Tree(label, tuple(children))
        if stack:
            stack[-1][1].append(tree)
        else:
            trees.append(tree)
    if stack:
        raise UserError(f"{source}: tree {len(trees) + 1}: a bracket ({stack[-1][0] or 'the root'}) is never closed")
    return trees


def read_gold_trees(path: Path) -> list[Tree]:
    """A split's gold trees (`{split}.gold`), or a UserError that names the file and what is wrong."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: the gold trees are not UTF-8 text ({e}); write them again with aiayn data wsj") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read the gold trees ({e.strerror or e})") from None
    return read_trees(text, str(path))


def base_label(label: str) -> str:
    """The label without its function tags and indices (NP-SBJ-1 -> NP, NP=2 -> NP); -NONE- and
    -LRB- as they are."""
    return label if label.startswith("-") else re.split(r"[-=]", label, maxsplit=1)[0]


def strip(tree: Tree) -> Tree | None:
    """The tree without traces (and constituents left empty), function tags, or an unlabelled
    root (WSJ's `( (S ...) )`); None where nothing is left."""
    if tree.is_tag:
        return None if tree.label == TRACE else Tree(tree.label, tree.children)
    children = [c for c in (strip(child) for child in tree.children if isinstance(child, Tree)) if c is not None]
    if not children:
        return None
    if not tree.label and len(children) == 1:
        return children[0]
    return Tree(base_label(tree.label) or "TOP", tuple(children))


def linearize(tree: Tree) -> list[str]:
    """The target tokens of a (stripped) tree: `(LABEL`, `XX` for each word, `)LABEL`."""
    if tree.is_tag:
        return [TAG]
    inner = [token for child in tree.children if isinstance(child, Tree) for token in linearize(child)]
    return [f"({tree.label}", *inner, f"){tree.label}"]


@dataclass(frozen=True)
class Malformed:
    """An output EVALB cannot read as a tree: why, and the labels of what it reads as words, in
    order (each XX's tag, and an empty constituent's label), which decide whether EVALB skips the
    sentence (no word kept) or counts it an error."""

    reason: str
    terminals: tuple[str, ...]


def read_output(
    tokens: Sequence[str], words: Sequence[str], tags: Sequence[str] | None = None, *, repair: bool = False
) -> Tree | Malformed:
    """The tree of a model's output tokens over `words`, or why EVALB would not read it as one
    (see the module); with `repair`, a tree whatever the brackets (Malformed only past MAX_DEPTH).
    `tags`: each word's part-of-speech tag for its XX (the gold tree's, as the parsing literature
    scores a tagless parser, so that EVALB deletes the same punctuation from both)."""
    reason = None if repair else _unbalanced(tokens)
    if reason is not None:
        return Malformed(reason, _terminals(tokens, tags))
    stack: list[tuple[str, list[Tree | str]]] = [("TOP", [])]
    position = 0
    for token in tokens:
        if token.startswith("(") and len(token) > 1:
            stack.append((token[1:], []))
            if len(stack) > MAX_DEPTH + 1:
                return Malformed(f"nests deeper than {MAX_DEPTH} levels", _terminals(tokens, tags))
        elif token.startswith(")"):
            if len(stack) > 1:  # the repair drops a closing bracket with none open
                label, children = stack.pop()
                if children:  # and an empty constituent
                    stack[-1][1].append(Tree(label, tuple(children)))
        else:  # XX, or anything else where a word goes
            word = words[position] if position < len(words) else "<none>"
            tag = tags[position] if tags is not None and position < len(tags) else TAG
            stack[-1][1].append(Tree(tag, (word,)))
            position += 1
    while len(stack) > 1:  # and closes what is left open
        label, children = stack.pop()
        if children:
            stack[-1][1].append(Tree(label, tuple(children)))
    top = stack[0][1]
    return top[0] if len(top) == 1 and isinstance(top[0], Tree) else Tree("TOP", tuple(top))


def _unbalanced(tokens: Sequence[str]) -> str | None:
    """Why EVALB reads the output's brackets as no tree: a closing one with none open, one left
    open, or an empty constituent (`(NP )`, which it reads as a word, one the gold tree has not;
    `(, )` it reads as punctuation, which COLLINS.prm deletes: no error); None where they nest."""
    depth = 0
    for token, after in zip(tokens, [*tokens[1:], ""]):
        if token.startswith("(") and len(token) > 1:
            depth += 1
            if after.startswith(")") and base_label(token[1:]) not in COLLINS_DELETE:
                return f"an empty constituent ({token[1:]})"
        elif token.startswith(")"):
            depth -= 1
            if depth < 0:
                return "too many close brackets"
    return "too many open brackets" if depth else None


def _terminals(tokens: Sequence[str], tags: Sequence[str] | None) -> tuple[str, ...]:
    """What EVALB reads as words in the output, by label: each XX's tag, an empty constituent's label."""
    found: list[str] = []
    position = 0  # the XXs so far
    for token, after in zip(tokens, [*tokens[1:], ""]):
        if token.startswith("(") and len(token) > 1:
            if after.startswith(")"):
                found.append(token[1:])
        elif not token.startswith(")"):
            found.append(tags[position] if tags is not None and position < len(tags) else TAG)
            position += 1
    return tuple(found)


def delinearize(tokens: Sequence[str], words: Sequence[str], tags: Sequence[str] | None = None) -> Tree:
    """The repaired tree of a model's output (read_output with repair=True), for outputs that nest
    at most MAX_DEPTH levels: a linearised gold tree read back, say."""
    tree = read_output(tokens, words, tags, repair=True)
    if isinstance(tree, Malformed):
        raise ValueError(f"the output {tree.reason}")
    return tree


def subtrees(tree: Tree) -> Iterator[Tree]:
    yield tree
    for child in tree.children:
        if isinstance(child, Tree):
            yield from subtrees(child)
