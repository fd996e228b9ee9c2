"""A Hugging Face Marian folder's tokenizers, renumbered to aiayn's ids (from_marian.py reads the rest).

Two layouts: opus-mt's (source.spm and target.spm, two SentencePiece models over one vocab.json of
piece -> id: MarianTokenizer's files), read as two SentencePiece tokenizers over one id space; or a
`tokenizers` tokenizer.json (what `aiayn export --to huggingface` writes for a BPE run), read as
one. `order[i]` is the Marian id of aiayn's id i: <pad>, the decoder's start (aiayn's <s>), </s>,
<unk>, then every other id in Marian's order.
"""

import json
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer as HFTokenizer

from aiayn.builder.data.bpe import FastTokenizer
from aiayn.builder.data.tokenizer import BOS, EOS, PAD, UNK, Tokenizer
from aiayn.builder.errors import UserError
from aiayn.builder.formats.marian_config import check_ids
from aiayn.builder.run.jsonfile import read_json

OPUS_MT = ("source.spm", "target.spm", "vocab.json")  # MarianTokenizer's files
Read = tuple[Tokenizer, Tokenizer, list[int], bool]  # (source, target, order, source_eos)


def marian_tokenizers(folder: Path, config: Any) -> Read:
    """The folder's (source, target) tokenizers with aiayn's ids, the order, and source_eos."""
    start = config.decoder_start_token_id
    if start is None:
        raise UserError(f"{folder}: config.json has no decoder_start_token_id")
    if (folder / "tokenizer.json").is_file():
        return _tokenizer_json(folder, config)
    present = [name for name in OPUS_MT if (folder / name).is_file()]
    if present:
        return _opus_mt(folder, config, present)
    raise UserError(
        f"{folder} has no tokenizer: aiayn reads opus-mt's {', '.join(OPUS_MT)} (MarianTokenizer's files) or a tokenizer.json"
    )


def _order(folder: Path, config: Any, unk: int) -> list[int]:
    check_ids(folder, config)  # after the tokenizer's own checks, which say more of a vocabulary of another model
    head = [config.pad_token_id, config.decoder_start_token_id, config.eos_token_id, unk]
    return head + [i for i in range(config.vocab_size) if i not in head]


def _check_specials(folder: Path, config: Any, token_of: dict[int, str], where: str) -> None:
    specials = {"pad_token_id": (config.pad_token_id, PAD), "eos_token_id": (config.eos_token_id, EOS)}
    for field, (theirs, token) in specials.items():
        if theirs is None or token_of.get(theirs) != token:
            raise UserError(
                f"{folder}: config.json's {field} ({theirs}) is not {token} in {where}; aiayn needs {PAD}, {EOS} and {UNK}"
            )


# ---- opus-mt: source.spm + target.spm + vocab.json ------------------------------------------------


def _opus_mt(folder: Path, config: Any, present: list[str]) -> Read:
    from aiayn.builder.data.spm import SentencePieceTokenizer, read_model

    missing = [name for name in OPUS_MT if name not in present]
    if missing:
        raise UserError(
            f"{folder}: opus-mt's tokenizer is {', '.join(OPUS_MT)}, and {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing"
        )
    if (folder / "target_vocab.json").is_file():
        raise UserError(
            f"{folder}: separate source and target vocabularies (target_vocab.json); aiayn reads Marian models with one vocabulary"
        )
    token_of = _vocab(folder / "vocab.json", config.vocab_size)
    _check_specials(folder, config, token_of, "vocab.json")
    unk = next((i for i, t in token_of.items() if t == UNK), None)
    if unk is None:
        raise UserError(f"{folder}: vocab.json has no {UNK}; aiayn needs {PAD}, {EOS} and {UNK}")
    order = _order(folder, config, unk)
    # a row vocab.json names no piece for (a vocabulary padded to a round size) gets a name no text makes
    pieces = [BOS if ours == 1 else token_of.get(marian, f"<marian {marian}>") for ours, marian in enumerate(order)]
    sides = []
    for name in OPUS_MT[:2]:
        path = folder / name
        tokenizer = SentencePieceTokenizer(read_model(path), pieces, language_codes=True, source=str(path))
        _check_numbered(tokenizer, path, token_of)
        sides.append(tokenizer)
    return sides[0], sides[1], order, True  # MarianTokenizer ends every source with </s>


def _vocab(path: Path, size: int) -> dict[int, str]:
    """vocab.json as id -> piece, checked: an object of distinct ids below the model's vocab_size."""
    try:
        data = read_json(path)
    except (ValueError, OSError) as e:
        raise UserError(
            f"{path} is not a JSON object of piece -> id ({e}); it is the vocabulary of source.spm and target.spm"
        ) from None
    if not isinstance(data, dict) or not all(isinstance(i, int) and not isinstance(i, bool) for i in data.values()):
        raise UserError(
            f"{path} is not a JSON object of piece -> id (integers); it is the vocabulary of source.spm and target.spm"
        )
    token_of = {i: piece for piece, i in data.items()}
    if len(token_of) != len(data):
        twice = next(i for i in token_of if list(data.values()).count(i) > 1)
        raise UserError(f"{path} gives id {twice} to more than one piece; every piece needs an id of its own")
    out = [i for i in token_of if not 0 <= i < size]
    if out:
        raise UserError(
            f"{path} has id {max(out, key=abs)}, outside config.json's vocab_size ({size}): the vocabulary is another model's"
        )
    return token_of


