"""An opus-mt folder (two SentencePiece models over one vocab.json, MarianTokenizer's files) read as
an aiayn model: ids equal MarianTokenizer's, log-probabilities and greedy and beam outputs equal
MarianMTModel.generate's; then the round trip from outside: aiayn translate equal to generate() on 20
of 20 sentences, 5 steps of init_from fine-tuning with the shipped recipe (the model taken from the
folder), export to Hugging Face, and transformers translating as the run does, 20 of 20."""

import io
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

import aiayn
from aiayn.builder.cli import main
from aiayn.builder.data.demo import generate_demo
from aiayn.builder.data.spm import SentencePieceTokenizer
from aiayn.builder.decode.checkpoint import load_for_inference
from aiayn.builder.decode.load import load_run
from aiayn.builder.decode.translate import padded, token_rules, translate_ids, with_source_eos
from aiayn.builder.errors import UserError
from aiayn.schemas.decode import DecodeSpec
from tests.builder.formats.opus_mt import opus_mt_folder
from tests.conftest import EXPERIMENTS

transformers = pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")

EN, DE = generate_demo(40, 1, 1, 11)["train"]
SENTENCES = EN[:20]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return opus_mt_folder(tmp_path_factory.mktemp("opus") / "opus-mt-en-de", max_length=16)  # published, but 16: limits reached


def to_marian(loaded, tok) -> torch.Tensor:
    """aiayn id -> Marian id, through the pieces (aiayn's <s> is the decoder's start, Marian's pad)."""
    ids = [tok.pad_token_id if i == 1 else tok.convert_tokens_to_ids(p) for i, p in enumerate(loaded.src_tokenizer.tokens())]
    return torch.tensor(ids)


def test_ids_are_marian_tokenizers(folder):
    loaded = load_for_inference(folder)
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    assert type(tok).__name__ == "MarianTokenizer"
    src, tgt = loaded.src_tokenizer, loaded.tgt_tokenizer
    assert isinstance(src, SentencePieceTokenizer) and src is not tgt and src.same_ids(tgt)
    marian = to_marian(loaded, tok)
    odd = ["", ">>de<< she bought three books", "Ωmega seven", "  two  spaces "]
    for text in [*SENTENCES, *odd]:  # MarianTokenizer ends the source with </s>; aiayn's model adds it
        assert marian[src.encode(text)].tolist() + [tok.eos_token_id] == tok(text).input_ids, text
    for text in [*DE[:20], *odd]:
        assert marian[tgt.encode(text)].tolist() + [tok.eos_token_id] == tok(text_target=text).input_ids, text
        assert tgt.decode(tgt.encode(text)) == tok.decode(tok(text_target=text).input_ids, skip_special_tokens=True)
    assert loaded.spec.model.source_eos and loaded.spec.model.embedding.share == "all"


def test_log_probabilities_and_outputs_are_generates(folder):
    loaded = load_for_inference(folder)
    hf = transformers.MarianMTModel.from_pretrained(folder).eval()
    marian = to_marian(loaded, transformers.AutoTokenizer.from_pretrained(folder))
    sources = loaded.src_tokenizer.encode_batch(SENTENCES)
    x = padded(with_source_eos(loaded.model, sources), 0)
    y = padded([[1, *loaded.tgt_tokenizer.encode(t)] for t in DE[:20]], 0)
    with torch.no_grad():
        ours = loaded.model(x, y).log_softmax(-1)
        theirs = hf(input_ids=marian[x], attention_mask=x.ne(0), decoder_input_ids=marian[y]).logits.log_softmax(-1)
    torch.testing.assert_close(ours[..., 1:], theirs[..., marian[1:]], atol=2e-5, rtol=1e-5)
    for beam, count in (
        (1, 20),
        (4, 6),
    ):  # the folder's token rules (forbidden <pad>, renormalised, </s> at the limit), aiayn's limit
        decode = loaded.spec.decode.model_copy(update={"beam": beam, "max_len_a": 1.0, "max_len_b": 8, "early_stopping": True})
        rules = token_rules(decode, loaded.tgt_tokenizer)
        for src, hyp in zip(
            with_source_eos(loaded.model, sources[:count]),
            translate_ids(loaded.model, sources[:count], decode, bos_id=1, eos_id=2, rules=rules),
        ):
            out = hf.generate(input_ids=marian[torch.tensor(src)][None], num_beams=beam, length_penalty=1.0, early_stopping=True,
                              do_sample=False, max_length=1 + len(src) + 8)[0].tolist()[1:]  # fmt: skip
            assert marian[torch.tensor(hyp, dtype=torch.long)].tolist() == (out[: out.index(0)] if 0 in out else out), (
                f"beam {beam}"
            )


