"""The tokenizers a new run gets from data.tokenizer (schemas/tokenizer.py): trained on the
training split (BPE or SentencePiece) or read from files, in the layout the vocabulary asks for:
one joint tokenizer (the same object twice), one a side over one id space, or one a side with
ids of its own (model.embedding.shared_vocab: false)."""

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiayn.builder.data.tokenizer import Tokenizer, layout, plugin_of, tokenizer_from_json
from aiayn.builder.errors import UserError, resolved
from aiayn.builder.registry import Registry
from aiayn.schemas.slots import PluginError
from aiayn.schemas.tokenizer import BpeTokenizerSpec, SentencePieceTokenizerSpec, TokenizerFileSpec

Texts = Callable[[], Iterable[str]]  # the training split's lines of one side, read anew at each call
Made = tuple[Tokenizer, Tokenizer, str]  # (source, target, what to say of them)


@dataclass(frozen=True)
class TokenizerInputs:
    """What a tokenizer type's build(spec, inputs) receives: the vocabulary asked for
    (model.embedding.vocab_size), whether the two sides share one id space, and each side's
    training text. It returns (source, target, what to say of them): aiayn Tokenizers, the same
    object twice for a joint one (ids 0-3 <pad> <s> </s> <unk>), which the run saves and reads back.

    :param vocab_size: the vocabulary asked for (model.embedding.vocab_size)
    :param shared_vocab: the two sides share one id space
    :param src: the source side's training text
    :param tgt: the target side's training text (the same object as `src` where the model reads one
        language's text: train on it once)
    :param specials: special tokens beyond the four, from id 4 on (<sep> for a decoder-only translation)
    :param registry: the registrations in use (to read a saved tokenizer of any registered type)"""

    vocab_size: int
    shared_vocab: bool
    src: Texts
    tgt: Texts
    specials: tuple[str, ...] = ()  # special tokens beyond the four, from id 4 on (<sep> for a decoder-only translation)
    registry: Registry = Registry()  # the registrations in use (to read a saved tokenizer of any registered type)


def make_tokenizers(
    spec: Any, registry: Registry, *, vocab_size: int, shared_vocab: bool, src: Texts, tgt: Texts, specials: tuple[str, ...] = ()
) -> Made:
    """(source, target, description) as `spec` (data.tokenizer, a type `registry` registers) makes them."""
    entry = registry.registration(spec)
    made = entry.build(spec, TokenizerInputs(vocab_size, shared_vocab, src, tgt, specials, registry))
    if not (isinstance(made, tuple) and len(made) == 3 and all(isinstance(t, Tokenizer) for t in made[:2])):
        raise PluginError(
            f"the builder of the tokenizer {spec.type!r} returned {type(made).__name__}; it must return (source, target, "
            "description), two aiayn Tokenizers (a FastTokenizer, say) and a str"
        )
    for tokenizer in made[:2]:
        tokenizer.plugin = tokenizer.plugin or plugin_of(entry)
    return made


def register_tokenizers(register: Callable[..., Any]) -> None:
    """Register the built-in tokenizer types with `register` (a registering function's registry.add)."""
    register(
        BpeTokenizerSpec,
        slot="tokenizer",
        build=lambda spec, given: _bpe(spec, given.vocab_size, given.shared_vocab, given.src, given.tgt, given.specials),
        load=_load_fast,
    )
    register(
        SentencePieceTokenizerSpec,
        slot="tokenizer",
        build=lambda spec, given: _sentencepiece(
            spec, given.vocab_size, given.shared_vocab, given.src, given.tgt, given.specials
        ),
        load=_load_sentencepiece,
    )
    register(
        TokenizerFileSpec,
        slot="tokenizer",
        build=lambda spec, given: read_tokenizers(spec, shared_vocab=given.shared_vocab, registry=given.registry),
    )


def _load_fast(text: str, source: str) -> Tokenizer:
    from aiayn.builder.data.bpe import FastTokenizer

    return FastTokenizer.from_json(text, source=source)


def _load_sentencepiece(text: str, source: str) -> Tokenizer:
    from aiayn.builder.data.spm import SentencePieceTokenizer

    return SentencePieceTokenizer.from_dict(json.loads(text), source=source)


def _both(src: Texts, tgt: Texts) -> Texts:
    """The two sides' lines, each read once: one language's text (`src is tgt`) is not counted twice."""
    if src is tgt:
        return src
    return lambda: (line for texts in (src, tgt) for line in texts())


