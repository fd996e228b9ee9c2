"""A Hugging Face Marian folder's config.json, checked before transformers reads it.

transformers takes config.json's values on trust: a string `d_model` or a list `eos_token_id`
reaches its dataclass checks (TypeError), zero attention heads a division, an id outside the
vocabulary an index error deep in the weights. Every value aiayn reads is checked here, by name
and with the value, so that a damaged folder is one message that names the file and the field.
A field that is absent takes MarianConfig's default, as transformers does.
"""

from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aiayn.builder.errors import UserError
from aiayn.builder.run.jsonfile import json_type, read_json

Count = Annotated[int, Field(gt=0, lt=2**31)]  # a size: strict, so neither true nor 16.0 is 16
Id = Annotated[int, Field(ge=0, lt=2**31)]
Probability = Annotated[float, Field(ge=0.0, lt=1.0)]


class MarianFields(BaseModel):
    """The fields of config.json aiayn reads (others are transformers' business)."""

    model_config = ConfigDict(extra="allow", strict=True)

    # a field config.json leaves out is not checked (the defaults are never read: transformers' own apply)
    vocab_size: Count = 1
    decoder_vocab_size: Count | None = None
    d_model: Count = 1
    encoder_layers: Count = 1
    decoder_layers: Count = 1
    encoder_attention_heads: Count = 1
    decoder_attention_heads: Count = 1
    encoder_ffn_dim: Count = 1
    decoder_ffn_dim: Count = 1
    max_position_embeddings: Count = 1
    dropout: Probability = 0.0
    attention_dropout: Probability = 0.0
    activation_dropout: Probability = 0.0
    activation_function: str = ""
    scale_embedding: bool = False
    share_encoder_decoder_embeddings: bool = False
    tie_word_embeddings: bool = False
    pad_token_id: Id | None = None
    eos_token_id: Id | None = None
    decoder_start_token_id: Id = 0


def read_config(folder: Path) -> dict[str, Any]:
    """config.json of the Marian folder, every field aiayn reads checked; a UserError names the
    file and the first fields that are wrong."""
    path = folder / "config.json"
    data = json_object(path, "a Hugging Face model folder's config.json is a JSON object")
    if "decoder_start_token_id" in data and data["decoder_start_token_id"] is None:
        raise UserError(
            f"{path}: decoder_start_token_id is null; a Marian decoder starts from a token id (opus-mt's: its pad_token_id)"
        )
    try:
        MarianFields.model_validate({k: v for k, v in data.items() if k in MarianFields.model_fields})
    except ValidationError as e:
        wrong = [
            f"{'.'.join(map(str, err['loc']))}: {err['msg'].lower()}, got {err['input']!r}" for err in e.errors(include_url=False)
        ]
        raise UserError(f"{path} is not a Marian config aiayn can read: {'; '.join(wrong[:3])}") from None
    return data


def json_object(path: Path, fix: str) -> dict[str, Any]:
    """The JSON object in `path`; where it cannot be read, or holds no object, a UserError naming
    the file, then `fix`."""
    try:
        data = read_json(path)
    except (OSError, ValueError) as e:
        raise UserError(f"{path} cannot be read as JSON ({e}); {fix}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} holds a JSON {json_type(data)}, not an object; {fix}")
    return data


def check_ids(folder: Path, config: Any) -> None:
    """The special ids transformers resolved (config.json's or MarianConfig's defaults) lie in the vocabulary."""
    size = config.vocab_size
    for field in ("pad_token_id", "eos_token_id", "decoder_start_token_id"):
        value = getattr(config, field)
        if value is None and field != "decoder_start_token_id":
            continue  # _check_specials says which token it must be
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < size:
            raise UserError(
                f"{folder / 'config.json'}: {field} ({value!r}) is not an id of its vocabulary (0 to {size - 1}, vocab_size {size})"
            )
