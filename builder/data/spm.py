"""SentencePiece tokenizers (the `sentencepiece` library): trained by aiayn, read from a model file,
or opus-mt's two models over one vocabulary.

A SentencePiece tokenizer is a model (the library's serialized ModelProto: its pieces, scores and
normalisation rules) and a vocabulary: the piece of each aiayn id. The model splits the text into
pieces; the vocabulary numbers them, a piece it lacks becoming <unk> (MarianTokenizer's way). Where
the vocabulary starts with the model's own pieces in the model's own order (every model aiayn
trains: <pad> 0, <s> 1, </s> 2, <unk> 3, as `spm_train --pad_id=0 --bos_id=1 --eos_id=2
--unk_id=3` numbers them), the ids are the library's own, `spm_encode --output_format=id`'s.

Two models over one vocabulary (opus-mt's source.spm and target.spm) are two tokenizers with the
same vocabulary: `one_id_space` makes it from two trained ones. Decoding drops the specials, joins
the pieces as the model does and turns the remaining "▁" into spaces, as MarianTokenizer does.
"""

import base64
import binascii
import io
import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from aiayn.builder.data.tokenizer import SENTENCEPIECE, SPECIALS, Tokenizer, check_specials
from aiayn.builder.errors import UserError

_SPACE = "▁"


def _processor(model: bytes, source: str) -> Any:
    import sentencepiece

    if not model:
        raise UserError(f"{source} is not a SentencePiece model (it is empty)")
    processor = sentencepiece.SentencePieceProcessor()
    try:
        processor.LoadFromSerializedProto(model)
    except (RuntimeError, OSError, TypeError) as e:
        said = str(e).strip()
        why = (
            "it does not parse: truncated, or another kind of file"
            if "Parse" in said or not said
            else said.removeprefix("INTERNAL: ")
        )
        raise UserError(f"{source} is not a SentencePiece model ({why})") from None
    if processor.get_piece_size() == 0:
        raise UserError(f"{source} is not a SentencePiece model (it holds no pieces)")
    return processor


class SentencePieceTokenizer(Tokenizer):
    """A SentencePiece model over a vocabulary (None: the model's own pieces, in its order)."""

    kind = SENTENCEPIECE

    def __init__(
        self,
        model: bytes,
        vocab: Sequence[str] | None = None,
        *,
        language_codes: bool = False,
        source: str = "a SentencePiece model",
    ) -> None:
        self.model, self.sp = model, _processor(model, source)
        own = [self.sp.id_to_piece(i) for i in range(self.sp.get_piece_size())]
        self.pieces = own if vocab is None else list(vocab)
        check_specials(self.pieces, source)
        self.vocab = None if self.pieces == own else self.pieces  # what to_json stores
        self._index: dict[str, int] = {}
        for i, piece in enumerate(self.pieces):
            self._index.setdefault(piece, i)
        self._own_ids = self.pieces[: len(own)] == own  # the library's ids are ours: encode in C++
        # opus-mt: a leading ">>xx<<" (the target language of a multilingual model) is one token
        self.language_codes = language_codes

    def tokens(self) -> list[str]:
        return self.pieces

    def id_to_token(self, i: int) -> str:
        return self.pieces[i] if 0 <= i < len(self.pieces) else ""

    def encode(self, text: str) -> list[int]:
        code, text = _language_code(text) if self.language_codes else ([], text)
        if self._own_ids and not code:
            return list(self.sp.encode(text))
        unk = self.unk_id
        return [self._index.get(piece, unk) for piece in (*code, *self.sp.encode(text, out_type=str))]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        if self._own_ids and not self.language_codes:
            return [list(ids) for ids in self.sp.encode(list(texts))]
        return [self.encode(text) for text in texts]

    def decode(self, ids: Iterable[int]) -> str:
        n = len(self.pieces)
        pieces = [self.pieces[i] for i in map(int, ids) if len(SPECIALS) <= i < n]
        return self.sp.decode_pieces(pieces).replace(_SPACE, " ").strip()

    def describe(self) -> str:
        own = self.sp.get_piece_size()
        extra = f", numbered by a vocabulary of {len(self.pieces)}" if self.vocab is not None else ""
        return f"SentencePiece model of {own} pieces{extra}"

    def to_json(self) -> str:
        return json.dumps(
            {
                "aiayn_tokenizer": SENTENCEPIECE,
                "version": 1,
                "model": base64.b64encode(self.model).decode("ascii"),
                "vocab": self.vocab,
                "language_codes": self.language_codes,
            }
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str) -> "SentencePieceTokenizer":
        """The tokenizer `to_json` wrote, or a UserError naming `source`."""
        vocab, codes = data.get("vocab"), data.get("language_codes", False)
        if not isinstance(data.get("model"), str) or not (
            vocab is None or isinstance(vocab, list) and all(isinstance(p, str) for p in vocab)
        ):
            raise UserError(
                f"{source} is not a valid tokenizer file (a SentencePiece tokenizer needs a model string and a list of pieces)"
            )
        try:
            model = base64.b64decode(data["model"], validate=True)
        except (binascii.Error, ValueError):
            raise UserError(f"{source} is not a valid tokenizer file (its SentencePiece model is not base64)") from None
        return cls(model, vocab, language_codes=bool(codes), source=source)