def _bpe(
    spec: BpeTokenizerSpec, vocab_size: int, shared_vocab: bool, src: Texts, tgt: Texts, specials: tuple[str, ...] = ()
) -> Made:
    from aiayn.builder.data.bpe import train_tokenizer

    asked = f"data.tokenizer.merges {spec.merges}" if spec.merges is not None else f"asked {vocab_size}"

    def train(texts: Texts) -> Tokenizer:
        return train_tokenizer(texts, vocab_size, min_frequency=spec.min_frequency, merges=spec.merges, specials=specials)

    if shared_vocab:  # the lines stream from the files: WMT's text would take gigabytes
        tokenizer = train(_both(src, tgt))
        what = f"BPE of {tokenizer.vocab_size} for one language's text" if src is tgt else f"shared BPE of {tokenizer.vocab_size}"
        return tokenizer, tokenizer, f"{what} ({asked}; {tokenizer.describe()})"
    s, t = train(src), train(tgt)
    return s, t, f"BPE of {s.vocab_size} and {t.vocab_size} ({asked}; {s.describe()}; {t.describe()})"


def _sentencepiece(
    spec: SentencePieceTokenizerSpec, vocab_size: int, shared_vocab: bool, src: Texts, tgt: Texts, specials: tuple[str, ...] = ()
) -> Made:
    from aiayn.builder.data.spm import one_id_space, train_sentencepiece

    joint = shared_vocab if spec.joint is None else spec.joint
    if joint and not shared_vocab:
        raise UserError(
            "data.tokenizer.joint: true trains one model for both sides, but model.embedding.shared_vocab is false "
            "(an id space a side); set joint: false, or shared_vocab: true"
        )
    per_side = vocab_size // 2 if shared_vocab and not joint else vocab_size
    pieces = spec.vocab_size or per_side

    def train(texts: Texts) -> Any:
        options = spec.model_dump(include={"model_type", "character_coverage", "normalization_rule_name", "byte_fallback"})
        return train_sentencepiece(texts, pieces, **options, specials=specials)

    if joint:
        tokenizer = train(_both(src, tgt))
        made: Made = (tokenizer, tokenizer, "")
    else:
        s, t = train(src), train(tgt)
        made = (*one_id_space(s, t), "") if shared_vocab else (s, t, "")
    s, t, _ = made
    sizes = f"{s.vocab_size}" if s.same_ids(t) else f"{s.vocab_size} and {t.vocab_size}"
    return s, t, f"SentencePiece {spec.model_type} ({pieces} pieces asked a model): {layout(s, t)}, {sizes} ids"


def read_tokenizers(spec: TokenizerFileSpec, *, shared_vocab: bool, registry: Registry) -> Made:
    """The tokenizer file(s) data.tokenizer names; two SentencePiece models get one vocabulary
    where the ids are shared."""
    src = read_tokenizer_file(Path(spec.path), "data.tokenizer.path", registry)
    if spec.target_path is None:
        return src, src, f"{src.describe()} from {spec.path}, for both sides"
    tgt = read_tokenizer_file(Path(spec.target_path), "data.tokenizer.target_path", registry)
    if shared_vocab and not src.same_ids(tgt):
        from aiayn.builder.data.spm import SentencePieceTokenizer, one_id_space

        if not (isinstance(src, SentencePieceTokenizer) and isinstance(tgt, SentencePieceTokenizer)):
            raise UserError(
                f"data.tokenizer: {spec.path} and {spec.target_path} number their tokens differently, and "
                "model.embedding.shared_vocab is true (one id space); give one file (path alone), or set "
                "shared_vocab: false (and model.embedding.share: none)"
            )
        src, tgt = one_id_space(src, tgt)
    return src, tgt, f"{src.describe()} from {spec.path}, {tgt.describe()} from {spec.target_path}: {layout(src, tgt)}"


def read_tokenizer_file(path: Path, field: str, registry: Registry) -> Tokenizer:
    """A tokenizer.json (aiayn's, or any whose ids 0-3 are aiayn's specials) or a SentencePiece model."""
    if not path.is_file():
        resolved(path)  # a link that leads back to itself is named as one
        what = "is a directory" if path.is_dir() else "does not exist"
        raise UserError(f"{field}: {path} {what}; give a tokenizer.json or a SentencePiece model (.model, .spm)")
    data = path.read_bytes()
    if not data.lstrip().startswith(b"{"):  # a SentencePiece model is a protobuf, which no JSON object begins like
        from aiayn.builder.data.spm import from_model_file

        try:
            return from_model_file(path)
        except UserError as e:
            raise UserError(f"{field}: {e}; nor is it a tokenizer.json") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{field}: {path} is not a valid tokenizer file (not UTF-8 text: {e})") from None
    return tokenizer_from_json(text, f"{field}: {path}", registry)
