"""Hugging Face Marian folders damaged in every way a copy or a hand edit damages them: each is one
message that names the file (and the field), exit 2 from the CLI, never an exception of
transformers, safetensors, tokenizers or pydantic. Their weights are never filled in at random."""

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from aiayn.builder.decode.checkpoint import load_for_inference
from aiayn.builder.errors import UserError
from tests.builder.cli.test_bad_inputs import cli
from tests.builder.formats.opus_mt import opus_mt_folder
from tests.builder.formats.test_from_marian import marian_folder

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("marian-damaged")
    return {"tokenizer.json": marian_folder(root / "tokjson"), "opus-mt": opus_mt_folder(root / "opus")}


def damaged(folders: dict[str, Path], kind: str, tmp_path: Path, change: Callable[[Path], object]) -> Path:
    copy = tmp_path / kind.replace(".", "-")
    shutil.copytree(folders[kind], copy)
    change(copy)
    return copy


def config_set(**values) -> Callable[[Path], None]:
    def change(folder: Path) -> None:
        data = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**data, **values}))

    return change


def written(name: str, content: bytes) -> Callable[[Path], None]:
    return lambda folder: (folder / name).write_bytes(content)


def truncated(name: str) -> Callable[[Path], None]:
    return lambda folder: (folder / name).write_bytes((folder / name).read_bytes()[: (folder / name).stat().st_size // 2])


def refused(folder: Path) -> str:
    with pytest.raises(UserError) as e:
        load_for_inference(folder)
    return str(e.value)


NOT_READ = "{f}/config.json is not a Marian config aiayn can read: "


@pytest.mark.parametrize("kind", ["tokenizer.json", "opus-mt"])
@pytest.mark.parametrize(
    ("change", "message"),
    [
        (written("config.json", b"[1, 2]"), "{f}/config.json holds a JSON array, not an object; a Hugging Face model folder's config.json is a JSON object"),
        (written("config.json", b"null"), "{f}/config.json holds a JSON null, not an object; a Hugging Face model folder's config.json is a JSON object"),
        (written("config.json", b""), "{f}/config.json cannot be read as JSON (Expecting value: line 1 column 1 (char 0)); a Hugging Face model folder's config.json is a JSON object"),
        (written("config.json", b'{"model_type": "marian", "d_mod'), "{f}/config.json cannot be read as JSON (Unterminated string starting at: line 1 column 26 (char 25)); a Hugging Face model folder's config.json is a JSON object"),
        (config_set(d_model="sixteen"), NOT_READ + "d_model: input should be a valid integer, got 'sixteen'"),
        (config_set(d_model=16.0), NOT_READ + "d_model: input should be a valid integer, got 16.0"),
        (config_set(d_model=True), NOT_READ + "d_model: input should be a valid integer, got True"),
        (config_set(encoder_layers=0), NOT_READ + "encoder_layers: input should be greater than 0, got 0"),
        (config_set(decoder_layers=None), NOT_READ + "decoder_layers: input should be a valid integer, got None"),
        (config_set(encoder_attention_heads=0), NOT_READ + "encoder_attention_heads: input should be greater than 0, got 0"),
        (config_set(decoder_ffn_dim=-1), NOT_READ + "decoder_ffn_dim: input should be greater than 0, got -1"),
        (config_set(dropout=1.5), NOT_READ + "dropout: input should be less than 1, got 1.5"),
        (config_set(eos_token_id=[0, 1]), NOT_READ + "eos_token_id: input should be a valid integer, got [0, 1]"),
        (config_set(scale_embedding="yes"), NOT_READ + "scale_embedding: input should be a valid boolean, got 'yes'"),
        (config_set(activation_function=3), NOT_READ + "activation_function: input should be a valid string, got 3"),
        (config_set(max_position_embeddings=0), NOT_READ + "max_position_embeddings: input should be greater than 0, got 0"),
        (config_set(decoder_start_token_id=None), "{f}/config.json: decoder_start_token_id is null; a Marian decoder starts from a token id (opus-mt's: its pad_token_id)"),
        (config_set(decoder_start_token_id=-1), NOT_READ + "decoder_start_token_id: input should be greater than or equal to 0, got -1"),
        (config_set(decoder_start_token_id=100000), "{f}/config.json: decoder_start_token_id (100000) is not an id of its vocabulary (0 to {last}, vocab_size {V})"),
        (config_set(model_type="bert"), "{f} is neither a run directory nor a Hugging Face model aiayn reads: its config.json says model_type 'bert', and aiayn reads 'marian' (as opus-mt's), 'gpt2' and 'llama'; give a run directory, a .ckpt file or such a folder"),
        (lambda f: (f / "model.safetensors").unlink(), "{f} has no weights: a Marian folder holds model.safetensors (or pytorch_model.bin) beside config.json"),
        (written("model.safetensors", b""), "{f}/model.safetensors: transformers cannot load the weights (Error while deserializing header: header too small); is the file whole? copy it again"),
        (truncated("model.safetensors"), "{f}/model.safetensors: transformers cannot load the weights (Error while deserializing header: incomplete metadata, file not fully covered); is the file whole? copy it again"),
        (written("model.safetensors", b"\x00\xff\x12garbage" * 100), "{f}/model.safetensors: transformers cannot load the weights (Error while deserializing header: header too large); is the file whole? copy it again"),
        (written("generation_config.json", b"[]"), "{f}/generation_config.json holds a JSON array, not an object; mend it, or delete it (aiayn decodes with its own settings)"),
    ],
)  # fmt: skip
def test_a_damaged_folder_is_one_message(folders, tmp_path, kind, change, message):
    folder = damaged(folders, kind, tmp_path, change)
    V = json.loads((folders[kind] / "config.json").read_text())["vocab_size"]
    assert refused(folder) == message.format(f=folder, V=V, last=V - 1)


def without_tensor(folder: Path) -> None:
    from safetensors.torch import load_file, save_file

    weights = load_file(folder / "model.safetensors")
    del weights["model.decoder.layers.0.fc1.weight"]
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})


