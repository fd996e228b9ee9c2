"""A Hugging Face Marian folder's generation settings, read as `generate()` reads them.

`generate()` decodes with the folder's generation_config.json (or, without one, what transformers
derives from config.json): a published opus-mt folder asks for 4 beams, at most 512 tokens, <pad>
never generated (bad_words_ids), the logits renormalised after that, and a hypothesis that reaches
the length limit ended with </s> (forced_eos_token_id). Each setting that changes the output
becomes the decode section's (schemas/decode.py), so that `aiayn translate FOLDER` gives what
`generate()` gives; a setting aiayn's search does not have is refused by name, never dropped.
`aiayn export --to huggingface` writes the decode section back (to_marian.generation_config).

Where the folder sets no length, aiayn keeps its own limit (input + 50 tokens): `generate()` would
stop at 20 new tokens, its default, about which it warns.
"""

import json
import math
import os
from pathlib import Path
from typing import Any

from aiayn.builder.errors import UserError, loop_message

# generation settings that change nothing a search returns (ids checked against config.json, outputs asked for)
HARMLESS = {
    "transformers_version", "_from_model_config", "use_cache", "output_attentions", "output_hidden_states", "output_scores",
    "output_logits", "return_dict_in_generate", "num_return_sequences", "pad_token_id", "bos_token_id", "cache_implementation",
    "cache_config", "compile_config", "disable_compile", "remove_invalid_values",
}  # fmt: skip
SAMPLING = {
    "temperature",
    "top_k",
    "top_p",
    "typical_p",
    "epsilon_cutoff",
    "eta_cutoff",
    "min_p",
    "top_h",
}  # read only when sampling


def marian_decode(generation: Any, config: Any, folder: Path, tokens: list[str], order: list[int]) -> dict[str, Any]:
    """The decode section that decodes as `generate()` with `generation` (the folder's
    GenerationConfig) does: aiayn's ids are `tokens`, aiayn id i is Marian id order[i]."""
    where = (
        f"{folder / 'generation_config.json'}" if (folder / "generation_config.json").is_file() else f"{folder / 'config.json'}"
    )
    settings = {k: v for k, v in generation.to_diff_dict().items() if v is not None and k not in HARMLESS}
    if not settings.pop("do_sample", False):
        settings = {k: v for k, v in settings.items() if k not in SAMPLING}
    else:
        raise UserError(f"{where}: do_sample true asks generate() to sample; aiayn's search is beam search: set it false")
    _check_ids(settings, config, where)
    # generate()'s defaults where the folder says nothing: greedy, |Y|^1 (aiayn keeps its length limit)
    decode: dict[str, Any] = {"beam": _count(settings.pop("num_beams", 1), "num_beams", where), "length_penalty": "fairseq"}
    decode["alpha"] = _number(settings.pop("length_penalty", 1.0), "length_penalty", where)
    early = settings.pop("early_stopping", False)
    decode["early_stopping"] = _early_stopping(early, where) if decode["beam"] > 1 else True  # greedy stops at its </s>
    new_tokens, total = settings.pop("max_new_tokens", None), settings.pop("max_length", None)
    if new_tokens is not None:  # generate(): max_new_tokens wins over max_length
        decode["max_len_a"], decode["max_len_b"] = 0.0, _count(new_tokens, "max_new_tokens", where)
    elif total is not None:  # max_length counts the decoder's start token
        decode["max_len_a"], decode["max_len_b"] = 0.0, _count(total, "max_length", where, at_least=2) - 1
    forced = settings.pop("forced_eos_token_id", None)
    if forced is not None:
        if _token_id(forced, "forced_eos_token_id", where) != config.eos_token_id:
            raise UserError(
                f"{where}: forced_eos_token_id {forced} is not </s> ({config.eos_token_id}); aiayn can end a hypothesis with </s> only"
            )
        decode["forced_eos"] = True
    decode["suppress"] = _suppressed(
        settings.pop("bad_words_ids", None), settings.pop("suppress_tokens", None), tokens, order, where
    )
    decode["renormalize"] = _flag(settings.pop("renormalize_logits", False), "renormalize_logits", where)
    if settings:
        key, value = next(iter(settings.items()))
        raise UserError(
            f"{where}: {key} {value!r} changes what generate() outputs, and aiayn's search has no such setting; remove it "
            "from the file to decode without it"
        )
    return decode


