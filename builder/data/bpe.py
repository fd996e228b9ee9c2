"""A Hugging Face `tokenizers` tokenizer (transformers calls them fast): aiayn's BPE, or a tokenizer.json.

NFKC normalisation, then Metaspace pre-tokenisation (a space becomes "▁" and starts a word, as in
SentencePiece), so `decode(encode(s)) == s` for ordinary text: what comes out is plain,
detokenised text ready for sacreBLEU. Exceptions: NFKC rewrites compatibility characters (a
no-break space becomes a space, "ﬁ" becomes "fi"), leading spaces are dropped, and characters
never seen in training become <unk>, which decodes to nothing.

One `Tokenizer` serves both sides for a shared vocabulary (the paper's setting); the caller builds
one per side for separate vocabularies.
"""

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

from aiayn.builder.data.tokenizer import DEFAULT_KIND, SPECIALS, UNK, Tokenizer
from aiayn.builder.errors import UserError

_METASPACE: dict[str, Any] = {"replacement": "▁", "prepend_scheme": "always"}


class FastTokenizer(Tokenizer):
    """A `tokenizers` tokenizer whose ids 0-3 are aiayn's specials.

    :param hf: the `tokenizers.Tokenizer`
    :param source: what it was read from, in messages
    :raises UserError: ids 0-3 that are not <pad> <s> </s> <unk>"""

    def __init__(self, hf: HFTokenizer, *, source: str = "a tokenizer") -> None:
        for expected, token in enumerate(SPECIALS):
            if hf.token_to_id(token) != expected:
                raise UserError(
                    f"{source}: special token {token!r} must have id {expected}, "
                    f"found {hf.token_to_id(token)}; use a tokenizer trained by aiayn"
                )
        self.hf = hf
        self._tokens: list[str] | None = None

    kind = DEFAULT_KIND  # the `bpe` registration reads a tokenizer.json back, whatever its model

    @property
    def name(self) -> str:
        """The model's type: bpe (aiayn's), or unigram, wordpiece... (a tokenizer.json from elsewhere)."""
        return type(self.hf.model).__name__.lower()

    def tokens(self) -> list[str]:
        if self._tokens is None:
            by_id = {i: token for token, i in self.hf.get_vocab(with_added_tokens=True).items()}
            self._tokens = [by_id.get(i, "") for i in range(self.vocab_size)]
        return self._tokens

    def id_to_token(self, i: int) -> str:
        return self.hf.id_to_token(i) or ""

    @property
    def vocab_size(self) -> int:
        """The actual size, specials included: on a small corpus BPE can run out of merges before
        the requested size, and it always keeps every character it saw, so this may differ from
        what was asked for. Size the embedding from this number."""
        return self.hf.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self.hf.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Like `encode` on each text; runs in parallel threads in Rust."""
        return [e.ids for e in self.hf.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Iterable[int]) -> str:
        """Plain text; special ids (padding, bos, eos, unk) are skipped."""
        return self.hf.decode([int(i) for i in ids], skip_special_tokens=True)

    def decode_batch(self, batch: Iterable[Iterable[int]]) -> list[str]:
        return self.hf.decode_batch([[int(i) for i in ids] for ids in batch], skip_special_tokens=True)

    @property
    def merges(self) -> int:
        """How many merges the BPE learned."""
        return len(json.loads(self.to_json())["model"].get("merges") or [])

    def describe(self) -> str:
        """e.g. "10000 merges on an alphabet of 162 + 4 specials" """
        specials = max(len(SPECIALS), sum(1 for token in self.hf.get_added_tokens_decoder().values() if token.special))
        if self.name != "bpe":
            return f"{self.name}, {self.vocab_size - specials} types + {specials} specials"
        return f"{self.merges} merges, {self.vocab_size - specials} types + {specials} specials"  # <sep>, <mask>: a reading's

    def to_json(self) -> str:
        """The whole tokenizer (vocabulary, merges, normaliser...) as a JSON string."""
        return self.hf.to_str()

    @classmethod
    def from_json(cls, text: str, *, source: str, fix: str = "") -> "FastTokenizer":
        try:
            hf = HFTokenizer.from_str(text)
        except Exception as exc:  # the Rust side raises a bare Exception on bad JSON
            raise UserError(f"{source} is not a valid tokenizer file ({exc}){'; ' + fix if fix else ''}") from None
        return cls(hf, source=source)


def _check_counts(min_frequency: int, merges: int | None) -> None:
    if min_frequency < 1:
        raise UserError(f"tokenizer min_frequency must be at least 1, got {min_frequency}")
    if merges is not None and merges < 1:
        raise UserError(f"tokenizer merges must be at least 1, got {merges}")


def train_tokenizer(
    texts: Iterable[str] | Callable[[], Iterable[str]],
    vocab_size: int,
    *,
    min_frequency: int = 2,
    merges: int | None = None,
    specials: Sequence[str] = (),
) -> FastTokenizer:
    """A BPE vocabulary of at most about `vocab_size` entries learned from `texts`, or, with
    `merges`, of that many merges (subword-nmt's -s): the text's characters + the merges + the
    specials, whatever `vocab_size` says; fewer where the pairs run out of `min_frequency`.
    `texts` may be a function that returns them anew (with `merges` they are read twice).

    Deterministic for the same texts and arguments. See `Tokenizer.vocab_size` for the actual size.
    """
    if merges is None and vocab_size <= len(SPECIALS):
        raise UserError(
            f"vocab_size ({vocab_size}) must be larger than the {len(SPECIALS)} special tokens "
            f"{', '.join(SPECIALS)}; a BPE vocabulary has a few thousand entries (the paper: 37000)"
        )
    _check_counts(min_frequency, merges)
    hf = HFTokenizer(models.BPE(unk_token=UNK))
    hf.normalizer = normalizers.NFKC()
    hf.pre_tokenizer = pre_tokenizers.Metaspace(**_METASPACE)
    hf.decoder = decoders.Metaspace(**_METASPACE)
    read = texts if callable(texts) else (lambda: texts)
    if merges is not None:
        if not callable(texts) and iter(texts) is texts:  # a one-pass iterator, read twice below
            kept = list(texts)
            read = lambda: kept  # noqa: E731
        vocab_size = len(SPECIALS) + len(specials) + len(alphabet(hf, read())) + merges
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[*SPECIALS, *specials],
        show_progress=False,
    )
    n_texts = 0

    def counted() -> Iterator[str]:
        nonlocal n_texts
        for text in read():
            n_texts += 1
            yield text

    hf.train_from_iterator(counted(), trainer)
    if n_texts == 0:
        raise UserError("cannot train a tokenizer on no text: the training corpus is empty")
    return FastTokenizer(hf)


def alphabet(hf: HFTokenizer, texts: Iterable[str]) -> set[str]:
    """The symbols BPE starts from: every character of the normalised text, a space as "▁"."""
    normalize = hf.normalizer.normalize_str
    seen = {_METASPACE["replacement"]}
    for text in texts:
        seen.update(normalize(text))
    seen.discard(" ")
    return seen