def test_the_folders_generation_settings_decode_as_generate_does(folder):
    """The folder's generation_config.json (a published opus-mt one: 4 beams, early_stopping
    false, <pad> forbidden, logits renormalised, </s> forced at max_length) is the decode section;
    aiayn's 4-best lists equal generate()'s, scores included, where hypotheses reach the limit."""
    loaded = load_for_inference(folder)
    d = loaded.spec.decode
    assert (d.beam, d.alpha, d.length_penalty, d.max_len_a, d.max_len_b, d.early_stopping, d.forced_eos, d.suppress, d.renormalize) == (
        4, 1.0, "fairseq", 0.0, 15, False, True, ("<s>",), True
    )  # fmt: skip
    hf = transformers.MarianMTModel.from_pretrained(folder).eval()
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    marian = to_marian(loaded, tok)
    ours = load_run(folder).translate(SENTENCES, n_best=4, with_scores=True)
    at_limit = 0
    for text, hyps in zip(SENTENCES, ours):
        out = hf.generate(
            **tok(text, return_tensors="pt"), num_return_sequences=4, output_scores=True, return_dict_in_generate=True
        )
        theirs = [seq[1:].tolist() for seq in out.sequences]
        for h, seq, score in zip(hyps, theirs, out.sequences_scores.tolist()):
            ids = [*marian[torch.tensor(h.ids, dtype=torch.long)].tolist(), tok.eos_token_id]
            assert ids == seq[: len(ids)] and set(seq[len(ids) :]) <= {tok.pad_token_id}, text
            assert h.score == pytest.approx(score, abs=1e-4), text
            at_limit += len(ids) == d.max_len_b
    assert at_limit >= 5  # the forced </s> decided those


def hf_translate(folder: Path, sentences: list[str], max_len_b: int | None = None) -> list[str]:
    """What a transformers user gets: AutoTokenizer + AutoModelForSeq2SeqLM, greedy, the folder's
    generation settings (`max_len_b`: aiayn's input-relative length limit instead of its max_length)."""
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    out = []
    for text in sentences:
        ids = tok(text, return_tensors="pt").input_ids
        limit = {} if max_len_b is None else {"max_length": 1 + ids.shape[1] + max_len_b}
        generated = model.generate(input_ids=ids, num_beams=1, do_sample=False, **limit)
        out.append(tok.decode(generated[0], skip_special_tokens=True))
    return out


def aiayn_translate(model: Path, monkeypatch, capsys) -> list[str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("\n".join(SENTENCES).encode() + b"\n"), encoding="utf-8"))
    assert main(["translate", str(model), "--beam", "1"]) == 0, capsys.readouterr().err
    return capsys.readouterr().out.splitlines()


