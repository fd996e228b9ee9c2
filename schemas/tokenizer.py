"""How text becomes ids: a tokenizer trained on the training split (after data.pipeline), or read.

`type` picks the kind: `bpe` (Hugging Face `tokenizers`, the default), `sentencepiece` (the
`sentencepiece` library: unigram or BPE, with its own normalisation), or `file` (a tokenizer.json
or a SentencePiece model made elsewhere). With model.embedding.shared_vocab (the paper's setting)
both sides share one id space: one joint tokenizer, or, with SentencePiece's `joint: false`, one
model a side over one vocabulary (opus-mt's source.spm and target.spm); without it, each side has
its own tokenizer and ids.
"""

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from aiayn.schemas._base import PositiveInt, Spec

# a larger training split trains the tokenizer on this many of its pairs, drawn at random with a
# fixed seed (SentencePiece's input_sentence_size); null: every pair, however many
SamplePairs = PositiveInt | None


class TokenizerSpec(Spec):
    """The base of data.tokenizer's spec (a plugin's too, slot `tokenizer`): a `type:
    Literal["name"]` field, its own fields, and how it makes text into ids, in words."""

    if TYPE_CHECKING:
        type: str  # each subclass's `type: Literal["name"]` field, its tag in the YAML

    def layout(self, shared_vocab: bool) -> str:
        """How it makes the two sides' ids, in words (`aiayn show`)."""
        return f"{self.type}, " + ("one vocabulary" if shared_vocab else "a vocabulary a side")

    def sample_pairs(self) -> int | None:
        """How many pairs of a larger training split it learns from (None: every pair, or it learns from none)."""
        return None

    def merges_asked(self) -> int | None:
        """The BPE merges asked for, where the vocabulary is what they give (None: a size asked for, or no BPE)."""
        return None


def _models(kind: str, joint: bool, shared_vocab: bool) -> str:
    if joint:
        return f"{kind}, joint: one model and one vocabulary for both sides"
    return f"{kind}, " + (
        "a model a side over one vocabulary (opus-mt's way)" if shared_vocab else "a model and a vocabulary a side"
    )


class BpeTokenizerSpec(TokenizerSpec):
    """A BPE vocabulary trained on the training split (after data.pipeline); its size is
    model.embedding.vocab_size, or, with `merges`, what that many merges give."""

    type: Literal["bpe"] = "bpe"
    min_frequency: PositiveInt = 2
    # learn this many merges (subword-nmt's learn_bpe.py -s), not a vocabulary size: the dictionary
    # is then the characters of the text + the merges + 4 specials, and model.embedding.vocab_size
    # must equal it (training says the number when it does not). None: merges until vocab_size
    merges: PositiveInt | None = None
    train_sample_pairs: SamplePairs = 1_000_000

    def layout(self, shared_vocab: bool) -> str:
        return _models("BPE", shared_vocab, shared_vocab)

    def sample_pairs(self) -> int | None:
        return self.train_sample_pairs

    def merges_asked(self) -> int | None:
        return self.merges


class SentencePieceTokenizerSpec(TokenizerSpec):
    """A SentencePiece model trained on the training split (after data.pipeline), ids as
    `spm_train --pad_id=0 --bos_id=1 --eos_id=2 --unk_id=3` gives them. On small text the model
    has fewer pieces than asked (`hard_vocab_limit: false`)."""

    type: Literal["sentencepiece"] = "sentencepiece"
    model_type: Literal["unigram", "bpe"] = "unigram"  # SentencePiece's --model_type
    # pieces a model; None: model.embedding.vocab_size, or half of it a side where two models
    # share one vocabulary (joint: false with shared_vocab), so that their union fits
    vocab_size: PositiveInt | None = None
    # 1.0, SentencePiece's advice for languages of small alphabets (its default, 0.9995, is for
    # CJK: it leaves the rarest characters out, as <unk>)
    character_coverage: float = Field(default=1.0, gt=0.0, le=1.0)
    normalization_rule_name: Literal["nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf", "identity"] = "nmt_nfkc"
    byte_fallback: bool = False  # unknown characters as UTF-8 byte pieces instead of <unk>
    # true: one model on both sides' text; false: one model a side (over one vocabulary where
    # model.embedding.shared_vocab); None: joint where the vocabulary is shared
    joint: bool | None = None
    train_sample_pairs: SamplePairs = 1_000_000

    def layout(self, shared_vocab: bool) -> str:
        return _models(f"SentencePiece {self.model_type}", shared_vocab if self.joint is None else self.joint, shared_vocab)

    def sample_pairs(self) -> int | None:
        return self.train_sample_pairs


class TokenizerFileSpec(TokenizerSpec):
    """A tokenizer made elsewhere: a tokenizer.json (ids 0-3 <pad> <s> </s> <unk>) or a
    SentencePiece model (`spm_train`'s .model, opus-mt's .spm: its pieces are renumbered so that
    those four come first). Paths are relative to the directory training starts in."""

    type: Literal["file"] = "file"
    path: str = Field(min_length=1)
    # the target side's, where it has its own (over the source's vocabulary where
    # model.embedding.shared_vocab: two SentencePiece models, opus-mt's way); None: `path` for both
    target_path: str | None = Field(default=None, min_length=1)

    def layout(self, shared_vocab: bool) -> str:
        files = self.path if self.target_path is None else f"{self.path} and {self.target_path}"
        return f"read from {files}, " + ("one vocabulary" if shared_vocab else "a vocabulary a side")


def bpe_by_default(value: Any) -> Any:
    """A tokenizer mapping without `type` is BPE (a field_validator(mode="before") of data.tokenizer)."""
    return {"type": "bpe", **value} if isinstance(value, dict) and "type" not in value else value
