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

from pathlib import Path
from typing import Any

from aiayn.builder.errors import UserError

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
    decode["alpha"] = settings.pop("length_penalty", 1.0)
    early = settings.pop("early_stopping", False)
    decode["early_stopping"] = _early_stopping(early, where) if decode["beam"] > 1 else True  # greedy stops at its </s>
    new_tokens, total = settings.pop("max_new_tokens", None), settings.pop("max_length", None)
    if new_tokens is not None:  # generate(): max_new_tokens wins over max_length
        decode["max_len_a"], decode["max_len_b"] = 0.0, _count(new_tokens, "max_new_tokens", where)
    elif total is not None:  # max_length counts the decoder's start token
        decode["max_len_a"], decode["max_len_b"] = 0.0, _count(total, "max_length", where, at_least=2) - 1
    forced = settings.pop("forced_eos_token_id", None)
    if forced is not None:
        if forced != config.eos_token_id:
            raise UserError(
                f"{where}: forced_eos_token_id {forced} is not </s> ({config.eos_token_id}); aiayn can end a hypothesis with </s> only"
            )
        decode["forced_eos"] = True
    decode["suppress"] = _suppressed(
        settings.pop("bad_words_ids", None), settings.pop("suppress_tokens", None), tokens, order, where
    )
    decode["renormalize"] = bool(settings.pop("renormalize_logits", False))
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
    if eos is not None and eos != config.eos_token_id and eos != [config.eos_token_id]:
        raise UserError(
            f"{where}: eos_token_id {eos!r} is not config.json's ({config.eos_token_id}); aiayn ends a hypothesis at one </s>"
        )
    start = settings.pop("decoder_start_token_id", None)
    if start is not None and start != config.decoder_start_token_id:
        raise UserError(f"{where}: decoder_start_token_id {start!r} is not config.json's ({config.decoder_start_token_id})")


def _count(value: Any, name: str, where: str, *, at_least: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not at_least <= value < 2**31:
        raise UserError(f"{where}: {name} must be a whole number from {at_least}, got {value!r}")
    return value


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
    for words in bad_words or []:
        if not isinstance(words, list) or len(words) != 1:
            raise UserError(
                f"{where}: bad_words_ids holds {words!r}, a sequence of tokens; aiayn's search can forbid single tokens only"
            )
        ids.append(words[0])
    ids += list(suppress or [])
    pieces: list[str] = []
    for marian in ids:
        mine = [i for i, m in enumerate(order) if m == marian and i != 0]
        if not isinstance(marian, int) or not any(m == marian for m in order):
            raise UserError(f"{where}: {marian!r}, a token to forbid, is not an id of the vocabulary")
        pieces += [tokens[i] for i in mine if tokens[i] not in pieces]
    return pieces