def test_the_round_trip_from_outside(folder, tmp_path, monkeypatch, capsys):
    assert aiayn_translate(folder, monkeypatch, capsys) == hf_translate(folder, SENTENCES)  # 20 of 20, as the folder says
    data = tmp_path / "corpus"
    data.mkdir()
    for split, (en, de) in generate_demo(200, 20, 20, 5).items():
        (data / f"{split}.en").write_text("\n".join(en) + "\n", encoding="utf-8")
        (data / f"{split}.de").write_text("\n".join(de) + "\n", encoding="utf-8")
    monkeypatch.setenv("OPUS_MT", str(folder))
    monkeypatch.setenv("FINETUNE_DATA", str(data))
    recipe = str(EXPERIMENTS / "finetune-opus-mt.yaml")
    short = ["trainer.max_steps=5", "trainer.val_check_interval=null", "train.tokens_per_step=400", "trainer.accelerator=cpu",
             "train.lr_schedule.factor=1.0", "train.lr_schedule.warmup_steps=2", f"data.cache_dir={tmp_path / 'cache'}",
             "--runs", str(tmp_path / "runs")]  # fmt: skip
    assert main(["train", recipe, *short]) == 0, capsys.readouterr().err
    run = tmp_path / "runs" / "finetune-opus-mt" / "version_0"
    capsys.readouterr()
    assert main(["export", str(run), "--to", "huggingface", str(tmp_path / "hf")]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.startswith("exported ")
    assert sorted(p.name for p in (tmp_path / "hf").glob("*.spm")) == ["source.spm", "target.spm"]
    exported, tuned_run = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf"), load_for_inference(run)
    assert (tmp_path / "hf" / "target.spm").read_bytes() == tuned_run.tgt_tokenizer.model != tuned_run.src_tokenizer.model
    for text in DE[:20]:  # the labels of anyone fine-tuning the export: the run's target ids, </s> last
        assert exported(text_target=text).input_ids == [*tuned_run.tgt_tokenizer.encode(text), 2], text
    ours = aiayn_translate(run, monkeypatch, capsys)
    assert hf_translate(tmp_path / "hf", SENTENCES, load_for_inference(run).spec.decode.max_len_b) == ours  # 20 of 20
    tuned, start = load_for_inference(run).model.state_dict(), load_for_inference(folder).model.state_dict()
    assert any(not torch.equal(tuned[k], start[k]) for k in start)  # the 5 steps changed the weights


def test_ctranslate2_export_carries_the_sentencepiece_models(folder, tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    from aiayn.builder.export import export

    loaded = export(folder, "ctranslate2", tmp_path / "ct2")
    assert (tmp_path / "ct2" / "source.spm").read_bytes() == (folder / "source.spm").read_bytes()
    assert (tmp_path / "ct2" / "target.spm").read_bytes() == (folder / "target.spm").read_bytes()
    translator = ctranslate2.Translator(str(tmp_path / "ct2"))
    src, tgt = loaded.src_tokenizer, loaded.tgt_tokenizer
    sources = src.encode_batch(SENTENCES)
    decode = DecodeSpec(beam=1, alpha=1.0, length_penalty="fairseq", max_len_b=8)
    expected = translate_ids(loaded.model, sources, decode, bos_id=1, eos_id=2)
    for ids, hyp in zip(sources, expected):  # the source's </s> is CTranslate2's to add (add_source_eos)
        [result] = translator.translate_batch([[src.id_to_token(i) for i in ids]], beam_size=1, max_decoding_length=len(ids) + 1 + 8,
                                              min_decoding_length=0)  # fmt: skip
        assert result.hypotheses[0] == [tgt.id_to_token(i) for i in hyp]


def test_show_says_how_the_folder_tokenizes(folder, capsys):
    assert main(["show", str(folder), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    V = json.loads((folder / "vocab.json").read_text())
    sizes = [sentencepiece_size(folder / name) for name in ("source.spm", "target.spm")]
    assert info["tokenizer"] == (
        "separate sentencepiece tokenizers over one vocabulary (opus-mt's way); source: SentencePiece model of "
        f"{sizes[0]} pieces, numbered by a vocabulary of {len(V) + 1}; target: SentencePiece model of {sizes[1]} pieces, "
        f"numbered by a vocabulary of {len(V) + 1}"
    )
    assert main(["show", str(folder)]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"# {folder}, a Hugging Face Marian model as aiayn reads it\n") and "\ndata:" not in text


def sentencepiece_size(path: Path) -> int:
    import sentencepiece

    return sentencepiece.SentencePieceProcessor(model_file=str(path)).get_piece_size()


def damaged(folder: Path, tmp_path: Path, name: str, change) -> Path:
    copy = tmp_path / name.replace("/", "-")
    shutil.copytree(folder, copy)
    change(copy)
    return copy


def test_damaged_folders_are_messages(folder, tmp_path):
    V = json.loads((folder / "config.json").read_text())["vocab_size"]
    other = json.dumps({"</s>": 0, "<unk>": 1, **{f"x{i}": i for i in range(2, V - 1)}, "<pad>": V - 1})  # another model's pieces
    cases = {
        "truncated": (lambda f: (f / "source.spm").write_bytes((folder / "source.spm").read_bytes()[:500]),
                      "{f}/source.spm is not a SentencePiece model (it does not parse: truncated, or another kind of file)"),
        "garbage": (lambda f: (f / "target.spm").write_bytes(b"\x00\xff" * 64),
                    "{f}/target.spm is not a SentencePiece model (it does not parse: truncated, or another kind of file)"),
        "empty": (lambda f: (f / "target.spm").write_bytes(b""), "{f}/target.spm is not a SentencePiece model (it is empty)"),
        "missing": (lambda f: (f / "target.spm").unlink(),
                    "{f}: opus-mt's tokenizer is source.spm, target.spm, vocab.json, and target.spm is missing"),
        "other-vocab": (lambda f: (f / "vocab.json").write_text(other),
                        "{f}/source.spm: only 0 of its 101 pieces are in vocab.json, which numbers the pieces of source.spm and "
                        "target.spm; the files come from different models"),
        "vocab-list": (lambda f: (f / "vocab.json").write_text("[1, 2]"),
                       "{f}/vocab.json is not a JSON object of piece -> id (integers); it is the vocabulary of source.spm and target.spm"),
    }  # fmt: skip
    for name, (change, message) in cases.items():
        bad = damaged(folder, tmp_path, name, change)
        with pytest.raises(UserError) as e:
            load_for_inference(bad)
        assert str(e.value) == message.format(f=bad), name


def test_the_sweep_of_three_ways_plans_on_the_folder(folder, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPUS_MT", str(folder))
    monkeypatch.setenv("FINETUNE_DATA", str(tmp_path))
    assert (
        main(["sweep", str(EXPERIMENTS / "finetune-opus-mt.sweep.yaml"), "--dry-run", "--runs", str(tmp_path / "runs")]) == 0
    ), capsys.readouterr().err
    out = capsys.readouterr().out
    params = load_for_inference(folder).model.state_dict()
    assert all(name in out for name in ("full", "frozen-encoder", "decoder-mqa")), out
    assert not (tmp_path / "runs").exists() and len(params) > 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"no_repeat_ngram_size": 3}, "no_repeat_ngram_size 3 changes what generate() outputs, and aiayn's search has no such "
         "setting; remove it from the file to decode without it"),
        ({"do_sample": True}, "do_sample true asks generate() to sample; aiayn's search is beam search: set it false"),
        ({"bad_words_ids": [[5, 6]]}, "bad_words_ids holds [5, 6], a sequence of tokens; aiayn's search can forbid single tokens only"),
        ({"forced_eos_token_id": 5}, "forced_eos_token_id 5 is not </s> (0); aiayn can end a hypothesis with </s> only"),
        ({"early_stopping": "never"}, "early_stopping 'never': aiayn's search stops at the beam's finished hypotheses (true) or "
         "goes on as generate() does by default (false); set one of them"),
        ({"max_length": 1}, "max_length must be a whole number from 2, got 1"),
        ({"num_beams": 2.0}, "num_beams must be a whole number from 1, got 2.0"),
        ({"length_penalty": "1.0"}, 'length_penalty must be a finite number, got "1.0"'),
        ({"length_penalty": float("nan")}, "length_penalty must be a finite number, got NaN"),
        ({"forced_eos_token_id": False}, "forced_eos_token_id must be a token id (a whole number from 0), got false"),
        ({"eos_token_id": [True]}, "eos_token_id must be a token id (a whole number from 0), got true"),
        ({"decoder_start_token_id": "0"}, 'decoder_start_token_id must be a token id (a whole number from 0), got "0"'),
        ({"renormalize_logits": "no"}, 'renormalize_logits must be true or false, got "no"'),
        ({"suppress_tokens": [True]}, "suppress_tokens must be a token id (a whole number from 0), got true"),
        ({"suppress_tokens": 3}, "transformers cannot read it ('int' object is not iterable); mend it, or delete it"),  # was blamed on the weights
        ({"bad_words_ids": 5}, "bad_words_ids must be a list of lists of token ids, got 5"),
        ({"bad_words_ids": [5]}, "bad_words_ids must be a list of lists of token ids, got [5]"),
        ({"bad_words_ids": [[-1]]}, "bad_words_ids must be a token id (a whole number from 0), got -1"),
        ({"suppress_tokens": "3"}, 'suppress_tokens must be a list of token ids, got "3"'),
    ],
)  # fmt: skip
def test_a_generation_setting_aiayn_has_not_is_refused_by_name(folder, tmp_path, change, message):
    def edit(copy: Path) -> None:
        path = copy / "generation_config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **change}))

    bad = damaged(folder, tmp_path, "gen", edit)
    with pytest.raises(UserError) as e:
        load_for_inference(bad)
    assert str(e.value) == f"{bad / 'generation_config.json'}: {message}"


def test_marian_folders_ensemble(folder, tmp_path):
    # opus-mt folders of one tokenizer (another seed's weights): an ensemble, which is neither;
    # the folder with itself is the folder
    other = opus_mt_folder(tmp_path / "opus-mt-en-de-2", seed=1, max_length=16)
    lines = ["she bought three books", "two men sold seven cars"]
    alone = aiayn.load_run(folder, device="cpu").translate(lines, n_best=2, with_scores=True)
    twice = aiayn.load_run([folder, folder], device="cpu").translate(lines, n_best=2, with_scores=True)
    assert [[t.text for t in g] for g in twice] == [[t.text for t in g] for g in alone]
    assert [t.score for g in twice for t in g] == pytest.approx([t.score for g in alone for t in g], abs=1e-5)
    both = aiayn.load_ensemble([folder, other], device="cpu")
    assert both.what.startswith("an ensemble of 2: ")
    scores = [[t.score for t in g] for g in both.translate(lines, n_best=2, with_scores=True)]
    assert scores != [[t.score for t in g] for g in alone]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda path: path.mkdir(), "{p} is a folder, not the file of generation settings; remove it to decode with config.json's"),
        (lambda path: path.symlink_to(path), "{p}: a symbolic link on the way to it leads back to itself (a loop); point it at a real file or folder, or remove it"),
        (lambda path: path.symlink_to(path.parent / "gone.json"), "{p} is a link to nothing (No such file or directory); point it at the folder's generation settings, or remove it"),
    ],
)  # fmt: skip
def test_a_generation_config_that_is_no_file_is_named(folder, tmp_path, make, message):
    """transformers would decode such a folder with config.json's settings, unlike generate() on the
    folder the user meant: refused, not ignored."""

    def edit(copy: Path) -> None:
        (copy / "generation_config.json").unlink()
        make(copy / "generation_config.json")

    bad = damaged(folder, tmp_path, "gen", edit)
    with pytest.raises(UserError) as e:
        load_for_inference(bad)
    assert str(e.value) == message.format(p=bad / "generation_config.json")
