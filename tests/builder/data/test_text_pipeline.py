"""data.pipeline: Moses' steps through sacremoses, held against the Multi30k literature's files;
the processed text cached; a corpus tokenized already refused; BPE by merges."""

import json
import re
from pathlib import Path

import pytest

from aiayn.builder.cli import main
from aiayn.builder.data.bpe import alphabet, train_tokenizer
from aiayn.builder.data.text import TextPipeline, check_not_tokenized, parse_steps, processed_file
from aiayn.builder.data.tokenizer import SPECIALS, check_vocabulary
from aiayn.builder.errors import UserError
from aiayn.schemas.data import FilesDataSpec
from aiayn.schemas.text import LowercaseStep, MosesTokenizeStep, NormalizePunctuationStep
from tests.conftest import EXPERIMENTS, SHARED_DATA, registry

LITERATURE = [LowercaseStep(), NormalizePunctuationStep(), MosesTokenizeStep()]
RAW, TOK = SHARED_DATA / "multi30k", SHARED_DATA / "multi30k-tok"
# our split name -> the literature's file name (data/task1/tok/{name}.lc.norm.tok.{lang})
SPLITS = {"train": "train", "valid": "val", "test2016": "test_2016_flickr", "test2017": "test_2017_flickr",
          "test2017mscoco": "test_2017_mscoco", "test2018": "test_2018_flickr"}  # fmt: skip
# Every line where sacremoses' output differs from the published files, and nothing else: German
# final periods inside closing quotes (Moses' normalize-punctuation.perl -l de moves them out,
# sacremoses does not: 7 training lines and one validation line); a typographic apostrophe that
# the published German line has as a quote; and test2018, whose published files were made by
# another Moses snapshot ("sign:" and "6: 51" unsplit, parentheses kept on a word, and German
# periods moved into the quotes).
KNOWN = {
    ("train", "de"): [6514, 7090, 7366, 23126, 23141, 23592, 24671],
    ("valid", "de"): [656],
    ("test2018", "en"): [33, 204, 807],
    ("test2018", "de"): [33, 1034],
}


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


@pytest.mark.skipif(not TOK.is_dir(), reason=f"the literature's tokenized Multi30k is not at {TOK} (set $AIAYN_DATA)")
def test_the_pipeline_makes_the_literatures_text_on_every_line_of_every_split():
    found = {}
    for lang in ("en", "de"):
        pipeline = TextPipeline(LITERATURE, lang, registry())
        for ours, theirs in SPLITS.items():
            made, published = pipeline.lines(lines(RAW / f"{ours}.{lang}")), lines(TOK / f"{theirs}.lc.norm.tok.{lang}")
            assert len(made) == len(published)
            differ = [n for n, (a, b) in enumerate(zip(made, published), 1) if a != b]
            if differ:
                found[ours, lang] = differ
    assert found == KNOWN
    # the one the README names: a period moved out of the closing quote
    valid = TextPipeline(LITERATURE, "de", registry()).lines(lines(RAW / "valid.de"))[655]
    assert valid.endswith("gayer than tea . &quot;") and lines(TOK / "val.lc.norm.tok.de")[655].endswith(
        "gayer than tea &quot; ."
    )


def test_each_step_and_the_detokenizer():
    line = 'A man\u2019s "Hook-em" sign, 6:51 & more.'
    assert TextPipeline([LowercaseStep()], "en", registry())(line) == 'a man\u2019s "hook-em" sign, 6:51 & more.'
    assert TextPipeline([NormalizePunctuationStep()], "en", registry())(line) == 'A man\'s "Hook-em" sign, 6:51 & more.'
    moses = TextPipeline(LITERATURE, "en", registry())
    assert moses(line) == "a man &apos;s &quot; hook-em &quot; sign , 6 : 51 &amp; more ."
    assert moses.detokenize(moses(line)) == 'a man\'s "hook-em" sign, 6: 51 & more.'
    dashes = TextPipeline([MosesTokenizeStep(escape=False, aggressive_dash_splits=True)], "en", registry())
    assert dashes(line) == 'A man \u2019 s " Hook @-@ em " sign , 6 : 51 & more .'  # no normalising: \u2019 stays a token
    assert dashes.detokenize(dashes(line)) == 'A man \u2019 s "Hook-em" sign, 6: 51 & more.'
    assert TextPipeline([LowercaseStep()], "en", registry()).detokenize("a b .") == "a b ."  # nothing to undo


