"""What every tokenizer of aiayn is: text <-> ids with four fixed special ids, stored as one JSON file.

Kinds (each a module): bpe.py, a Hugging Face `tokenizers` tokenizer (aiayn's BPE, or a
tokenizer.json); spm.py, a SentencePiece model (`sentencepiece`) over a vocabulary, opus-mt's way.
Whatever the kind, <pad>=0, <s>=1, </s>=2, <unk>=3; `tokens()` lists the id space, so that two
tokenizers (a source's and a target's) can be checked to share one. A run directory keeps each as
JSON (tokenizer.json, or tokenizer.src.json and tokenizer.tgt.json), and `tokenizer_from_json`
reads it back through the registration of the type that saved it: the JSON's `aiayn_tokenizer`
key names it (and `plugin` the distribution of a plugin's), where none is a Hugging Face
tokenizer.json, which `bpe` reads. A plugin's tokenizer class is read back as aiayn's are.
"""

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from aiayn.builder.errors import UserError, missing_plugins_message, printable
from aiayn.builder.registry import Registration, Registry
from aiayn.builder.run.atomic import write_bytes_atomic
from aiayn.builder.run.jsonfile import loads
from aiayn.builder.run.rundir import RunDir
from aiayn.schemas.slots import OWN, PluginError

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)  # ids 0, 1, 2, 3
MASK = "<mask>"  # where a masked language model reads a token left out (id 4 in aiayn's, RoBERTa's name)
SEP = "<sep>"  # between source and target where a decoder-only model translates `<s> x <sep> y` (id 4 in aiayn's)
SENTENCEPIECE = "sentencepiece"  # the `aiayn_tokenizer` key of a SentencePiece tokenizer's JSON
KIND_KEY = "aiayn_tokenizer"  # the saved JSON's key naming the registered tokenizer type that reads it back
DEFAULT_KIND = "bpe"  # what reads a JSON without that key: a Hugging Face tokenizer.json


class Tokenizer:
    """Text <-> ids without specials; `<pad>`=0, `<s>`=1, `</s>`=2, `<unk>`=3."""

    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3
    kind: ClassVar[str] = ""  # the data.tokenizer.type whose registration reads it back (its `load`)
    plugin: str = ""  # "name==version" of the plugin distribution that registers `kind` (aiayn's own: "")

    @property
    def name(self) -> str:
        """What it is, in a word or two (the training log, `aiayn show`)."""
        return self.kind

    @property
    def merges(self) -> int | None:
        """How many merges a BPE tokenizer learned (None: another kind)."""
        return None

    def tokens(self) -> list[str]:
        """The id space: the token of each id, in id order."""
        raise NotImplementedError

    @property
    def vocab_size(self) -> int:
        """The actual size, specials included (may differ from what training asked for: size the
        embedding from this number)."""
        return len(self.tokens())

    @property
    def sep_id(self) -> int | None:
        """The id of <sep> (SEP), where the vocabulary has it: a decoder-only translation's."""
        tokens = self.tokens()
        return tokens.index(SEP) if SEP in tokens else None

    def id_to_token(self, i: int) -> str:
        tokens = self.tokens()
        return tokens[i] if 0 <= i < len(tokens) else ""

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode(text) for text in texts]

    def decode(self, ids: Iterable[int]) -> str:
        """Plain text; special ids (padding, bos, eos, unk) are skipped."""
        raise NotImplementedError

    def decode_batch(self, batch: Iterable[Iterable[int]]) -> list[str]:
        return [self.decode(ids) for ids in batch]

    def word_index(self, ids: Sequence[int]) -> list[int]:
        """For each token of `ids`, the whitespace-separated word of `decode(ids)` it belongs to
        (0-based): the word count of the text decoded up to it, less one. A token that adds no
        character (a lone word marker) counts with the word before it."""
        return [max(len(self.decode(ids[: t + 1]).split()) - 1, 0) for t in range(len(ids))]

    def describe(self) -> str:
        raise NotImplementedError

    def to_json(self) -> str:
        """The whole tokenizer as one JSON string (what the run directory and a slim checkpoint keep)."""
        raise NotImplementedError

    def save(self, path: Path) -> None:
        write_bytes_atomic(Path(path), saved_json(self).encode("utf-8"))

    @classmethod
    def load(cls, path: Path, registry: Registry) -> "Tokenizer":
        """The tokenizer a run saved at `path`, read by the registration of its type in `registry`."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UserError(f"tokenizer file not found: {path}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"cannot read tokenizer file {path}: {exc}") from None
        return tokenizer_from_json(text, str(path), registry, fix="delete it to train a new one")

    def same_ids(self, other: "Tokenizer") -> bool:
        """Whether `other` numbers tokens as this one does (one id space: one embedding serves both)."""
        return other is self or self.tokens() == other.tokens()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tokenizer):
            return NotImplemented
        return type(self) is type(other) and json.loads(self.to_json()) == json.loads(other.to_json())

    __hash__ = None  # type: ignore[assignment]


def check_specials(tokens: Sequence[str], source: str) -> None:
    for expected, token in enumerate(SPECIALS):
        found = tokens[expected] if expected < len(tokens) else None
        if found != token:
            raise UserError(
                f"{source}: special token {token!r} must have id {expected}, found {found!r} there; "
                "use a tokenizer trained by aiayn"
            )


def saved_json(tokenizer: Tokenizer) -> str:
    """What a run keeps of `tokenizer`: its `to_json`, which names its registered type where that
    is not the default (a Hugging Face tokenizer.json), and a plugin's distribution."""
    text = tokenizer.to_json()
    if tokenizer.kind == DEFAULT_KIND:
        return text
    try:
        data = loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise PluginError(f"{type(tokenizer).__name__}.to_json must give a JSON object (a tokenizer of type {tokenizer.kind!r})")
    plugin = {"plugin": tokenizer.plugin} if tokenizer.plugin else {}
    return json.dumps({KIND_KEY: tokenizer.kind, **plugin, **{k: v for k, v in data.items() if k != KIND_KEY}})


