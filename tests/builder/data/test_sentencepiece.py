"""builder.data.spm and make_tokenizers: SentencePiece trained by aiayn (ids equal to the library's
own, as spm_encode gives them), the three layouts, tokenizers read from files, and the messages."""

import json
import subprocess
import sys

import pytest

from aiayn.builder.data.bpe import train_tokenizer
from aiayn.builder.data.datamodule import TranslationDataModule
from aiayn.builder.data.demo import generate_demo
from aiayn.builder.data.make_tokenizers import make_tokenizers, read_tokenizer_file
from aiayn.builder.data.spm import SentencePieceTokenizer, from_model_file
from aiayn.builder.data.tokenizer import SPECIALS, Tokenizer, layout
from aiayn.builder.errors import UserError
from aiayn.schemas.tokenizer import SentencePieceTokenizerSpec, TokenizerFileSpec
from tests.conftest import registry

pytest.importorskip("sentencepiece")
EN, DE = generate_demo(1500, 1, 1, seed=0)["train"]


def make(spec, *, shared_vocab=True, vocab_size=400):
    return make_tokenizers(spec, registry(), vocab_size=vocab_size, shared_vocab=shared_vocab, src=lambda: EN, tgt=lambda: DE)


@pytest.fixture(scope="module")
def joint() -> Tokenizer:
    return make(SentencePieceTokenizerSpec())[0]


def test_ids_are_the_librarys_own(joint, tmp_path):
    assert isinstance(joint, SentencePieceTokenizer) and joint.tokens()[:4] == list(SPECIALS)
    model = tmp_path / "m.model"
    model.write_bytes(joint.model)
    script = f"import sentencepiece as s; p = s.SentencePieceProcessor(model_file={str(model)!r}); print(p.encode({EN[:5]!r}))"
    assert json.loads(
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    ) == joint.encode_batch(EN[:5])
    assert all(joint.decode(joint.encode(s)) == s for s in EN[:300] + DE[:300])  # character_coverage 1.0: every letter kept
    assert (
        200 < joint.vocab_size <= 400 and Tokenizer.load(_saved(joint, tmp_path), registry()) == joint
    )  # fewer where the text runs out
    assert make(SentencePieceTokenizerSpec())[0] == joint  # deterministic
    assert make(SentencePieceTokenizerSpec(model_type="bpe"))[0].encode(EN[0]) != joint.encode(EN[0])


def _saved(tokenizer: Tokenizer, tmp_path):
    path = tmp_path / "tokenizer.json"
    tokenizer.save(path)
    return path


def test_layouts():
    s, t, said = make(SentencePieceTokenizerSpec(joint=False))
    assert s is not t and s.same_ids(t) and s.vocab_size <= 400  # two models of 200 pieces, their union numbered once
    assert said.endswith("separate sentencepiece tokenizers over one vocabulary (opus-mt's way), " + f"{s.vocab_size} ids")
    assert t.decode(t.encode(DE[3])) == DE[3] and s.encode(EN[3]) == s.sp.encode(EN[3])  # the source's ids are its model's
    s, t, _ = make(SentencePieceTokenizerSpec(), shared_vocab=False)
    assert not s.same_ids(t) and layout(s, t) == "separate sentencepiece tokenizers and vocabularies"
    with pytest.raises(UserError) as e:
        make(SentencePieceTokenizerSpec(joint=True), shared_vocab=False)
    assert str(e.value) == (
        "data.tokenizer.joint: true trains one model for both sides, but model.embedding.shared_vocab is false (an id "
        "space a side); set joint: false, or shared_vocab: true"
    )


def test_read_from_files(joint, tmp_path):
    (tmp_path / "joint.model").write_bytes(joint.model)
    bpe = train_tokenizer(EN + DE, 300)
    bpe.save(tmp_path / "bpe.json")
    src, tgt, _ = make(TokenizerFileSpec(path=str(tmp_path / "joint.model")))
    assert src is tgt and src.encode(EN[1]) == joint.encode(EN[1])
    assert read_tokenizer_file(tmp_path / "bpe.json", "data.tokenizer.path", registry()) == bpe
    with pytest.raises(UserError) as e:
        make(TokenizerFileSpec(path=str(tmp_path / "joint.model"), target_path=str(tmp_path / "bpe.json")))
    assert "number their tokens differently, and model.embedding.shared_vocab is true" in str(e.value)
    (tmp_path / "bad.model").write_bytes(joint.model[:300])
    with pytest.raises(UserError) as e:
        make(TokenizerFileSpec(path=str(tmp_path / "bad.model")))
    assert str(e.value) == (
        f"data.tokenizer.path: {tmp_path / 'bad.model'} is not a SentencePiece model (it does not parse: truncated, or another "
        "kind of file); nor is it a tokenizer.json"
    )
    with pytest.raises(UserError) as e:
        make(TokenizerFileSpec(path=str(tmp_path / "none.model")))
    assert str(e.value) == (
        f"data.tokenizer.path: {tmp_path / 'none.model'} does not exist; give a tokenizer.json or a SentencePiece model (.model, .spm)"
    )


def test_a_model_of_other_ids_is_renumbered(tmp_path):
    import io

    import sentencepiece

    out = io.BytesIO()  # spm_train's defaults: <unk> 0, <s> 1, </s> 2, no <pad>
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(EN), model_writer=out, vocab_size=100, minloglevel=2, hard_vocab_limit=False
    )
    (tmp_path / "default.model").write_bytes(out.getvalue())
    tokenizer = from_model_file(tmp_path / "default.model")
    sp = sentencepiece.SentencePieceProcessor(model_proto=out.getvalue())
    assert tokenizer.tokens()[:5] == [*SPECIALS, sp.id_to_piece(3)] and tokenizer.vocab_size == sp.get_piece_size() + 1
    assert [tokenizer.id_to_token(i) for i in tokenizer.encode(EN[2])] == sp.encode(EN[2], out_type=str)


def test_the_datamodule_saves_one_file_a_side(tmp_path):
    dm = TranslationDataModule(registry=registry(), run_dir=tmp_path / "run", demo=(300, 20, 20), vocab_size=300, max_tokens=200,
                               tokenizer=SentencePieceTokenizerSpec(joint=False))  # fmt: skip
    src, tgt = dm.prepare_tokenizers()
    assert sorted(p.name for p in (tmp_path / "run").glob("tokenizer*.json")) == ["tokenizer.src.json", "tokenizer.tgt.json"]
    again = TranslationDataModule(
        registry=registry(), run_dir=tmp_path / "run", demo=(300, 20, 20), vocab_size=300, max_tokens=200
    )
    assert again.prepare_tokenizers() == (src, tgt)  # a resumed run reads them back, whatever its data.tokenizer says