def _check_ids(settings: dict[str, Any], config: Any, where: str) -> None:
    """The ids the generation settings name that config.json names too agree with it."""
    eos = settings.pop("eos_token_id", None)
    if eos is not None:
        for one in eos if isinstance(eos, list) else [eos]:
            _token_id(one, "eos_token_id", where)
    if eos is not None and eos != config.eos_token_id and eos != [config.eos_token_id]:
        raise UserError(
            f"{where}: eos_token_id {eos!r} is not config.json's ({config.eos_token_id}); aiayn ends a hypothesis at one </s>"
        )
    start = settings.pop("decoder_start_token_id", None)
    if start is not None and _token_id(start, "decoder_start_token_id", where) != config.decoder_start_token_id:
        raise UserError(f"{where}: decoder_start_token_id {start!r} is not config.json's ({config.decoder_start_token_id})")


def _count(value: Any, name: str, where: str, *, at_least: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not at_least <= value < 2**31:
        raise UserError(f"{where}: {name} must be a whole number from {at_least}, got {_json(value)}")
    return value


def _json(value: Any) -> str:
    """A value as the JSON file wrote it (true, not True)."""
    return json.dumps(value)


def _number(value: Any, name: str, where: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise UserError(f"{where}: {name} must be a finite number, got {_json(value)}")
    return float(value)


def _flag(value: Any, name: str, where: str) -> bool:
    if not isinstance(value, bool):
        raise UserError(f"{where}: {name} must be true or false, got {_json(value)}")
    return value


def _token_id(value: Any, name: str, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise UserError(f"{where}: {name} must be a token id (a whole number from 0), got {_json(value)}")
    return value


def _ids(value: Any, name: str, where: str, *, nested: bool = False) -> list[Any]:
    """A list of token ids (of lists of them, `nested`), each checked; None: none."""
    if value is None:
        return []
    shape = "a list of lists of token ids" if nested else "a list of token ids"
    if not isinstance(value, list) or (nested and not all(isinstance(v, list) for v in value)):
        raise UserError(f"{where}: {name} must be {shape}, got {_json(value)}")
    for one in [i for v in value for i in v] if nested else value:
        _token_id(one, name, where)
    return value


def check_generation_file(folder: Path) -> None:
    """The folder's generation_config.json, where there is one, is a file (not a folder, not a link
    that leads back to itself): transformers would otherwise decode with config.json's settings."""
    path = folder / "generation_config.json"
    if path.is_symlink() and not path.exists():
        try:
            os.stat(path)
        except OSError as e:
            if e.errno == 40:  # ELOOP
                raise UserError(loop_message(path)) from None
            raise UserError(
                f"{path} is a link to nothing ({e.strerror}); point it at the folder's generation settings, or remove it"
            ) from None
    if path.exists() and not path.is_file():
        raise UserError(f"{path} is a folder, not the file of generation settings; remove it to decode with config.json's")


def _early_stopping(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise UserError(
            f"{where}: early_stopping {value!r}: aiayn's search stops at the beam's finished hypotheses (true) or goes on as "
            "generate() does by default (false); set one of them"
        )
    return value


def _suppressed(bad_words: Any, suppress: Any, tokens: list[str], order: list[int], where: str) -> list[str]:
    """The pieces of aiayn's vocabulary of the Marian ids `generate()` never outputs (bad words of
    one token, suppress_tokens); aiayn's <pad> is never output anyway."""
    ids: list[Any] = []
    for words in _ids(bad_words, "bad_words_ids", where, nested=True):
        if len(words) != 1:
            raise UserError(
                f"{where}: bad_words_ids holds {words!r}, a sequence of tokens; aiayn's search can forbid single tokens only"
            )
        ids.append(words[0])
    ids += _ids(suppress, "suppress_tokens", where)
    pieces: list[str] = []
    for marian in ids:
        mine = [i for i, m in enumerate(order) if m == marian and i != 0]
        if not isinstance(marian, int) or not any(m == marian for m in order):
            raise UserError(f"{where}: {marian!r}, a token to forbid, is not an id of the vocabulary")
        pieces += [tokens[i] for i in mine if tokens[i] not in pieces]
    return pieces
