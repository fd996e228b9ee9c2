"""`aiayn data`: the corpora from downloads made here (statmt.org archives with their real member
names, the Multi30k repository's layout), the cleaning, the messages, and the folder written
all at once. Nothing here touches the network."""

import gzip
import io
import json
import sys
import tarfile
from pathlib import Path

import pytest

from aiayn.builder.data.prepare.clean import Cleaner, CleanRules, judge
from aiayn.builder.data.prepare.sources import Found, read_lines
from aiayn.builder.run.atomic import staged_folder
from tests.conftest import EXPERIMENTS
from tests.experiments.corpora import aiayn as cli
from tests.experiments.corpora import tgz

EUROPARL = [("Resumption of the session", "Wiederaufnahme der Sitzungsperiode"), ("", ""), ("Yes.", "Ja.")]
COMMONCRAWL = [
    (" ".join(["word"] * 251), " ".join(["Wort"] * 251)),  # too long
    ("a b c d", "x"),  # 4 tokens against 1: over the ratio
    ("a well-known fact", "eine bekannte Tatsache ist das"),  # 5 Moses tokens a side; 3 words against 5
]
NEWS_COMMENTARY = [("It costs $5, doesn't it?", "Es kostet 5 $, nicht wahr?"), ("   ", "Leer")]
KEPT = [EUROPARL[0], EUROPARL[2], COMMONCRAWL[2], NEWS_COMMENTARY[0]]
NEWSTEST2013 = [("A dev sentence. ", "Ein Satz."), ("Second.", "Zweiter.")]  # copied as they are
SGM_EN = '<srcset setid="newstest2014" srclang="any">\n<doc sysid="ref" docid="1012-bbc" genre="news" origlang="en">\n<p>\n'
SGM_DE = '<refset setid="newstest2014" srclang="any" trglang="de">\n<doc sysid="ref" docid="1012-bbc" genre="news" origlang="en">\n<p>\n'
CLEANING = "1-250 moses tokens a side, length ratio <= 1.5, as Moses' clean-corpus-n in fairseq's prepare-wmt14en2de.sh"


def side(pairs, i: int, end: str = "\n") -> str:
    return "".join(p[i] + end for p in pairs)


@pytest.fixture
def statmt(tmp_path) -> Path:
    """The five archives fairseq's prepare-wmt14en2de.sh downloads (nc v9 as WMT14's), with the
    member names statmt.org's have and a few pairs each; other language pairs beside them."""
    root = tmp_path / "downloads"
    root.mkdir()
    tgz(root / "training-parallel-europarl-v7.tgz", {
        "training/europarl-v7.fr-en.en": "French side\n",
        "training/europarl-v7.de-en.de": side(EUROPARL, 1), "training/europarl-v7.de-en.en": side(EUROPARL, 0),
    })  # fmt: skip
    tgz(root / "training-parallel-commoncrawl.tgz", {
        "./commoncrawl.de-en.annotation": "x\n" * 3,
        "./commoncrawl.de-en.de": side(COMMONCRAWL, 1), "./commoncrawl.de-en.en": side(COMMONCRAWL, 0),
    })  # fmt: skip
    tgz(root / "training-parallel-nc-v9.tgz", {
        "training/news-commentary-v9.de-en.de": side(NEWS_COMMENTARY, 1, "\r\n"),
        "training/news-commentary-v9.de-en.en": side(NEWS_COMMENTARY, 0, "\r\n"),
    })  # fmt: skip
    tgz(root / "dev.tgz", {"dev/newstest2012.en": "old\n", "dev/newstest2013.en": side(NEWSTEST2013, 0),
                           "dev/newstest2013.de": side(NEWSTEST2013, 1)})  # fmt: skip
    tgz(root / "test-full.tgz", {
        "test-full/newstest2014-deen-src.en.sgm": SGM_EN + '<seg id="1">Gutach: Increased safety</seg>\n'
        '<seg id="2">  Two   spaces </seg>\n</p>\n</doc>\n</srcset>\n',
        "test-full/newstest2014-deen-ref.de.sgm": SGM_DE + '<seg id="1">Gutach: Mehr Sicherheit</seg>\n'
        '<seg id="2">Zwei Leerzeichen</seg>\n</p>\n</doc>\n</refset>\n',
    })  # fmt: skip
    return root


