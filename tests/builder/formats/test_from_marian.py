"""A Hugging Face Marian folder read as an aiayn model (builder/formats/from_marian.py): a MarianMTModel
made here with random weights (no download) and a `tokenizers` tokenizer in Marian's id layout (eos 0,
pad last, the decoder starting from pad, </s> after each source), read in; then log-probabilities,
greedy and beam outputs equal transformers' token for token, `aiayn translate` reads the folder, and
aiayn's export of it is the original, renumbered. What aiayn cannot hold is refused by name."""

import io
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
import yaml

from aiayn.builder.cli import main
from aiayn.builder.data.demo import generate_demo
from aiayn.builder.decode.checkpoint import load_for_inference
from aiayn.builder.decode.translate import padded, translate_ids, with_source_eos
from aiayn.builder.errors import UserError
from aiayn.builder.formats.from_marian import NO_PROBABILITY
from aiayn.builder.run.config import config_hash
from aiayn.schemas.decode import DecodeSpec
from tests.builder.formats.opus_mt import random_marian
from tests.builder.train.test_training import DEMO, tiny

transformers = pytest.importorskip("transformers")


def marian_folder(folder: Path, **config) -> Path:
    """A MarianMTModel as opus-mt lays it out (SiLU, scaled embeddings, one shared table, an
    output bias), every weight random, with a BPE tokenizer.json whose ids are Marian's."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from tokenizers.processors import TemplateProcessing

    en, de = generate_demo(400, 1, 1, 3)["train"]
    tok = Tokenizer(models.BPE(unk_token="<unk>", end_of_word_suffix="</w>"))
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.Whitespace(), decoders.BPEDecoder(suffix="</w>")
    tok.train_from_iterator(
        en + de, trainers.BpeTrainer(vocab_size=120, special_tokens=["</s>", "<unk>"], end_of_word_suffix="</w>")
    )
    tok.add_special_tokens(["<pad>"])  # the last id, as in opus-mt
    tok.post_processor = TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 0)])
    V = tok.get_vocab_size()
    settings = dict(
        vocab_size=V, decoder_vocab_size=V, d_model=16, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=24, activation_function="swish", scale_embedding=True,
        pad_token_id=V - 1, eos_token_id=0, decoder_start_token_id=V - 1, max_position_embeddings=128, forced_eos_token_id=None,
    )  # fmt: skip
    random_marian(transformers.MarianMTModel(transformers.MarianConfig(**{**settings, **config}))).save_pretrained(folder)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", unk_token="<unk>", pad_token="<pad>")
    fast.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return marian_folder(tmp_path_factory.mktemp("marian") / "opus-like")


def marian_ids(loaded) -> torch.Tensor:
    """aiayn id -> Marian id: the importer's order, read back from the two tokenizers."""
    hf_tok = transformers.AutoTokenizer.from_pretrained(loaded.checkpoint)
    vocab = loaded.src_tokenizer.hf.get_vocab()
    order = {i: hf_tok.convert_tokens_to_ids(t) for t, i in vocab.items() if t != "<s>"}
    order[1] = hf_tok.pad_token_id  # aiayn's <s>: the decoder's start, Marian's pad
    return torch.tensor([order[i] for i in range(len(order))])


def test_a_marian_model_reads_in_with_its_log_probabilities_and_outputs(folder):
    loaded = load_for_inference(folder)
    hf = transformers.MarianMTModel.from_pretrained(folder).eval()
    model = loaded.spec.model
    assert (model.d_model, model.encoder.num_layers, model.decoder.num_layers, model.source_eos) == (16, 2, 1, True)
    assert (model.embedding.vocab_size, model.embedding.share, model.encoder.layer[1].activation) == (
        hf.config.vocab_size + 1,
        "all",
        "silu",
    )
    to_marian = marian_ids(loaded)
    en = generate_demo(8, 1, 1, 11)["train"][0]
    sources = [s[:6] for s in loaded.src_tokenizer.encode_batch(en)]
    x = padded(with_source_eos(loaded.model, sources), 0)
    y = padded([[1, 5, 9, 7, 30]] * len(sources), 0)
    with torch.no_grad():
        ours = loaded.model(x, y).log_softmax(-1)
        theirs = hf(input_ids=to_marian[x], attention_mask=x.ne(0), decoder_input_ids=to_marian[y]).logits.log_softmax(-1)
    torch.testing.assert_close(ours[..., 1:], theirs[..., to_marian[1:]], atol=2e-5, rtol=1e-5)  # every Marian id, once
    assert ours[..., 0].max() < -1000  # aiayn's <pad>, a copy of <s>'s row: no probability
    for beam in (1, 4):
        decode = DecodeSpec(beam=beam, alpha=1.0, length_penalty="fairseq", max_len_b=5)
        ours_out = translate_ids(loaded.model, sources, decode, bos_id=1, eos_id=2)
        for src, hyp in zip(with_source_eos(loaded.model, sources), ours_out):
            ids = to_marian[torch.tensor(src)][None]
            out = hf.generate(input_ids=ids, num_beams=beam, length_penalty=1.0, early_stopping=True, do_sample=False,
                              max_length=1 + len(src) + 5)[0].tolist()[1:]  # fmt: skip
            assert to_marian[torch.tensor(hyp, dtype=torch.long)].tolist() == (out[: out.index(0)] if 0 in out else out), (
                f"beam {beam}"
            )


