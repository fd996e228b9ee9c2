"""Small downloads in the formats `aiayn data` reads, made here from the demo corpus's sentences
(no network): statmt.org's WMT14 archives (English-German and English-French, as fairseq's scripts
download them, with dev.tgz), the Multi30k repository's gzipped captions, and Penn Treebank WSJ
.mrg sections. `prepare(root)` runs `aiayn data` on each, into `root/data`, as the docs say."""

import contextlib
import gzip
import io
import tarfile
from pathlib import Path

from aiayn.builder.cli import main
from aiayn.builder.data.demo import generate_demo

SGM = '<{kind} setid="newstest2014" srclang="any"{extra}>\n<doc sysid="ref" docid="1" genre="news" origlang="en">\n<p>\n'


def tgz(path: Path, members: dict[str, str]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _lines(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def _sgm(lines: list[str], kind: str, extra: str = "") -> str:
    body = "".join(f'<seg id="{i}">{line}</seg>\n' for i, line in enumerate(lines, 1))
    return SGM.format(kind=kind, extra=extra) + body + f"</p>\n</doc>\n</{kind}>\n"


def statmt(root: Path, tgt: str, *, pairs: int = 120, seed: int = 5) -> Path:
    """The archives of fairseq's prepare-wmt14en2{de,fr}.sh (and dev.tgz), a few dozen pairs each;
    French is the demo's German side under French names (what is tested is the plumbing)."""
    demo = generate_demo(pairs, 10, 10, seed)
    en, other = demo["train"]
    third = pairs // 3
    root.mkdir(parents=True, exist_ok=True)
    pair = f"{tgt}-en"
    tgz(root / "training-parallel-europarl-v7.tgz", {f"training/europarl-v7.{pair}.en": _lines(en[:third]),
                                                      f"training/europarl-v7.{pair}.{tgt}": _lines(other[:third])})  # fmt: skip
    tgz(root / "training-parallel-commoncrawl.tgz", {f"commoncrawl.{pair}.en": _lines(en[third : 2 * third]),
                                                      f"commoncrawl.{pair}.{tgt}": _lines(other[third : 2 * third])})  # fmt: skip
    tgz(root / "training-parallel-nc-v9.tgz", {f"training/news-commentary-v9.{pair}.en": _lines(en[2 * third :]),
                                                f"training/news-commentary-v9.{pair}.{tgt}": _lines(other[2 * third :])})  # fmt: skip
    valid, test = demo["valid"], demo["test"]
    tgz(root / "dev.tgz", {"dev/newstest2013.en": _lines(valid[0]), f"dev/newstest2013.{tgt}": _lines(valid[1])})
    tgz(root / "test-full.tgz", {
        f"test-full/newstest2014-{tgt}en-src.en.sgm": _sgm(test[0], "srcset"),
        f"test-full/newstest2014-{tgt}en-ref.{tgt}.sgm": _sgm(test[1], "refset", f' trglang="{tgt}"'),
    })  # fmt: skip
    if tgt == "fr":  # the UN corpus and the 10^9 corpus, a pair each
        tgz(
            root / "training-parallel-un.tgz",
            {"un/undoc.2000.fr-en.en": _lines(en[:1]), "un/undoc.2000.fr-en.fr": _lines(other[:1])},
        )
        with tarfile.open(root / "training-giga-fren.tar", "w") as tar:
            for lang, lines in (("en", en[1:2]), ("fr", other[1:2])):
                data = gzip.compress(_lines(lines).encode())
                info = tarfile.TarInfo(f"giga-fren.release2.fixed.{lang}.gz")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return root


def multi30k(root: Path, *, splits: dict[str, tuple[list[str], list[str]]] | None = None, seed: int = 6) -> Path:
    """github.com/multi30k/dataset's data/task1/raw/*.gz: the demo's sentences, or the `splits`
    given (train, val, test_2016_flickr: the real captions, for a recipe whose BPE merges fix its
    vocabulary)."""
    demo = generate_demo(150, 10, 10, seed)
    folder = root / "data" / "task1" / "raw"
    folder.mkdir(parents=True)
    splits = splits or {"train": demo["train"], "val": demo["valid"], "test_2016_flickr": demo["test"]}
    for split, (en, de) in splits.items():
        for lang, lines in (("en", en), ("de", de)):
            (folder / f"{split}.{lang}.gz").write_bytes(gzip.compress(_lines(lines).encode()))
    return root


TREES = [
    "( (S (NP-SBJ (DT The) (NN dog)) (VP (VBD barked)) (. .)) )",
    "( (S (NP-SBJ (-NONE- *)) (VP (VB Go) (ADVP (RB home))) (. !)) )",
    "( (S (NP-SBJ (PRP He)) (VP (VBD gave) (NP (PRP her)) (NP (DT a) (NN book))) (. .)) )",
    "( (S (NP-SBJ (NNS Prices)) (VP (VBD rose) (PP (IN in) (NP (NNP May)))) (. .)) )",
]


def treebank(root: Path) -> Path:
    """Penn Treebank's WSJ layout: wsj/SS/wsj_SS01.mrg for sections 00-24, a few trees each, one in
    the validation and test sections (22, 23: the recipe decodes them with beam 21 and up to 300
    tokens more than the input, which an untrained model uses)."""
    for section in range(25):
        folder = root / "wsj" / f"{section:02d}"
        folder.mkdir(parents=True)
        trees = TREES * 3 if 2 <= section <= 21 else TREES[:1]
        (folder / f"wsj_{section:02d}01.mrg").write_text("\n".join(trees) + "\n")
    return root


def corpus_folder(folder: Path, *, seed: int = 8) -> Path:
    """A parallel corpus as docs/fine-tuning.md asks of FINETUNE_DATA: train, valid and test .en/.de."""
    folder.mkdir(parents=True)
    for split, (en, de) in generate_demo(150, 10, 10, seed).items():
        (folder / f"{split}.en").write_text(_lines(en))
        (folder / f"{split}.de").write_text(_lines(de))
    return folder


def aiayn(*argv: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:
            code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()


def prepare(root: Path) -> Path:
    """`aiayn data` of each corpus from its downloads made here, into root/data (the $AIAYN_DATA
    the shipped experiments read)."""
    data = root / "data"
    commands = [
        ("wmt14-en-de", "--from", statmt(root / "downloads-de", "de"), "--workers", 1),
        ("wmt14-en-fr", "--from", statmt(root / "downloads-fr", "fr"), "--workers", 1),
        ("multi30k", "--from", multi30k(root / "multi30k-repo")),
        ("wsj", "--from", treebank(root / "treebank")),
    ]
    for corpus, *options in commands:
        code, out, err = aiayn("data", corpus, data / corpus, *options)
        assert code == 0, f"aiayn data {corpus}: {err}"
    return data