def read(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir()) if p.name != "prepared.json"}


WMT14_FILES = {
    "newstest2013.de": "Ein Satz.\nZweiter.\n", "newstest2013.en": "A dev sentence. \nSecond.\n",
    "newstest2014.de": "Gutach: Mehr Sicherheit\nZwei Leerzeichen\n", "newstest2014.en": "Gutach: Increased safety\nTwo spaces\n",
    "train.de": side(KEPT, 1), "train.en": side(KEPT, 0),
}  # fmt: skip


def test_wmt14_from_the_statmt_archives(statmt, tmp_path):
    out = tmp_path / "wmt14-en-de"
    code, stdout, err = cli("data", "wmt14-en-de", out, "--from", statmt, "--workers", 1)
    assert (code, err) == (0, "")
    assert read(out) == WMT14_FILES
    assert stdout.splitlines() == [
        f"wmt14-en-de: wrote {out} from {statmt}",
        f"train: kept 4 of 8 pairs; dropped 2 empty, 1 too long, 0 too short, 1 over the length ratio (cleaning: {CLEANING})",
        "newstest2013: 2 pairs, as they are; the test set `sacrebleu -t wmt13 -l en-de`",
        "newstest2014: 2 pairs, as they are; the test set `sacrebleu -t wmt14/full -l en-de`",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["downloads", "wmt14-en-de"]  # no temporary folder left


@pytest.mark.parametrize("flat", [False, True])
def test_wmt14_from_extracted_archives_is_the_same(statmt, tmp_path, flat):
    folder = tmp_path / "extracted"
    for archive in statmt.iterdir():
        with tarfile.open(archive) as tar:
            tar.extractall(folder, filter="data")
    if flat:  # the files moved out of training/, dev/ and test-full/
        for path in [p for p in folder.rglob("*") if p.is_file() and p.parent != folder]:
            path.rename(folder / path.name)
    code, _, err = cli("data", "wmt14-en-de", tmp_path / "out", "--from", folder, "--workers", 1)
    assert (code, err) == (0, "")
    assert read(tmp_path / "out") == WMT14_FILES


def test_cleaning_options(statmt, tmp_path):
    code, stdout, _ = cli("data", "wmt14-en-de", tmp_path / "a", "--from", statmt, "--count", "whitespace", "--min-len", 2)
    assert code == 0
    assert stdout.splitlines()[1] == (
        "train: kept 2 of 8 pairs; dropped 2 empty, 1 too long, 2 too short, 1 over the length ratio (cleaning: "
        "2-250 whitespace tokens a side, length ratio <= 1.5, as Moses' clean-corpus-n in fairseq's prepare-wmt14en2de.sh)"
    )
    assert (
        tmp_path / "a" / "train.en"
    ).read_text() == "Resumption of the session\nIt costs $5, doesn't it?\n"  # "a b c d": too short
    code, stdout, _ = cli("data", "wmt14-en-de", tmp_path / "b", "--from", statmt, "--no-clean")
    assert (code, stdout.splitlines()[1]) == (0, "train: 8 pairs, not cleaned")
    assert (tmp_path / "b" / "train.de").read_text() == side(EUROPARL + COMMONCRAWL + NEWS_COMMENTARY, 1)


def test_cleaner_follows_clean_corpus_n():
    moses, words = Cleaner(CleanRules(), "en", "de"), Cleaner(CleanRules(count="whitespace"), "en", "de")
    assert [moses.reason(*p) for p in EUROPARL + COMMONCRAWL + NEWS_COMMENTARY] == [
        None, "empty", None, "too_long", "ratio", None, None, "empty"
    ]  # fmt: skip
    assert words.reason(*COMMONCRAWL[2]) == "ratio"  # 3 words against 5
    assert Cleaner(CleanRules(ratio=2), "en", "de").reason("a b", "w x y z") is None  # 2 = 4/2 is not over 2
    assert Cleaner(CleanRules(max_len=3), "en", "de").reason("a b c", "x y z") is None  # max_len is inclusive
    assert Cleaner(CleanRules(max_len=3), "en", "de").reason("a b c d", "w x y z") == "too_long"


def test_judging_in_worker_processes_keeps_the_order():
    pairs = (EUROPARL + COMMONCRAWL + NEWS_COMMENTARY) * 5
    one = list(judge(pairs, CleanRules(), ("en", "de"), workers=1))
    assert list(judge(iter(pairs), CleanRules(), ("en", "de"), workers=2, chunk=3)) == one
    assert [r for _, _, r in one[:8]] == [None, "empty", None, "too_long", "ratio", None, None, "empty"]


def test_sgm_segments_are_read_as_sacrebleu_reads_them(tmp_path):
    path = tmp_path / "x.sgm"
    path.write_text('<doc docid="1">\n<seg id="1">a  &amp; b </seg>\n<p>\n<seg id="2"></seg>\n  <seg id="3">indented</seg>\n')
    assert list(read_lines(Found(path, sgm=True))) == ["a &amp; b", ""]  # sacreBLEU takes lines starting with "<seg "


def multi30k_repo(root: Path, raw: bool = True, gz: bool = True, splits=("train", "val", "test_2016_flickr")) -> Path:
    """The github.com/multi30k/dataset layout (data/task1/raw/*.gz), a few captions per file."""
    folder = root / "data" / "task1" / "raw" if raw else root
    folder.mkdir(parents=True)
    for split in splits:
        for lang, text in (("en", f"A dog runs ({split}).\nTwo men.\n"), ("de", f"Ein Hund rennt ({split}).\nZwei Männer.\n")):
            if gz:
                (folder / f"{split}.{lang}.gz").write_bytes(gzip.compress(text.encode()))
            else:
                (folder / f"{split}.{lang}").write_text(text)
    return root


@pytest.mark.parametrize("layout", ["repository", "raw folder", "gunzipped"])
def test_multi30k_from_the_repository(tmp_path, layout):
    repo = multi30k_repo(tmp_path / "dataset", raw=layout == "repository", gz=layout != "gunzipped")
    code, stdout, err = cli("data", "multi30k", tmp_path / "m", "--from", repo)
    assert (code, err) == (0, "")
    assert read(tmp_path / "m")["test2016.de"] == "Ein Hund rennt (test_2016_flickr).\nZwei Männer.\n"
    assert sorted(read(tmp_path / "m")) == ["test2016.de", "test2016.en", "train.de", "train.en", "valid.de", "valid.en"]
    assert stdout.splitlines()[1:] == [
        "train: 2 pairs, not cleaned",
        "valid: 2 pairs, as they are",
        "test2016: 2 pairs, as they are; the test set `sacrebleu -t multi30k/2016 -l en-de`",
        "not in this source: test2017, test2017mscoco, test2018",
    ]


def test_multi30k_from_our_layout_is_a_copy(tmp_path):
    first = multi30k_repo(tmp_path / "repo", splits=("train", "val", "test_2016_flickr", "test_2017_mscoco"))
    assert cli("data", "multi30k", tmp_path / "a", "--from", first)[0] == 0
    code, stdout, _ = cli("data", "multi30k", tmp_path / "b", "--from", tmp_path / "a")
    assert code == 0 and read(tmp_path / "b") == read(tmp_path / "a")
    assert "test2017mscoco: 2 pairs, as they are" in stdout.splitlines()


def test_processed_text_given_to_from_is_copied_with_its_record_or_refused(tmp_path):
    """`aiayn data --from` its own processed output: copied as it is with the record of what
    processed it (never `pipeline: []`); asked to process it again, refused; text Moses'
    tokenizer wrote without a record, refused as an experiment refuses it."""
    repo = multi30k_repo(tmp_path / "repo")
    assert cli("data", "multi30k", tmp_path / "a", "--from", repo, "--pipeline", "lowercase,moses_tokenize")[0] == 0
    record = json.loads((tmp_path / "a" / "prepared.json").read_text())["pipeline"]
    assert [step["type"] for step in record] == ["lowercase", "moses_tokenize"]
    code, _, err = cli("data", "multi30k", tmp_path / "b", "--from", tmp_path / "a")
    assert (code, err) == (0, "") and read(tmp_path / "b") == read(tmp_path / "a")
    assert json.loads((tmp_path / "b" / "prepared.json").read_text())["pipeline"] == record
    assert read(tmp_path / "b")["train.en"] == "a dog runs ( train ) .\ntwo men .\n"
    code, _, err = cli("data", "multi30k", tmp_path / "c", "--from", tmp_path / "a", "--pipeline", "lowercase")
    assert (code, err) == (
        2, f"aiayn data: error: --pipeline: --from {tmp_path / 'a'} holds text that `aiayn data` processed with ['lowercase', "
        "'moses_tokenize'] (its prepared.json), and --pipeline lowercase would process it again; give --from the raw downloads, "
        "or leave --pipeline out to copy the text as it is\n",
    )  # fmt: skip
    assert not (tmp_path / "c").exists()
    (tmp_path / "a" / "prepared.json").unlink()
    (tmp_path / "a" / "train.en").write_text("it &apos;s a dog\n")
    code, _, err = cli("data", "multi30k", tmp_path / "d", "--from", tmp_path / "a", "--pipeline", "moses_tokenize")
    assert code == 2 and "looks tokenized already (line 1 holds '&apos;', which Moses' tokenizer writes)" in err, err
    assert not (tmp_path / "d").exists()


def test_default_folder_is_where_the_experiments_look(tmp_path, monkeypatch):
    repo = multi30k_repo(tmp_path / "repo")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AIAYN_DATA", raising=False)
    assert cli("data", "multi30k", "--from", repo)[0] == 0
    assert (tmp_path / "data" / "multi30k" / "train.en").is_file()
    monkeypatch.setenv("AIAYN_DATA", str(tmp_path / "elsewhere"))
    assert cli("data", "multi30k", "--from", repo)[0] == 0
    assert (tmp_path / "elsewhere" / "multi30k" / "valid.de").is_file()


def test_training_without_the_corpus_says_how_to_write_it(tmp_path, monkeypatch):
    monkeypatch.setenv("AIAYN_DATA", str(tmp_path))
    where = tmp_path / "multi30k"
    assert cli("train", EXPERIMENTS / "multi30k" / "base.yaml") == (2, "", (
        f"aiayn train: error: data.dir {where} does not exist; set data.dir (or $AIAYN_DATA, which the shipped experiments read) "
        f"to the folder of the corpus, or write it there: aiayn data multi30k {where}\n"
    ))  # fmt: skip


def fails(expected: str, *argv, leaves: Path | None = None) -> None:
    """`aiayn data argv` exits 2 with exactly `expected`, and `leaves` holds what it held."""
    before = sorted(str(p) for p in leaves.rglob("*")) if leaves else None
    assert cli("data", *argv) == (2, "", f"aiayn data: error: {expected}\n")
    if leaves:
        assert sorted(str(p) for p in leaves.rglob("*")) == before


def test_missing_downloads_are_named(statmt, tmp_path):
    (statmt / "training-parallel-nc-v9.tgz").rename(statmt / "training-parallel-nc-v12.tgz")
    (statmt / "dev.tgz").unlink()
    fails(
        f"--from {statmt} has no training-parallel-nc-v9.tgz, dev.tgz; it has training-parallel-nc-v12.tgz: add "
        "--news-commentary v12 to use it; it should hold training-parallel-europarl-v7.tgz, training-parallel-commoncrawl.tgz, "
        "training-parallel-nc-v9.tgz, dev.tgz and test-full.tgz from statmt.org/wmt14",
        "wmt14-en-de", tmp_path / "out", "--from", statmt, leaves=tmp_path,
    )  # fmt: skip
    fails(
        f"--from {tmp_path / 'nowhere'} does not exist; give the folder that holds the files data/task1/raw/*.gz of "
        "github.com/multi30k/dataset", "multi30k", tmp_path / "out", "--from", tmp_path / "nowhere", leaves=tmp_path,
    )  # fmt: skip


def test_a_missing_multi30k_split_is_named(tmp_path):
    repo = multi30k_repo(tmp_path / "repo", splits=("train", "val"))
    fails(
        f"--from {repo} has no data/task1/raw/test_2016_flickr.en(.gz), data/task1/raw/test_2016_flickr.de(.gz); "
        "it should hold the files data/task1/raw/*.gz of github.com/multi30k/dataset",
        "multi30k", tmp_path / "m", "--from", repo, leaves=tmp_path,
    )  # fmt: skip


def test_news_commentary_v12_as_fairseq(statmt, tmp_path):
    tgz(statmt / "training-parallel-nc-v12.tgz", {
        "training/news-commentary-v12.de-en.de": "Zwölf.\n", "training/news-commentary-v12.de-en.en": "Twelve.\n",
    })  # fmt: skip
    (statmt / "training-parallel-nc-v9.tgz").unlink()
    code, _, _ = cli("data", "wmt14-en-de", tmp_path / "out", "--from", statmt, "--news-commentary", "v12", "--workers", 1)
    assert code == 0
    assert (tmp_path / "out" / "train.en").read_text().splitlines()[-1] == "Twelve."


def test_broken_downloads_leave_nothing(statmt, tmp_path):
    tgz(statmt / "training-parallel-commoncrawl.tgz", {"commoncrawl.de-en.de": "eins\nzwei\n", "commoncrawl.de-en.en": "one\n"})
    archive = statmt / "training-parallel-commoncrawl.tgz"
    out = tmp_path / "new" / "deeper" / "wmt14-en-de"
    fails(
        f"{archive}:commoncrawl.de-en.en ends at line 1 but {archive}:commoncrawl.de-en.de goes on: the two sides of a parallel "
        "corpus must have the same number of lines; is one of them truncated?",
        "wmt14-en-de", out, "--from", statmt, "--workers", 1, leaves=tmp_path,
    )  # fmt: skip
    tgz(archive, {"commoncrawl.de-en.de": "eins\n"})
    fails(f"{archive} has no commoncrawl.de-en.en; is it the archive statmt.org publishes under that name?",
          "wmt14-en-de", out, "--from", statmt, leaves=tmp_path)  # fmt: skip
    repo = multi30k_repo(tmp_path / "repo", gz=False)
    (repo / "data/task1/raw/val.de").write_bytes(b"gut\n\xff\n")
    fails(f"{repo / 'data/task1/raw/val.de'}, line 2: invalid UTF-8 (byte 0xff); is the file intact?",
          "multi30k", tmp_path / "m", "--from", repo, leaves=tmp_path)  # fmt: skip


def test_an_existing_corpus_is_kept_unless_forced(tmp_path):
    repo = multi30k_repo(tmp_path / "repo")
    out = tmp_path / "m"
    out.mkdir()
    (out / "old.txt").write_text("mine\n")
    fails(f"{out} already holds files (old.txt); give a new or empty folder, or --force to replace it",
          "multi30k", out, "--from", repo, leaves=tmp_path)  # fmt: skip
    fails(f"DIR {out} holds {out / 'inside'}, which this command reads; write to another path",
          "multi30k", out, "--from", out / "inside", "--force", leaves=tmp_path)  # fmt: skip
    assert cli("data", "multi30k", out, "--from", repo, "--force")[0] == 0
    assert "old.txt" not in read(out) and "train.en" in read(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m", "repo"]
    fails(f"{out / 'train.en'} is a file; give a folder to write the corpus into", "multi30k", out / "train.en", "--from", repo)


def test_an_interrupted_write_leaves_nothing(tmp_path):
    out = tmp_path / "a" / "b" / "corpus"
    with pytest.raises(KeyboardInterrupt), staged_folder(out) as tmp:
        (tmp / "train.en").write_text("half\n")
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-len", "100"], "--max-len sets the cleaning, which is off; add --clean or drop --max-len"),
        (["--clean", "--min-len", "5", "--max-len", "4"], "need 0 <= --min-len <= --max-len, got --min-len 5 and --max-len 4"),
        (
            ["--clean", "--clean-ratio", "0.5"],
            "--clean-ratio (0.5) must be at least 1: it bounds the longer side over the shorter",
        ),
        (["--news-commentary", "v12"], "--news-commentary is a choice of wmt14-en-de, not of multi30k"),
        (["--workers", "0"], "--workers (0) must be at least 1"),
    ],
)
def test_bad_options(tmp_path, args, message):
    fails(message, "multi30k", tmp_path / "m", "--from", tmp_path, *args, leaves=tmp_path)