def test_translate_reads_the_folder(folder, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"one two three\nfour\n"), encoding="utf-8"))
    assert main(["translate", str(folder), "--beam", "1"]) == 0
    out = capsys.readouterr()
    loaded = load_for_inference(folder)
    decode = DecodeSpec(beam=1, max_len_b=loaded.spec.decode.max_len_b)
    ids = translate_ids(loaded.model, loaded.src_tokenizer.encode_batch(["one two three", "four"]), decode, bos_id=1, eos_id=2)
    assert out.out.splitlines() == loaded.tgt_tokenizer.decode_batch(ids)
    assert "a Hugging Face Marian model" in out.err
    assert main(["evaluate", str(folder)]) == 2
    assert capsys.readouterr().err == (
        f"aiayn evaluate: error: {folder} is a Hugging Face Marian model, which has no data splits: give --src and --ref\n"
    )


def test_the_export_of_an_imported_model_is_the_original_renumbered(folder, tmp_path):
    from aiayn.builder.export import export

    loaded = export(folder, "huggingface", tmp_path / "back")
    original = transformers.MarianMTModel.from_pretrained(folder).state_dict()
    back = transformers.MarianMTModel.from_pretrained(tmp_path / "back").state_dict()
    to_marian = marian_ids(loaded)
    vocab = {"model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"}
    for name, value in original.items():
        if name in vocab:
            torch.testing.assert_close(back[name], value[to_marian], atol=0, rtol=0, msg=name)
        elif name == "final_logits_bias":
            torch.testing.assert_close(back[name][0, 1:], value[0, to_marian[1:]], atol=0, rtol=0)
            assert back[name][0, 0] == NO_PROBABILITY
        elif "embed_positions" not in name:  # sinusoids: aiayn's table, as many rows as it decodes
            torch.testing.assert_close(back[name], value, atol=0, rtol=0, msg=name)


def test_what_aiayn_cannot_hold_is_refused_by_name(folder, tmp_path):
    spm = tmp_path / "spm"
    shutil.copytree(folder, spm)
    (spm / "tokenizer.json").unlink()
    (spm / "source.spm").write_bytes(b"")
    with pytest.raises(UserError) as e:
        load_for_inference(spm)
    assert (
        str(e.value)
        == f"{spm}: opus-mt's tokenizer is source.spm, target.spm, vocab.json, and target.spm and vocab.json are missing"
    )
    for key, value, message in [
        ("activation_function", "tanh", "activation_function 'tanh'; aiayn has gelu, gelu_new, relu, silu, swish"),
        ("decoder_vocab_size", 50, "separate source and target vocabularies (vocab_size 121, decoder_vocab_size 50); aiayn reads Marian models with one vocabulary"),
    ]:  # fmt: skip
        bad = tmp_path / key
        shutil.copytree(folder, bad)
        config = json.loads((bad / "config.json").read_text())
        (bad / "config.json").write_text(json.dumps({**config, key: value}))
        with pytest.raises(UserError) as e:
            load_for_inference(bad)
        assert str(e.value) == f"{bad}: {message}"


def test_a_run_starts_from_a_marian_model_with_its_experiments_model(folder, tmp_path, capsys):
    loaded = load_for_inference(folder)
    assert main(["show", str(folder)]) == 0  # the experiment the folder is read as: its model section is what a run takes
    shown = yaml.safe_load(capsys.readouterr().out.split("\n\n")[0])
    assert shown["model"] == loaded.spec.model.model_dump(mode="json")
    experiment = tmp_path / "ft.yaml"
    experiment.write_text(
        yaml.safe_dump({"extends": DEMO, "name": "marian-ft", "model": shown["model"], "init_from": str(folder)})
    )
    args = tiny(tmp_path, "trainer.max_steps=2", "trainer.val_check_interval=null", "--runs", str(tmp_path / "runs"))
    assert main(["train", str(experiment), *args]) == 0, capsys.readouterr().err
    record = json.loads((tmp_path / "runs" / "marian-ft" / "version_0" / "results.json").read_text())["init_from"]
    assert record == {
        "path": str(folder), "checkpoint": str(folder.resolve()), "model": "a Hugging Face Marian model", "name": "opus-like",
        "config_hash": config_hash(loaded.spec), "step": None, "tokenizer": "source", "copied": len(loaded.model.state_dict()),
    }  # fmt: skip