def _language_code(text: str) -> tuple[list[str], str]:
    """MarianTokenizer's remove_language_code: (">>xx<<" at the start, if any, and the rest)."""
    end = text.find("<<") if text.startswith(">>") else -1
    return ([text[: end + 2]], text[end + 2 :]) if end != -1 else ([], text)


def read_model(path: Path, *, source: str | None = None) -> bytes:
    """A SentencePiece model file's bytes, or a UserError naming it."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise UserError(f"{source or path}: no such SentencePiece model") from None
    except OSError as e:
        raise UserError(f"{source or path}: cannot read the SentencePiece model ({e.strerror})") from None


def from_model_file(path: Path) -> SentencePieceTokenizer:
    """A SentencePiece model trained elsewhere (`spm_train`'s .model, opus-mt's .spm), its pieces
    renumbered so that aiayn's four specials come first (those it lacks added), the rest in order."""
    model = read_model(path)
    sp = _processor(model, str(path))
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    return SentencePieceTokenizer(model, [*SPECIALS, *(p for p in pieces if p not in SPECIALS)], source=str(path))


def one_id_space(
    src: SentencePieceTokenizer, tgt: SentencePieceTokenizer
) -> tuple[SentencePieceTokenizer, SentencePieceTokenizer]:
    """Two models over one vocabulary: the source's pieces, then the target's the source lacks."""
    have = set(src.pieces)
    vocab = [*src.pieces, *(p for p in tgt.pieces if p not in have)]
    return SentencePieceTokenizer(src.model, vocab), SentencePieceTokenizer(tgt.model, vocab)


def train_sentencepiece(
    texts: Callable[[], Iterable[str]],
    vocab_size: int,
    *,
    model_type: str = "unigram",
    character_coverage: float = 1.0,
    normalization_rule_name: str = "nmt_nfkc",
    byte_fallback: bool = False,
    specials: Sequence[str] = (),
) -> SentencePieceTokenizer:
    """A SentencePiece model of at most `vocab_size` pieces (fewer where the text has not enough:
    hard_vocab_limit false) learnt from `texts`, its ids aiayn's (<pad> 0, <s> 1, </s> 2, <unk> 3).
    Deterministic for the same texts and arguments."""
    import sentencepiece

    if vocab_size <= len(SPECIALS):
        raise UserError(f"a SentencePiece vocabulary must be larger than the {len(SPECIALS)} special tokens, got {vocab_size}")
    lines = [line for line in texts() if line.strip()]
    if not lines:
        raise UserError("cannot train a tokenizer on no text: the training corpus is empty")
    out = io.BytesIO()
    try:
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(lines),
            model_writer=out,
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            normalization_rule_name=normalization_rule_name,
            byte_fallback=byte_fallback,
            pad_id=0,
            bos_id=1,
            eos_id=2,
            unk_id=3,
            pad_piece=SPECIALS[0],
            bos_piece=SPECIALS[1],
            eos_piece=SPECIALS[2],
            unk_piece=SPECIALS[3],
            hard_vocab_limit=False,
            input_sentence_size=0,
            shuffle_input_sentence=False,
            max_sentence_length=1 << 16,
            minloglevel=2,
            num_threads=1,
            user_defined_symbols=list(specials),
        )
    except RuntimeError as e:
        raise UserError(f"SentencePiece could not train on this text: {str(e).strip()}") from None
    return SentencePieceTokenizer(out.getvalue())
