"""builder.data.tokenizer: BPE training, exact round trips, special ids, save/load."""

import unicodedata

import pytest

from aiayn.builder.data.bpe import train_tokenizer
from aiayn.builder.data.corpus import read_lines
from aiayn.builder.data.demo import generate_demo
from aiayn.builder.data.tokenizer import Tokenizer, load_run_tokenizers, training_sample
from aiayn.builder.errors import UserError
from aiayn.builder.run.rundir import RunDir
from tests.conftest import SHARED_DATA, registry

MULTI30K = SHARED_DATA / "multi30k"


@pytest.fixture(scope="module")
def demo():
    return generate_demo(3000, 200, 200, seed=7)


@pytest.fixture(scope="module")
def demo_tokenizer(demo):
    en, de = demo["train"]
    return train_tokenizer(en + de, 500)


def test_special_ids(demo_tokenizer):
    tok = demo_tokenizer
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id) == (0, 1, 2, 3)
    assert [tok.hf.id_to_token(i) for i in range(4)] == ["<pad>", "<s>", "</s>", "<unk>"]


def test_encode_adds_no_specials_and_decode_skips_them(demo_tokenizer):
    tok = demo_tokenizer
    ids = tok.encode("sie kaufte drei Bücher")
    assert ids and not set(ids) & {0, 1, 2, 3}
    assert tok.decode([1, *ids, 2, 0, 0]) == "sie kaufte drei Bücher"
    assert tok.encode_batch(["sie kaufte drei Bücher", ""]) == [ids, []]


def test_round_trip_on_held_out_demo_sentences(demo_tokenizer, demo):
    tok = demo_tokenizer
    lines = demo["test"][0] + demo["test"][1]
    assert [tok.decode(tok.encode(s)) for s in lines] == lines
    assert tok.decode_batch(tok.encode_batch(lines)) == lines


def test_vocab_size_is_the_actual_size(demo_tokenizer, demo):
    assert demo_tokenizer.vocab_size == 500
    en, de = demo["train"]
    small = train_tokenizer(en + de, 100_000)  # the corpus runs out of merges long before
    assert 500 < small.vocab_size < 100_000
    assert small.vocab_size == len(small.hf.get_vocab())


def test_deterministic(demo):
    en, de = demo["train"]
    assert train_tokenizer(en + de, 300).to_json() == train_tokenizer(en + de, 300).to_json()


def test_separate_vocabularies_are_two_tokenizers(demo):
    en, de = demo["train"]
    src, tgt = train_tokenizer(en, 300), train_tokenizer(de, 300)
    assert "Bücher" not in "".join(src.hf.get_vocab())
    assert tgt.decode(tgt.encode("ich weiß, dass er sieben Autos verkaufte")) == ("ich weiß, dass er sieben Autos verkaufte")


def test_unknown_characters_become_unk(demo_tokenizer):
    assert demo_tokenizer.encode("€")[-1] == demo_tokenizer.unk_id


def test_save_load_identity(demo_tokenizer, tmp_path):
    path = tmp_path / "run" / "tokenizer.json"
    demo_tokenizer.save(path)
    loaded = Tokenizer.load(path, registry())
    assert loaded == demo_tokenizer
    assert loaded.to_json() == demo_tokenizer.to_json()
    s = "gestern malten die Kinder fünfhundertsiebenundzwanzig Stühle"
    assert loaded.encode(s) == demo_tokenizer.encode(s)
    assert [p.name for p in path.parent.iterdir()] == ["tokenizer.json"]  # no temp file left


def test_load_missing(tmp_path):
    with pytest.raises(UserError) as e:
        Tokenizer.load(tmp_path / "tokenizer.json", registry())
    assert str(e.value) == f"tokenizer file not found: {tmp_path / 'tokenizer.json'}"


def test_load_corrupt(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text('{"version": "1.0", "model": ', encoding="utf-8")
    with pytest.raises(UserError) as e:
        Tokenizer.load(path, registry())
    assert str(e.value).startswith(f"{path} is not a valid tokenizer file (")
    assert str(e.value).endswith("); delete it to train a new one")


def test_load_foreign_tokenizer_without_our_specials(demo_tokenizer, tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(demo_tokenizer.to_json().replace('"<pad>"', '"[PAD]"'), encoding="utf-8")
    with pytest.raises(UserError) as e:
        Tokenizer.load(path, registry())
    assert str(e.value) == (f"{path}: special token '<pad>' must have id 0, found None; use a tokenizer trained by aiayn")


def test_vocab_size_too_small():
    with pytest.raises(UserError) as e:
        train_tokenizer(["a b"], 4)
    assert str(e.value).startswith("vocab_size (4) must be larger than the 4 special tokens <pad>, <s>,")


def test_no_text():
    with pytest.raises(UserError) as e:
        train_tokenizer(iter([]), 100)
    assert str(e.value) == "cannot train a tokenizer on no text: the training corpus is empty"


def test_training_sample_only_above_the_limit():
    assert training_sample(10, None) is None and training_sample(10, 10) is None
    assert training_sample(10, 4).tolist() == [2, 4, 5, 7]  # a fixed seed, in file order
    assert training_sample(10, 9).tolist() == training_sample(10, 9).tolist()
    with pytest.raises(UserError) as e:
        training_sample(10, 0)
    assert str(e.value) == "tokenizer train_sample_pairs must be at least 1 or null, got 0"


def test_run_directory_layout(demo_tokenizer, tmp_path):
    with pytest.raises(UserError, match="no tokenizer in .*: expected tokenizer.json"):
        load_run_tokenizers(RunDir(tmp_path), registry())
    src_file, tgt_file = RunDir(tmp_path).tokenizer_files(joint=False)
    assert (src_file.name, tgt_file.name) == ("tokenizer.src.json", "tokenizer.tgt.json")
    demo_tokenizer.save(src_file)
    with pytest.raises(UserError, match="tokenizer file not found: .*tokenizer.tgt.json"):
        load_run_tokenizers(RunDir(tmp_path), registry())
    demo_tokenizer.save(tgt_file)
    src, tgt = load_run_tokenizers(RunDir(tmp_path), registry())
    assert src == tgt == demo_tokenizer and src is not tgt
    shared, _ = RunDir(tmp_path).tokenizer_files(joint=True)
    demo_tokenizer.save(shared)
    src, tgt = load_run_tokenizers(RunDir(tmp_path), registry())
    assert src is tgt


@pytest.fixture(scope="module")
def multi30k_tokenizer():
    if not (MULTI30K / "train.en").is_file():
        pytest.skip(f"the real Multi30k data is not at {MULTI30K} (see shared/data/README.md)")
    lines = read_lines(MULTI30K / "train.en") + read_lines(MULTI30K / "train.de")
    return train_tokenizer(lines, 8000)


@pytest.mark.parametrize("name", ["valid.en", "valid.de"])
def test_round_trip_on_multi30k(multi30k_tokenizer, name):
    tok = multi30k_tokenizer
    lines = read_lines(MULTI30K / name)
    assert len(lines) == 1014
    decoded = tok.decode_batch(tok.encode_batch(lines))
    assert decoded == [unicodedata.normalize("NFKC", s) for s in lines]
    # exact for every line but those NFKC rewrites: one has "120\xa0cm" (a no-break space)
    changed = [s for s, d in zip(lines, decoded) if s != d]
    assert changed == ([] if name == "valid.en" else [s for s in lines if "120\xa0cm" in s])
    assert len(changed) == (0 if name == "valid.en" else 1)
    assert tok.vocab_size == 8000
