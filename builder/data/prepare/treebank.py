"""`aiayn data wsj --from TREEBANK`: the Penn Treebank's WSJ trees (the user's licensed copy: the
`.mrg` files, `wsj/SS/wsj_SSNN.mrg` or any folder that holds them) as the paper's parsing
experiment reads them (Sec. 6.3): sections 02-21 train, 22 valid, 23 test. Each split is three
line-aligned files: `{split}.en` the words, `{split}.tree` the linearised tree (builder/data/trees.py,
Vinyals et al. 2015), and `{split}.gold` the tree itself (function tags and traces removed), which
`aiayn evaluate` scores a model's trees against with EVALB's rules."""

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from aiayn.builder.data.trees import Tree, linearize, read_trees, strip
from aiayn.builder.errors import UserError
from aiayn.builder.run.atomic import check_folder_output, staged_folder
from aiayn.builder.run.outputs import check_output

SECTIONS = {"train": tuple(range(2, 22)), "valid": (22,), "test": (23,)}  # the parsing literature's WSJ split
_FILE = re.compile(r"^wsj_(\d\d)\d\d\.mrg$", re.IGNORECASE)
SOURCE, TARGET, GOLD = "en", "tree", "gold"  # the files' suffixes: data.src_lang, data.tgt_lang, the gold trees


@dataclass(frozen=True)
class Written:
    split: str
    sections: tuple[int, ...]
    files: int
    trees: int


def section_files(root: Path) -> dict[int, list[Path]]:
    """{section: its .mrg files, sorted} under `root`, by the file names (wsj_SSNN.mrg)."""
    found: dict[int, list[Path]] = {}
    for path in sorted(root.rglob("*")):
        match = _FILE.match(path.name)
        if match and path.is_file():
            found.setdefault(int(match.group(1)), []).append(path)
    return found


def prepare_treebank(root: Path, out: Path, *, force: bool = False) -> list[str]:
    """Write the three splits into `out` (all at once); what `aiayn data` prints."""
    check_output(out, "DIR", inputs=[root])
    if not root.is_dir():
        raise UserError(f"--from {root} is not a folder; give the folder of the treebank's WSJ .mrg files (wsj/00 ... wsj/24)")
    check_folder_output(out, force=force, purpose="write the corpus into")
    files = section_files(root)
    missing = [f"{s:02d}" for sections in SECTIONS.values() for s in sections if s not in files]
    if missing:
        raise UserError(
            f"--from {root} has no wsj_SSNN.mrg files of section{'s' if len(missing) > 1 else ''} {', '.join(missing)}; "
            "it should hold the Penn Treebank's WSJ sections 02-23"
        )
    written = []
    with staged_folder(out) as tmp:
        for split, sections in SECTIONS.items():
            paths = [p for s in sections for p in files[s]]
            written.append(Written(split, sections, len(paths), _write_split(tmp, split, _trees(paths))))
        (tmp / "prepared.json").write_text(
            json.dumps(
                {
                    "corpus": "wsj",
                    "source": str(root),
                    "linearisation": "Vinyals et al. 2015: (LABEL ... )LABEL, tags as XX",
                    "splits": {
                        w.split: {"sections": [f"{s:02d}" for s in w.sections], "files": w.files, "trees": w.trees}
                        for w in written
                    },
                },
                indent=2,
            )
            + "\n"
        )
    return [f"wsj: wrote {out} from {root}"] + [
        f"{w.split}: {w.trees:,} trees of section{'s' if len(w.sections) > 1 else ''} "
        f"{w.sections[0]:02d}{f'-{w.sections[-1]:02d}' if len(w.sections) > 1 else ''} ({w.files} files)"
        for w in written
    ]


def _trees(paths: Iterable[Path]) -> Iterable[Tree]:
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8", errors="strict")
        except (OSError, UnicodeDecodeError) as e:
            raise UserError(f"{path}: cannot read it ({e}); is the treebank intact?") from None
        for tree in read_trees(text, str(path)):
            stripped = strip(tree)
            if stripped is not None:
                yield stripped


def _write_split(folder: Path, split: str, trees: Iterable[Tree]) -> int:
    n = 0
    paths = [folder / f"{split}.{suffix}" for suffix in (SOURCE, TARGET, GOLD)]
    with (
        open(paths[0], "w", encoding="utf-8") as words,
        open(paths[1], "w", encoding="utf-8") as target,
        open(paths[2], "w", encoding="utf-8") as gold,
    ):
        for tree in trees:
            words.write(" ".join(tree.words()) + "\n")
            target.write(" ".join(linearize(tree)) + "\n")
            gold.write(f"{tree}\n")
            n += 1
    if n == 0:
        raise UserError(f"{split}: the treebank's files of this split hold no trees")
    return n
