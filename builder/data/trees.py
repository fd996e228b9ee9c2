"""Constituency trees for the paper's parsing experiment (Sec. 6.3): Penn Treebank brackets read
(a WSJ .mrg file holds `( (S ...) )` trees over several lines), linearised as Vinyals et al. 2015
linearise them for a sequence-to-sequence model, and read back from a model's output.

The linearised target of a tree is its brackets in order, each opening as `(LABEL` and closing as
`)LABEL`, every part-of-speech tag as `XX` (Vinyals et al. normalise the tags; the words are the
source), function tags and traces removed: `(S (NP XX XX )NP (VP XX )VP )S` for "The dog barked".
Reading an output back never fails: a closing bracket with no open one is dropped, brackets left
open are closed at the end, and the words fill the `XX`s in order, so that a tree whose `XX`s are
not as many as the words keeps its own length and EVALB counts it as it counts such a tree (a
length mismatch).
"""

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from aiayn.builder.errors import UserError

TAG = "XX"  # every part-of-speech tag in a linearised tree
TRACE = "-NONE-"
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
    naming the first bracket that does not close or the text outside a tree."""
    tokens = _TOKEN.findall(text)
    trees: list[Tree] = []
    i = 0
    while i < len(tokens):
        if tokens[i] != "(":
            raise UserError(f"{source}: tree {len(trees) + 1}: {tokens[i]!r} outside any bracket")
        try:
            tree, i = _read(tokens, i, source, len(trees) + 1)
        except RecursionError:
            raise UserError(
                f"{source}: tree {len(trees) + 1} nests its brackets too deep to read (thousands of levels)"
            ) from None
        trees.append(tree)
    return trees


def _read(tokens: list[str], i: int, source: str, number: int) -> tuple[Tree, int]:
    """The tree that opens at tokens[i] == "(", and the index after its closing bracket."""
    label = tokens[i + 1] if i + 1 < len(tokens) and tokens[i + 1] not in "()" else ""
    i += 2 if label else 1
    children: list[Tree | str] = []
    while i < len(tokens) and tokens[i] != ")":
        if tokens[i] == "(":
            child, i = _read(tokens, i, source, number)
            children.append(child)
        else:
            children.append(tokens[i])
            i += 1
    if i >= len(tokens):
        raise UserError(f"{source}: tree {number}: a bracket ({label or 'the root'}) is never closed")
    return Tree(label, tuple(children)), i + 1


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


def delinearize(tokens: Sequence[str], words: Sequence[str], tags: Sequence[str] | None = None) -> Tree:
    """The tree of a model's output tokens over `words`; whatever the tokens, a tree (see the
    module). `tags`: each word's part-of-speech tag for its XX (the gold tree's, as the parsing
    literature scores a tagless parser, so that EVALB deletes the same punctuation from both)."""
    stack: list[tuple[str, list[Tree | str]]] = [("TOP", [])]
    position = 0
    for token in tokens:
        if token.startswith("(") and len(token) > 1:
            stack.append((token[1:], []))
        elif token.startswith(")"):
            if len(stack) > 1:  # a closing bracket with none open is dropped
                label, children = stack.pop()
                if children:  # an empty constituent brackets nothing: EVALB would drop it too
                    stack[-1][1].append(Tree(label, tuple(children)))
        else:  # XX, or anything else where a word goes
            word = words[position] if position < len(words) else "<none>"
            tag = tags[position] if tags is not None and position < len(tags) else TAG
            stack[-1][1].append(Tree(tag, (word,)))
            position += 1
    while len(stack) > 1:
        label, children = stack.pop()
        if children:
            stack[-1][1].append(Tree(label, tuple(children)))
    top = stack[0][1]
    return top[0] if len(top) == 1 and isinstance(top[0], Tree) else Tree("TOP", tuple(top))


def subtrees(tree: Tree) -> Iterator[Tree]:
    yield tree
    for child in tree.children:
        if isinstance(child, Tree):
            yield from subtrees(child)