HUB_HOW = (
    "Either download {downloads} into a folder and run `aiayn data {corpus} DIR --from FOLDER`, or install the Hub client "
    "(pip install datasets) and run it again where the Hub can be reached"
)


def test_without_datasets_the_message_names_both_ways(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` raises ImportError
    how = HUB_HOW.format(downloads="the files data/task1/raw/*.gz of github.com/multi30k/dataset", corpus="multi30k")
    fails(f"cannot load multi30k from the Hugging Face Hub bentrevett/multi30k: the `datasets` package is not installed. {how}",
          "multi30k", tmp_path / "m", leaves=tmp_path)  # fmt: skip
    how = HUB_HOW.format(
        downloads="training-parallel-europarl-v7.tgz, training-parallel-commoncrawl.tgz, training-parallel-nc-v9.tgz, "
        "dev.tgz and test-full.tgz from statmt.org/wmt14", corpus="wmt14-en-de",
    )  # fmt: skip
    fails(f"cannot load wmt14-en-de from the Hugging Face Hub wmt/wmt14 (de-en): the `datasets` package is not installed. {how}",
          "wmt14-en-de", tmp_path / "w", leaves=tmp_path)  # fmt: skip


@pytest.mark.slow  # importing `datasets` beside torch takes ~25 s on 2 cores
def test_offline_the_message_names_both_ways(tmp_path, monkeypatch):
    pytest.importorskip("datasets", reason="the optional extra aiayn[hub] is not installed")
    for name in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # nothing cached
    code, out, err = cli("data", "multi30k", tmp_path / "m")
    assert (code, out) == (2, "")
    assert err.startswith("aiayn data: error: cannot load multi30k from the Hugging Face Hub bentrevett/multi30k: ")
    assert err.endswith(
        HUB_HOW.format(downloads="the files data/task1/raw/*.gz of github.com/multi30k/dataset", corpus="multi30k") + "\n"
    )
    assert not (tmp_path / "m").exists()


class FakeHub:
    """`datasets` as the Hub would answer: {split: rows} per (path, config) asked for."""

    def __init__(self, tables: dict):
        self.tables, self.asked = tables, []

    def load_dataset(self, path, config=None):
        self.asked.append((path, config))
        return self.tables[(path, config)]


def test_from_the_hub(tmp_path, monkeypatch):
    rows = lambda *pairs: [{"translation": {"de": de, "en": en}} for en, de in pairs]  # noqa: E731
    hub = FakeHub({
        ("wmt/wmt14", "de-en"): {"train": rows(*EUROPARL, *COMMONCRAWL), "validation": rows(*NEWSTEST2013), "test": rows(("a", "b"))},
        ("bentrevett/multi30k", None): {"train": [{"en": "A dog.", "de": "Ein Hund."}], "validation": [{"en": "x", "de": None}],
                                        "test": [{"en": "Two men.", "de": "Zwei Männer."}]},
    })  # fmt: skip
    monkeypatch.setitem(sys.modules, "datasets", hub)
    code, stdout, _ = cli("data", "wmt14-en-de", tmp_path / "w", "--workers", 1)
    assert code == 0 and hub.asked == [("wmt/wmt14", "de-en")]
    assert stdout.splitlines()[:2] == [
        f"wmt14-en-de: wrote {tmp_path / 'w'} from the Hugging Face Hub's wmt/wmt14 (de-en)",
        f"train: kept 3 of 6 pairs; dropped 1 empty, 1 too long, 0 too short, 1 over the length ratio (cleaning: {CLEANING})",
    ]
    assert read(tmp_path / "w")["newstest2013.en"] == side(NEWSTEST2013, 0)
    code, stdout, _ = cli("data", "multi30k", tmp_path / "m")
    assert read(tmp_path / "m") == {"test2016.de": "Zwei Männer.\n", "test2016.en": "Two men.\n", "train.de": "Ein Hund.\n",
                                    "train.en": "A dog.\n", "valid.de": "\n", "valid.en": "x\n"}  # fmt: skip
    assert stdout.splitlines()[-1] == "not in this source: test2017, test2017mscoco, test2018"
    hub.tables[("bentrevett/multi30k", None)]["test"] = [{"en": "Two\nlines", "de": "Zwei"}]
    fails("bentrevett/multi30k test row 1 holds a line break; it cannot be written one sentence a line",
          "multi30k", tmp_path / "m2", leaves=tmp_path)  # fmt: skip


def test_prepared_multi30k_trains(tmp_path, monkeypatch):
    """The issue's end to end: `aiayn data multi30k --from FILES` fills $AIAYN_DATA/multi30k, and
    the shipped experiment trains on it (tiny and 2 steps here)."""
    from aiayn.builder.data.demo import generate_demo

    raw = tmp_path / "dataset" / "data" / "task1" / "raw"
    raw.mkdir(parents=True)
    demo = generate_demo(300, 8, 8, seed=1)  # stands in for the captions: the same file layout, made here
    for split, name in (("train", "train"), ("valid", "val"), ("test", "test_2016_flickr")):
        for i, lang in enumerate(("en", "de")):
            (raw / f"{name}.{lang}.gz").write_bytes(gzip.compress("".join(s + "\n" for s in demo[split][i]).encode()))
    monkeypatch.setenv("AIAYN_DATA", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    assert cli("data", "multi30k", "--from", tmp_path / "dataset")[0] == 0
    tiny = ["dims.N=1", "dims.d_model=32", "dims.d_ff=64", "dims.h=2", "dims.d_k=16", "dims.d_v=16", "dims.vocab_size=300",
            "train.tokens_per_step=800", "trainer.max_steps=2", "trainer.val_check_interval=null", "trainer.enable_progress_bar=false",
            "decode.beam=2", "decode.max_len_b=5", f"data.cache_dir={tmp_path / 'cache'}"]  # fmt: skip
    code, stdout, err = cli("train", EXPERIMENTS / "multi30k" / "base.yaml", *tiny)
    assert code == 0, err
    assert (tmp_path / "runs" / "multi30k-base" / "version_0" / "results.json").is_file()
    assert "train pairs: kept 300 of 300;" in stdout


@pytest.mark.parametrize("damage", ["truncated", "not gzip"])
def test_a_damaged_download_is_a_message(tmp_path, damage):
    repo = multi30k_repo(tmp_path / "repo")
    train = repo / "data" / "task1" / "raw" / "train.en.gz"
    whole = train.read_bytes()
    train.write_bytes(whole[: len(whole) // 2] if damage == "truncated" else b"<html>404 Not Found</html>\n")
    reason = (
        "Compressed file ended before the end-of-stream marker was reached"
        if damage == "truncated"
        else "Not a gzipped file (b'<h')"
    )
    fails(
        f"{train} cannot be read ({reason}); is the download whole? download it again",
        "multi30k",
        tmp_path / "m",
        "--from",
        repo,
        leaves=tmp_path,
    )


@pytest.fixture
def statmt_fr(tmp_path) -> Path:
    """The seven downloads of fairseq's prepare-wmt14en2fr.sh, with statmt.org's member names: the
    10^9 corpus a plain tar of two gzipped files, as training-giga-fren.tar is."""
    root = tmp_path / "downloads"
    root.mkdir()
    fr = [("Resumption of the session", "Reprise de la session"), ("", "")]
    tgz(root / "training-parallel-europarl-v7.tgz", {"training/europarl-v7.fr-en.en": side(fr, 0),
                                                     "training/europarl-v7.fr-en.fr": side(fr, 1)})  # fmt: skip
    tgz(root / "training-parallel-commoncrawl.tgz", {"commoncrawl.fr-en.en": "a b c d\n", "commoncrawl.fr-en.fr": "x\n"})
    tgz(
        root / "training-parallel-un.tgz",
        {"un/undoc.2000.fr-en.en": "United Nations\n", "un/undoc.2000.fr-en.fr": "Nations Unies\n"},
    )
    tgz(root / "training-parallel-nc-v9.tgz", {"training/news-commentary-v9.fr-en.en": "It costs $5.\r\n",
                                               "training/news-commentary-v9.fr-en.fr": "Cela coûte 5 $.\r\n"})  # fmt: skip
    with tarfile.open(root / "training-giga-fren.tar", "w") as tar:  # not compressed: its members are
        for lang, text in (("en", "Giga English\n"), ("fr", "Giga français\n")):
            data = gzip.compress(text.encode())
            info = tarfile.TarInfo(f"giga-fren.release2.fixed.{lang}.gz")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    tgz(root / "dev.tgz", {"dev/newstest2013.en": "A dev sentence.\n", "dev/newstest2013.fr": "Une phrase.\n"})
    tgz(root / "test-full.tgz", {
        "test-full/newstest2014-fren-src.en.sgm": SGM_EN + '<seg id="1">Spectacular wingsuit jump</seg>\n</p>\n</doc>\n</srcset>\n',
        "test-full/newstest2014-fren-ref.fr.sgm": SGM_DE + '<seg id="1">Saut spectaculaire</seg>\n</p>\n</doc>\n</refset>\n',
    })  # fmt: skip
    return root


def test_wmt14_en_fr_from_the_statmt_archives(statmt_fr, tmp_path):
    out = tmp_path / "wmt14-en-fr"
    code, stdout, err = cli("data", "wmt14-en-fr", out, "--from", statmt_fr, "--workers", 1)
    assert (code, err) == (0, "")
    assert read(out) == {
        "newstest2013.en": "A dev sentence.\n", "newstest2013.fr": "Une phrase.\n",
        "newstest2014.en": "Spectacular wingsuit jump\n", "newstest2014.fr": "Saut spectaculaire\n",
        "train.en": "Resumption of the session\nUnited Nations\nIt costs $5.\nGiga English\n",
        "train.fr": "Reprise de la session\nNations Unies\nCela coûte 5 $.\nGiga français\n",
    }  # fmt: skip
    assert stdout.splitlines() == [
        f"wmt14-en-fr: wrote {out} from {statmt_fr}",
        "train: kept 4 of 6 pairs; dropped 1 empty, 0 too long, 0 too short, 1 over the length ratio (cleaning: 1-250 moses "
        "tokens a side, length ratio <= 1.5, as Moses' clean-corpus-n in fairseq's prepare-wmt14en2fr.sh)",
        "newstest2013: 1 pairs, as they are; the test set `sacrebleu -t wmt13 -l en-fr`",
        "newstest2014: 1 pairs, as they are; the test set `sacrebleu -t wmt14/full -l en-fr`",
    ]
    assert json.loads((out / "prepared.json").read_text())["corpus"] == "wmt14-en-fr"


def test_wmt14_en_fr_names_its_missing_downloads(statmt_fr, tmp_path):
    (statmt_fr / "training-giga-fren.tar").unlink()
    fails(
        f"--from {statmt_fr} has no training-giga-fren.tar; it should hold training-parallel-europarl-v7.tgz, "
        "training-parallel-commoncrawl.tgz, training-parallel-un.tgz, training-parallel-nc-v9.tgz, training-giga-fren.tar, "
        "dev.tgz and test-full.tgz from statmt.org/wmt14",
        "wmt14-en-fr", tmp_path / "out", "--from", statmt_fr, leaves=tmp_path,
    )  # fmt: skip