def _check_numbered(tokenizer: Any, path: Path, token_of: dict[int, str]) -> None:
    """Most of a model's pieces must be in vocab.json: otherwise the two belong to other models."""
    known = set(token_of.values())
    own = [tokenizer.sp.id_to_piece(i) for i in range(tokenizer.sp.get_piece_size())]
    ordinary = [p for i, p in enumerate(own) if not (tokenizer.sp.is_control(i) or tokenizer.sp.is_unknown(i))]
    found = sum(p in known for p in ordinary)
    if found * 2 < len(ordinary):
        raise UserError(
            f"{path}: only {found} of its {len(ordinary)} pieces are in vocab.json, which numbers the pieces of "
            "source.spm and target.spm; the files come from different models"
        )


# ---- a tokenizers tokenizer.json --------------------------------------------------------------------


def _tokenizer_json(folder: Path, config: Any) -> Read:
    path = folder / "tokenizer.json"
    try:
        data = read_json(path)
        hf = HFTokenizer.from_str(json.dumps(data))
    except Exception as e:  # the Rust side raises a bare Exception on a bad file
        raise UserError(
            f"{path} is not a valid tokenizer file ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
        ) from None
    size = hf.get_vocab_size(with_added_tokens=True)
    if size > config.vocab_size:
        raise UserError(
            f"{path} has {size} tokens, more than config.json's vocab_size ({config.vocab_size}) gives the model rows for: "
            "the two files belong to different models"
        )
    unk = hf.token_to_id(UNK)
    _check_specials(
        folder,
        config,
        {i: hf.id_to_token(i) or "" for i in (config.pad_token_id, config.eos_token_id) if i is not None},
        "tokenizer.json",
    )
    if unk is None:
        raise UserError(f"{folder}: tokenizer.json has no {UNK}; aiayn needs {PAD}, {EOS} and {UNK}")
    start = config.decoder_start_token_id
    bos = hf.token_to_id(BOS)
    if bos is not None and bos != start:
        raise UserError(
            f"{folder}: tokenizer.json has {BOS} (id {bos}), but the decoder starts from id {start}; aiayn's {BOS} is the decoder's start"
        )
    order, source_eos = _order(folder, config, unk), _appends_eos(data)  # before _renumbered drops the post-processor
    tokenizer = FastTokenizer(HFTokenizer.from_str(json.dumps(_renumbered(data, order, hf))), source=str(path))
    return tokenizer, tokenizer, order, source_eos


def _renumbered(data: dict[str, Any], order: list[int], hf: HFTokenizer) -> dict[str, Any]:
    """tokenizer.json with aiayn's ids: token order[i] gets id i; id 1 is <s>."""
    new_id = {marian: ours for ours, marian in enumerate(order) if ours != 1}  # <s> (ours 1) may share Marian's pad
    # a row the tokenizer has no token for (a vocabulary padded to a round size) gets a name no text makes
    tokens = [BOS if ours == 1 else hf.id_to_token(marian) or f"<marian {marian}>" for ours, marian in enumerate(order)]
    model = data["model"]
    if isinstance(model.get("vocab"), dict):  # BPE, WordLevel, WordPiece: token -> id
        model["vocab"] = {token: i for i, token in enumerate(tokens)}
    elif isinstance(model.get("vocab"), list):  # Unigram: [token, score] by id
        scores = {token: score for token, score in model["vocab"]}
        model["vocab"] = [[token, scores.get(token, 0.0)] for token in tokens]
        if model.get("unk_id") is not None:
            model["unk_id"] = new_id[model["unk_id"]]
    else:
        raise UserError(f"tokenizer.json's model ({model.get('type')}) has no vocabulary aiayn can renumber")
    added = [{**t, "id": new_id[t["id"]]} for t in data.get("added_tokens", []) if t["id"] in new_id]
    added.append(
        {"id": 1, "content": BOS, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
    )
    data["added_tokens"] = sorted(added, key=lambda t: t["id"])
    data["post_processor"] = None  # aiayn adds specials itself (model.source_eos)
    return data


def _appends_eos(data: dict[str, Any]) -> bool:
    """Whether tokenizer.json's post-processor ends a single sequence with </s> (MarianTokenizer's way)."""
    processor = data.get("post_processor") or {}
    single = processor.get("single") or []
    last = single[-1] if single else {}
    return processor.get("type") == "TemplateProcessing" and last.get("SpecialToken", {}).get("id") == EOS
