"""The corpora `aiayn data` prepares: which files make each split, where they are in the
downloads (`--from`) and on the Hugging Face Hub, and the sacreBLEU test sets they are.

Split names are the file names the shipped experiments read (experiments/base.yaml:
train/newstest2013/newstest2014; experiments/multi30k/*.yaml: train/valid/test2016).
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from aiayn.builder.data.prepare.sources import Place

LANGS = ("en", "de")


@dataclass(frozen=True)
class Part:
    """One source file pair: `places[lang]` lists where the file of `lang` may be, best first."""

    name: str
    places: Mapping[str, tuple[Place, ...]]
    sgm: bool = False


@dataclass(frozen=True)
class Split:
    """`{name}.en` and `{name}.de` (the corpus's languages): its parts concatenated in order. Only training pairs are
    cleaned; `sacrebleu` is the test set sacreBLEU knows it as (`sacrebleu -t NAME -l en-de`, the corpus's languages)."""

    name: str
    parts: tuple[Part, ...]
    train: bool = False
    sacrebleu: str | None = None
    required: bool = True
    hub_split: str | None = None  # its name in the Hub dataset; None: not there


@dataclass(frozen=True)
class Hub:
    """A dataset on the Hugging Face Hub; `field`: the column holding {lang: text}, or None when
    each language is a column of its own."""

    path: str
    config: str | None
    field: str | None


@dataclass(frozen=True)
class Corpus:
    name: str
    splits: tuple[Split, ...]
    hub: Hub
    downloads: str  # what to download for --from, said in messages
    clean: bool  # whether training pairs are cleaned by default
    hints: tuple[tuple[str, str], ...] = ()  # (a file that --from may hold instead, what to do then)
    langs: tuple[str, str] = LANGS  # (source, target): the files' suffixes
    cleaned_as: str = "fairseq's prepare-wmt14en2de.sh"  # whose cleaning the default rules follow, in messages


def archived(archive: str, path: str) -> tuple[Place, ...]:
    """A file of a statmt.org archive: in the archive, or extracted (with or without its folder)."""
    name = path.rsplit("/", 1)[-1]
    return (Place(path, archive), Place(path), Place(name)) if name != path else (Place(path, archive), Place(path))


def statmt_part(
    name: str, archive: str, files: str | dict[str, str], *, sgm: bool = False, langs: tuple[str, str] = LANGS
) -> Part:
    """`files`: {lang: path in the archive}, or the path without the language suffix."""
    if isinstance(files, str):
        files = {lang: f"{files}.{lang}" for lang in langs}
    return Part(name, {lang: archived(archive, path) for lang, path in files.items()}, sgm=sgm)


NEWS_COMMENTARY = {  # version -> (archive, the path of its de-en files without the language)
    "v9": ("training-parallel-nc-v9.tgz", "training/news-commentary-v9.de-en"),  # WMT14's, as the Hub's wmt14
    "v12": ("training-parallel-nc-v12.tgz", "training/news-commentary-v12.de-en"),  # fairseq's script uses v12
}


def wmt14_en_de(news_commentary: str = "v9") -> Corpus:
    """WMT14 English-German: Europarl v7 + Common Crawl + News Commentary (4.5M pairs, the
    paper's training data), newstest2013 (dev) and the full newstest2014 (3003 sentences)."""
    nc_archive, nc_stem = NEWS_COMMENTARY[news_commentary]
    train = (
        statmt_part("europarl-v7", "training-parallel-europarl-v7.tgz", "training/europarl-v7.de-en"),
        statmt_part("commoncrawl", "training-parallel-commoncrawl.tgz", "commoncrawl.de-en"),
        statmt_part(f"news-commentary-{news_commentary}", nc_archive, nc_stem),
    )
    test = {"en": "test-full/newstest2014-deen-src.en.sgm", "de": "test-full/newstest2014-deen-ref.de.sgm"}
    return Corpus(
        name="wmt14-en-de",
        splits=(
            Split("train", train, train=True, hub_split="train"),
            Split(
                "newstest2013",
                (statmt_part("newstest2013", "dev.tgz", "dev/newstest2013"),),
                sacrebleu="wmt13",
                hub_split="validation",
            ),
            Split(
                "newstest2014",
                (statmt_part("newstest2014", "test-full.tgz", test, sgm=True),),
                sacrebleu="wmt14/full",
                hub_split="test",
            ),
        ),
        hub=Hub("wmt/wmt14", "de-en", field="translation"),
        downloads=(
            f"training-parallel-europarl-v7.tgz, training-parallel-commoncrawl.tgz, {nc_archive}, dev.tgz "
            "and test-full.tgz from statmt.org/wmt14"
        ),
        clean=True,
        hints=tuple(
            (archive, f"it has {archive}: add --news-commentary {version} to use it")
            for version, (archive, _) in NEWS_COMMENTARY.items()
            if version != news_commentary
        ),
    )


def wmt14_en_fr() -> Corpus:
    """WMT14 English-French as fairseq's prepare-wmt14en2fr.sh takes it: Europarl v7, Common
    Crawl, the UN corpus, News Commentary v9 and the 10^9 French-English corpus (about 36M pairs,
    the paper's Sec. 5.1), newstest2013 (dev) and the full newstest2014 (3003 sentences)."""
    fr = ("en", "fr")
    giga = {
        lang: (Place(f"giga-fren.release2.fixed.{lang}.gz", "training-giga-fren.tar"), Place(f"giga-fren.release2.fixed.{lang}"))
        for lang in fr
    }
    train = (
        statmt_part("europarl-v7", "training-parallel-europarl-v7.tgz", "training/europarl-v7.fr-en", langs=fr),
        statmt_part("commoncrawl", "training-parallel-commoncrawl.tgz", "commoncrawl.fr-en", langs=fr),
        statmt_part("un", "training-parallel-un.tgz", "un/undoc.2000.fr-en", langs=fr),
        statmt_part("news-commentary-v9", "training-parallel-nc-v9.tgz", "training/news-commentary-v9.fr-en", langs=fr),
        Part("giga-fren", giga),
    )
    test = {"en": "test-full/newstest2014-fren-src.en.sgm", "fr": "test-full/newstest2014-fren-ref.fr.sgm"}
    return Corpus(
        name="wmt14-en-fr",
        splits=(
            Split("train", train, train=True, hub_split="train"),
            Split(
                "newstest2013",
                (statmt_part("newstest2013", "dev.tgz", "dev/newstest2013", langs=fr),),
                sacrebleu="wmt13",
                hub_split="validation",
            ),
            Split(
                "newstest2014",
                (statmt_part("newstest2014", "test-full.tgz", test, sgm=True, langs=fr),),
                sacrebleu="wmt14/full",
                hub_split="test",
            ),
        ),
        hub=Hub("wmt/wmt14", "fr-en", field="translation"),
        downloads=(
            "training-parallel-europarl-v7.tgz, training-parallel-commoncrawl.tgz, training-parallel-un.tgz, "
            "training-parallel-nc-v9.tgz, training-giga-fren.tar, dev.tgz and test-full.tgz from statmt.org/wmt14"
        ),
        clean=True,
        langs=fr,
        cleaned_as="fairseq's prepare-wmt14en2fr.sh",
    )


def multi30k_part(raw: str, ours: str) -> Part:
    """A Multi30k file pair: the repository's data/task1/raw/{raw}.{lang}.gz (from its root or
    that folder, gzipped or not), or our layout's {ours}.{lang}."""
    places = {lang: (Place(f"data/task1/raw/{raw}.{lang}"), Place(f"{raw}.{lang}"), Place(f"{ours}.{lang}")) for lang in LANGS}
    return Part(raw, places)


def multi30k() -> Corpus:
    """Multi30k Task 1 (Elliott et al., 2016): 29,000 training pairs and its test sets."""
    split = lambda ours, raw, **kw: Split(ours, (multi30k_part(raw, ours),), **kw)  # noqa: E731
    return Corpus(
        name="multi30k",
        splits=(
            split("train", "train", train=True, hub_split="train"),
            split("valid", "val", hub_split="validation"),
            split("test2016", "test_2016_flickr", sacrebleu="multi30k/2016", hub_split="test"),
            split("test2017", "test_2017_flickr", sacrebleu="multi30k/2017", required=False),
            split("test2017mscoco", "test_2017_mscoco", required=False),
            split("test2018", "test_2018_flickr", sacrebleu="multi30k/2018", required=False),
        ),
        hub=Hub("bentrevett/multi30k", None, field=None),
        downloads="the files data/task1/raw/*.gz of github.com/multi30k/dataset",
        clean=False,  # the literature trains on all 29,000 pairs as released
    )


CORPORA: dict[str, Callable[..., Corpus]] = {"wmt14-en-de": wmt14_en_de, "wmt14-en-fr": wmt14_en_fr, "multi30k": multi30k}