def tokenizer_from_json(text: str, source: str, registry: Registry, *, fix: str = "") -> Tokenizer:
    """The tokenizer `saved_json` wrote, read by the registration of its type; a UserError naming
    `source` (and, where the file is not JSON at all, saying `fix`)."""
    try:
        data: Any = loads(text)
    except ValueError as exc:
        raise UserError(f"{source} is not a valid tokenizer file (not JSON: {exc}){'; ' + fix if fix else ''}") from None
    kind = data.get(KIND_KEY, DEFAULT_KIND) if isinstance(data, dict) else DEFAULT_KIND
    entry = registry.tokenizer_loader(kind) if isinstance(kind, str) else None
    if entry is None or entry.load is None:
        dist = data.get("plugin")
        if isinstance(dist, str) and isinstance(kind, str):
            raise UserError(missing_plugins_message(source, {kind: dist}))
        raise UserError(
            f"{source} holds a tokenizer of type '{printable(str(kind))}', which no installed plugin registers (with a load "
            "that reads it back)"
        )
    tokenizer = entry.load(text, source)
    if not isinstance(tokenizer, Tokenizer):
        raise PluginError(f"the load of the tokenizer type {kind!r} returned {type(tokenizer).__name__}, not an aiayn Tokenizer")
    tokenizer.plugin = plugin_of(entry)
    return tokenizer


def plugin_of(entry: Registration) -> str:
    """The plugin distribution ("name==version") of a registration; "" for aiayn's own."""
    return entry.dist if entry.dist and entry.dist.partition("==")[0] != OWN else ""


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


def layout(src: Tokenizer, tgt: Tokenizer) -> str:
    """How the two sides are tokenized, in words (aiayn show, the training log)."""
    if src is tgt:
        return f"joint: one {src.name} tokenizer and one vocabulary for both sides"
    if src.same_ids(tgt):
        return f"separate {src.name} tokenizers over one vocabulary (opus-mt's way)"
    return f"separate {src.name} tokenizers and vocabularies"


def load_run_tokenizers(run: RunDir, registry: Registry) -> tuple[Tokenizer, Tokenizer]:
    """The (source, target) tokenizers a training run saved (one object if joint)."""
    shared, _ = run.tokenizer_files(joint=True)
    if shared.is_file():
        tokenizer = Tokenizer.load(shared, registry)
        return tokenizer, tokenizer
    src, tgt = run.tokenizer_files(joint=False)
    if src.is_file() or tgt.is_file():
        return Tokenizer.load(src, registry), Tokenizer.load(tgt, registry)
    raise UserError(
        f"no tokenizer in {run.path}: expected {shared.name} (shared vocabulary) or "
        f"{src.name} and {tgt.name}; is this the directory of a training run?"
    )