def test_a_pipeline_prints_as_its_steps():
    assert (
        repr(TextPipeline(LITERATURE, "de", registry()))
        == "TextPipeline([lowercase, normalize_punctuation, moses_tokenize], lang='de')"
    )


def test_steps_by_name_with_options_and_refusals():
    data = FilesDataSpec.model_validate(
        {"dir": "d", "pipeline": ["lowercase", {"type": "moses_tokenize", "escape": False}]}, context=registry().context
    )
    assert data.pipeline == (LowercaseStep(), MosesTokenizeStep(escape=False))
    assert FilesDataSpec(dir="d").pipeline == ()
    assert parse_steps(["lowercase", "normalize_punctuation"], registry()) == (LowercaseStep(), NormalizePunctuationStep())
    with pytest.raises(UserError) as e:
        parse_steps(["lowercse"], registry())
    assert (
        str(e.value)
        == "'lowercse' is not a text pipeline step (lowercase, normalize_punctuation, moses_tokenize); did you mean 'lowercase'?"
    )
    with pytest.raises(UserError) as e:
        parse_steps(["lowercase", "lowercase"], registry())
    assert str(e.value) == "lowercase appears more than once in ['lowercase', 'lowercase']; each step runs once"
    with pytest.raises(UserError) as e:
        parse_steps(["moses_tokenize", "lowercase"], registry())
    assert str(e.value) == (
        "lowercase comes after moses_tokenize in ['moses_tokenize', 'lowercase']; tokenize last, as Moses' scripts do "
        "(lowercase, normalize_punctuation, moses_tokenize)"
    )


def test_a_bad_step_in_yaml_is_a_message_at_its_key(tmp_path, capsys):
    assert main(["validate", str(EXPERIMENTS / "demo.yaml"), "data.pipeline=[lowercase,moses_tokenise]"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "  data.pipeline[1]: type 'moses_tokenise' is not one of lowercase, normalize_punctuation, moses_tokenize; "
        "did you mean 'moses_tokenize'?"
    )


def test_processed_files_are_cached_by_content_and_steps(tmp_path):
    raw = tmp_path / "train.en"
    raw.write_text('Hello, World!\nA "quote".\n')
    lower = processed_file(raw, TextPipeline([LowercaseStep()], "en", registry()), tmp_path / "cache")
    assert lower.read_text() == 'hello, world!\na "quote".\n'
    stamp = lower.stat().st_mtime_ns
    assert processed_file(raw, TextPipeline([LowercaseStep()], "en", registry()), tmp_path / "cache") == lower
    assert lower.stat().st_mtime_ns == stamp  # read from the cache, not written again
    moses = processed_file(raw, TextPipeline(LITERATURE, "en", registry()), tmp_path / "cache")
    # English punctuation normalising puts the period inside the quotes
    assert moses != lower and moses.read_text() == "hello , world !\na &quot; quote . &quot;\n"
    raw.write_text("Other text.\n")
    assert (
        processed_file(raw, TextPipeline([LowercaseStep()], "en", registry()), tmp_path / "cache").read_text() == "other text.\n"
    )


def test_a_corpus_tokenized_already_is_refused(tmp_path):
    tokenized = tmp_path / "train.en"
    tokenized.write_text("a man &apos;s hat\nthe &quot; sign &quot;\n")
    with pytest.raises(UserError) as e:
        check_not_tokenized(tuple(LITERATURE), tokenized, tmp_path)
    assert str(e.value) == (
        f"data.pipeline: {tokenized} looks tokenized already (line 1 holds '&apos;', which Moses' tokenizer writes), "
        "and moses_tokenize would tokenize it again; point data.dir at the raw, untokenized corpus (aiayn data writes it)"
    )
    assert check_not_tokenized((LowercaseStep(),), tokenized, tmp_path) is False  # lowercasing it again is harmless
    raw = tmp_path / "raw.en"
    raw.write_text("Tools &amp; Fasteners\n")  # web text holds &amp; (Multi30k's raw English does)
    assert check_not_tokenized(tuple(LITERATURE), raw, tmp_path) is False


def test_a_corpus_that_aiayn_data_processed_is_read_as_it_is_or_refused(tmp_path):
    (tmp_path / "prepared.json").write_text(json.dumps({"pipeline": [s.model_dump(mode="json") for s in LITERATURE]}))
    train = tmp_path / "train.en"
    train.write_text("a man &apos;s hat\n")
    assert check_not_tokenized(tuple(LITERATURE), train, tmp_path) is True
    with pytest.raises(UserError) as e:
        check_not_tokenized((LowercaseStep(),), train, tmp_path)
    assert str(e.value) == (
        f"data.pipeline: {tmp_path} holds text that `aiayn data` processed with ['lowercase', 'normalize_punctuation', "
        "'moses_tokenize'] (prepared.json), and data.pipeline is ['lowercase']; set data.pipeline to ['lowercase', "
        "'normalize_punctuation', 'moses_tokenize'] to train on it as it is, or point data.dir at the raw corpus"
    )
    with pytest.raises(UserError, match=re.escape("and data.pipeline is []; set data.pipeline to")):
        check_not_tokenized((), train, tmp_path)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("", "cannot be read as JSON (Expecting value: line 1 column 1 (char 0))"),
        ('{"pipeline": [{"type": "lowerc', "cannot be read as JSON (Unterminated string starting at: line 1 column 24 (char 23))"),
        ("[1, 2]", "is not what `aiayn data` writes (it is not a JSON object)"),
        ('{"pipeline": "lowercase"}', "is not what `aiayn data` writes (its pipeline is not a list of steps, each an object with a type)"),
        ('{"pipeline": ["lowercase"]}', "is not what `aiayn data` writes (its pipeline is not a list of steps, each an object with a type)"),
        ('{"pipeline": [{"lowercase": true}]}', "is not what `aiayn data` writes (its pipeline is not a list of steps, each an object with a type)"),
    ],
)  # fmt: skip
def test_a_prepared_json_in_another_shape_is_named_not_guessed(tmp_path, content, why):
    """Read as "no pipeline", a damaged record would have the text processed a second time."""
    (tmp_path / "prepared.json").write_text(content)
    train = tmp_path / "train.en"
    train.write_text("a man &apos;s hat\n")
    with pytest.raises(UserError) as e:
        check_not_tokenized(tuple(LITERATURE), train, tmp_path)
    assert str(e.value) == (
        f"{tmp_path / 'prepared.json'} {why}; write the corpus again with `aiayn data`, or delete prepared.json if the text "
        f"in {tmp_path} is raw"
    )
    (tmp_path / "prepared.json").write_text('{"corpus": "multi30k", "pipeline": []}')  # written without a pipeline: raw text
    with pytest.raises(UserError, match="looks tokenized already"):
        check_not_tokenized(tuple(LITERATURE), train, tmp_path)


