"""A BPE vocabulary (Hugging Face `tokenizers`) with the four special tokens the model relies on.

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
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

from aiayn.builder.errors import UserError
from aiayn.builder.run.atomic import write_bytes_atomic
from aiayn.builder.run.rundir import RunDir

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)  # ids 0, 1, 2, 3
_METASPACE: dict[str, Any] = {"replacement": "▁", "prepend_scheme": "always"}


class Tokenizer:
    """Text <-> ids without specials; `<pad>`=0, `<s>`=1, `</s>`=2, `<unk>`=3."""

    def __init__(self, hf: HFTokenizer, *, source: str = "a tokenizer") -> None:
        for expected, token in enumerate(SPECIALS):
            if hf.token_to_id(token) != expected:
                raise UserError(
                    f"{source}: special token {token!r} must have id {expected}, "
                    f"found {hf.token_to_id(token)}; use a tokenizer trained by aiayn"
                )
        self.hf = hf

    @property
    def vocab_size(self) -> int:
        """The actual size, specials included: on a small corpus BPE can run out of merges before
        the requested size, and it always keeps every character it saw, so this may differ from
        what was asked for. Size the embedding from this number."""
        return self.hf.get_vocab_size(with_added_tokens=True)

    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3

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
        return len(json.loads(self.to_json())["model"]["merges"])

    def describe(self) -> str:
        """e.g. "10000 merges on an alphabet of 162 + 4 specials" """
        merges = self.merges
        learned = self.vocab_size - len(SPECIALS)
        return f"{merges} merges, {learned} types + {len(SPECIALS)} specials"

    def to_json(self) -> str:
        """The whole tokenizer (vocabulary, merges, normaliser...) as a JSON string."""
        return self.hf.to_str()

    def save(self, path: Path) -> None:
        write_bytes_atomic(Path(path), self.to_json().encode("utf-8"))

    @classmethod
    def load(cls, path: Path) -> "Tokenizer":
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UserError(f"tokenizer file not found: {path}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"cannot read tokenizer file {path}: {exc}") from None
        try:
            hf = HFTokenizer.from_str(text)
        except Exception as exc:  # the Rust side raises a bare Exception on bad JSON
            raise UserError(
                f"{path} is not a valid tokenizer file ({exc}); delete it to train a new one"
            ) from None
        return cls(hf, source=str(path))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tokenizer):
            return NotImplemented
        return json.loads(self.to_json()) == json.loads(other.to_json())

    __hash__ = None  # type: ignore[assignment]


def train_tokenizer(
    texts: Iterable[str] | Callable[[], Iterable[str]], vocab_size: int, *, min_frequency: int = 2, merges: int | None = None
) -> Tokenizer:
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
    if min_frequency < 1:
        raise UserError(f"tokenizer min_frequency must be at least 1, got {min_frequency}")
    if merges is not None and merges < 1:
        raise UserError(f"tokenizer merges must be at least 1, got {merges}")
    hf = HFTokenizer(models.BPE(unk_token=UNK))
    hf.normalizer = normalizers.NFKC()
    hf.pre_tokenizer = pre_tokenizers.Metaspace(**_METASPACE)
    hf.decoder = decoders.Metaspace(**_METASPACE)
    read = texts if callable(texts) else (lambda: texts)
    if merges is not None:
        if not callable(texts) and iter(texts) is texts:  # a one-pass iterator, read twice below
            kept = list(texts)
            read = lambda: kept  # noqa: E731
        vocab_size = len(SPECIALS) + len(alphabet(hf, read())) + merges
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIALS),
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
    return Tokenizer(hf)


def alphabet(hf: HFTokenizer, texts: Iterable[str]) -> set[str]:
    """The symbols BPE starts from: every character of the normalised text, a space as "▁"."""
    normalize = hf.normalizer.normalize_str
    seen = {_METASPACE["replacement"]}
    for text in texts:
        seen.update(normalize(text))
    seen.discard(" ")
    return seen


SAMPLE_SEED = 0  # fixed, not the run's seed: runs with other seeds get the same tokenizer and share the token cache


def training_sample(n_pairs: int, max_pairs: int | None) -> np.ndarray | None:
    """The line numbers (sorted) of the pairs a tokenizer is trained on, None for all: `max_pairs`
    of the `n_pairs` drawn at random when there are more, as SentencePiece's input_sentence_size
    does: the training time and memory then stop growing with the corpus (WMT14: 4.5M pairs)."""
    if max_pairs is not None and max_pairs < 1:
        raise UserError(f"tokenizer train_sample_pairs must be at least 1 or null, got {max_pairs}")
    if max_pairs is None or n_pairs <= max_pairs:
        return None
    return np.sort(np.random.default_rng(SAMPLE_SEED).choice(n_pairs, size=max_pairs, replace=False))


def check_vocabulary(vocab_size: int, src: Tokenizer, tgt: Tokenizer, *, where: str, fix: str, merges: int | None = None) -> None:
    """Every token id of the tokenizers must have a row in the model's embedding; with `merges`
    (data.tokenizer.merges), the embedding has exactly the rows the merges gave."""
    for side, tokenizer in (("source", src), ("target", tgt)):
        if merges is not None and tokenizer.vocab_size != vocab_size:
            raise UserError(
                f"{where}data.tokenizer.merges ({merges}) gave the {side} a dictionary of {tokenizer.vocab_size} "
                f"({tokenizer.describe()}) but the model's vocabulary has {vocab_size}; set dims.vocab_size "
                f"(or model.embedding.vocab_size) to {tokenizer.vocab_size}"
            )
        if tokenizer.vocab_size > vocab_size:
            below = f" (no merge fits: {vocab_size} is below the text's alphabet)" if tokenizer.merges == 0 else ""
            raise UserError(
                f"{where}the {side} tokenizer has {tokenizer.vocab_size} entries{below} but the model's vocabulary "
                f"has {vocab_size}; {fix}"
            )


def load_run_tokenizers(run: RunDir) -> tuple[Tokenizer, Tokenizer]:
    """The (source, target) tokenizers a training run saved (one object if shared)."""
    shared, _ = run.tokenizer_files(shared_vocab=True)
    if shared.is_file():
        tokenizer = Tokenizer.load(shared)
        return tokenizer, tokenizer
    src, tgt = run.tokenizer_files(shared_vocab=False)
    if src.is_file() or tgt.is_file():
        return Tokenizer.load(src), Tokenizer.load(tgt)
    raise UserError(
        f"no tokenizer in {run.path}: expected {shared.name} (shared vocabulary) or "
        f"{src.name} and {tgt.name}; is this the directory of a training run?"
    )