def as_bin(change: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def write(folder: Path) -> None:
        import io

        import torch
        from safetensors.torch import load_file

        buffer = io.BytesIO()
        torch.save(load_file(folder / "model.safetensors"), buffer)
        (folder / "model.safetensors").unlink()
        (folder / "pytorch_model.bin").write_bytes(change(buffer.getvalue()))

    return write


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (without_tensor, "{f}/model.safetensors: the weights do not fit config.json (model.decoder.layers.0.fc1.weight missing); they belong to another model"),
        (config_set(decoder_ffn_dim=40), "{f}/model.safetensors: the weights do not fit config.json (model.decoder.layers.0.fc1.bias (24,) for "
                                         "(40,), model.decoder.layers.0.fc1.weight (24, 16) for (40, 16), model.decoder.layers.0.fc2.weight (16, 24) "
                                         "for (16, 40)); they belong to another model"),
        (as_bin(lambda b: b[: len(b) // 2]), "{f}/pytorch_model.bin: transformers cannot load the weights ("),
        (as_bin(lambda b: b"\x00garbage" * 50), "{f}/pytorch_model.bin: transformers cannot load the weights ("),
    ],
)  # fmt: skip
def test_weights_of_another_model_are_never_filled_in(folders, tmp_path, change, message):
    folder = damaged(folders, "tokenizer.json", tmp_path, change)
    assert refused(folder).startswith(message.format(f=folder))


def test_a_whole_pytorch_model_bin_reads(folders, tmp_path):
    folder = damaged(folders, "tokenizer.json", tmp_path, as_bin(lambda b: b))
    assert load_for_inference(folder).spec.model.d_model == 16


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (written("tokenizer.json", b""), "{f}/tokenizer.json is not a valid tokenizer file (Expecting value: line 1 column 1 (char 0))"),
        (written("tokenizer.json", b"[1, 2]"), "{f}/tokenizer.json is not a valid tokenizer file (invalid type: sequence, expected struct Tokenizer at line 1 column 1)"),
        (truncated("tokenizer.json"), "{f}/tokenizer.json is not a valid tokenizer file (Unterminated string starting at: "),
        (config_set(vocab_size=20), "{f}/tokenizer.json has {V} tokens, more than config.json's vocab_size (20) gives the model rows for: the two files belong to different models"),
    ],
)  # fmt: skip
def test_a_damaged_tokenizer_json(folders, tmp_path, change, message):
    folder = damaged(folders, "tokenizer.json", tmp_path, change)
    V = json.loads((folders["tokenizer.json"] / "config.json").read_text())["vocab_size"]
    assert refused(folder).startswith(message.format(f=folder, V=V))


@pytest.mark.parametrize("verb", [["translate"], ["export", "--to", "huggingface", "OUT"], ["show"]])
def test_the_cli_says_it_in_one_line(folders, tmp_path, verb):
    folder = damaged(folders, "opus-mt", tmp_path, written("model.safetensors", b""))
    argv = [verb[0], folder, *[str(tmp_path / a) if a == "OUT" else a for a in verb[1:]]]
    code, _, err = cli(*argv)
    reason = "transformers cannot load the weights (Error while deserializing header: header too small); is the file whole? copy it again"
    assert (code, err) == (2, f"aiayn {verb[0]}: error: {folder}/model.safetensors: {reason}\n")
    assert not (tmp_path / "OUT").exists()