TEXT = ["low lower lowest", "new newer newest", "wide wider widest", "the lowest and the newest"] * 3


def test_bpe_by_merges_learns_exactly_that_many():
    for merges in (1, 5, 12):
        tokenizer = train_tokenizer(TEXT, 0, merges=merges)  # vocab_size is not read
        assert tokenizer.merges == merges
        # the characters (a space is "▁"), one new type per merge here, and the specials
        assert tokenizer.vocab_size == len(alphabet(tokenizer.hf, TEXT)) + merges + len(SPECIALS)
    assert len(alphabet(train_tokenizer(TEXT, 0, merges=1).hf, TEXT)) == len(set("".join(TEXT)) - {" "}) + 1
    # the same from a one-pass iterator (read twice inside)
    assert train_tokenizer(iter(TEXT), 0, merges=5) == train_tokenizer(TEXT, 0, merges=5)
    # fewer where pairs run out of min_frequency
    assert train_tokenizer(["ab cd"], 0, merges=50, min_frequency=2).merges == 0


def test_the_model_vocabulary_must_be_what_the_merges_gave():
    tokenizer = train_tokenizer(TEXT, 0, merges=5)
    size = tokenizer.vocab_size
    check_vocabulary(size, tokenizer, tokenizer, where="", fix="", merges=5)
    with pytest.raises(UserError) as e:
        check_vocabulary(size + 3, tokenizer, tokenizer, where="", fix="", merges=5)
    assert str(e.value) == (
        f"data.tokenizer.merges (5) gave the source a dictionary of {size} (5 merges, {size - 4} types + 4 specials) but "
        f"the model's vocabulary has {size + 3}; set dims.vocab_size (or model.embedding.vocab_size) to {size}"
    )
    # a vocabulary below the alphabet: no merge fits
    small = train_tokenizer(TEXT, 10)
    with pytest.raises(UserError) as e:
        check_vocabulary(10, small, small, where="", fix="raise it")
    assert str(e.value) == (
        f"the source tokenizer has {small.vocab_size} entries (no merge fits: 10 is below the text's alphabet) but the "
        "model's vocabulary has 10; raise it"
    )
