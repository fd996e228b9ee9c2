"""Where the parallel text comes from, and how it is tokenized and filtered."""

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from aiayn.schemas._base import FieldError, PositiveInt, Spec
from aiayn.schemas.slots import AnyTokenizer
from aiayn.schemas.text import TextStep, check_steps, named_steps
from aiayn.schemas.tokenizer import BpeTokenizerSpec, bpe_by_default


class StaticShapesSpec(Spec):
    """Every training batch takes one of a few fixed shapes, so that a compiled step never
    compiles again and CUDA graphs replay (train.compile: reduce-overhead): tf.data's
    bucket_by_sequence_length with pad_to_bucket_boundary, and fixed rows. A pair goes to the
    first bucket as wide as its longer side (the target with its <s> or </s>); a bucket of width
    w makes batches of max_tokens // w pairs, its last one filled up with one-token rows the loss
    ignores; the tokens the encoder and the decoder compute are a fixed count per bucket too."""

    num_buckets: Annotated[int, Field(gt=0, le=8)] = 6  # at most 8: torch.compile keeps 8 graphs of a function
    # the buckets' widths, ascending; a last bucket as wide as the longest pair is added when
    # it is longer. None: the num_buckets widths that pad the training pairs least
    bucket_boundaries: list[PositiveInt] | None = None
    # true: each bucket's encoder and decoder compute the most tokens any of its batches holds
    # (rounded up to a multiple of 8); false: every position of the (rows, width) batch
    packed: bool = True

    @model_validator(mode="after")
    def _ascending(self) -> "StaticShapesSpec":
        edges = self.bucket_boundaries
        if edges is not None and (not edges or any(b <= a for a, b in zip(edges, edges[1:])) or len(edges) > 7):
            raise FieldError(
                "bucket_boundaries",
                f"{edges} must be 1 to 7 widths in ascending order (with the longest pair's, at most 8 shapes)",
            )
        return self


class _DataSpec(Spec):
    src_lang: str = "en"
    tgt_lang: str = "de"
    max_len: PositiveInt = 256  # tokens per side; longer training pairs are dropped
    min_len: PositiveInt = 1
    # the text pipeline before BPE (schemas/text.py), applied to every split and, by translate and
    # evaluate, to new input; none by default. The Multi30k literature's: [lowercase,
    # normalize_punctuation, moses_tokenize]; a run whose pipeline tokenizes is scored on its
    # tokenized output (sacreBLEU tokenize=none), as its literature scores it
    pipeline: tuple[TextStep, ...] = ()
    tokenizer: AnyTokenizer = BpeTokenizerSpec()
    cache_dir: str | None = None  # None: $AIAYN_CACHE or ~/.cache/aiayn
    # DataLoader worker processes; auto: 2 when training on a GPU (batches are made while it
    # computes, in pinned memory), none on a CPU (whose cores the model needs)
    num_workers: Annotated[int, Field(ge=0)] | Literal["auto"] = "auto"
    pad_to_multiple: PositiveInt = 1  # pad batch widths to a multiple (8 suits tensor cores and compile)
    static_shapes: StaticShapesSpec | None = None  # None: batches as long as their longest pair
    # a language model's text: one side of the corpus (src_lang or tgt_lang; its {split}.{side}
    # files alone are read), for a decoder-only model; None: the pairs, translated
    side: str | None = None
    # a language model's batches: sentences (<s> ... </s> each, batched by tokens as pairs are), or
    # blocks of block_size tokens cut from the sentences joined by </s> (GPT's packing)
    packing: Literal["sentences", "blocks"] = "sentences"
    block_size: PositiveInt | None = None

    @model_validator(mode="after")
    def _language_model(self) -> "_DataSpec":
        if self.side is not None and self.side not in (self.src_lang, self.tgt_lang):
            raise FieldError(
                "side", f"{self.side!r} is neither src_lang ({self.src_lang}) nor tgt_lang ({self.tgt_lang}); give one of them"
            )
        if self.packing == "blocks" and (self.side is None or self.block_size is None):
            missing = "side" if self.side is None else "block_size"
            raise FieldError(
                "packing",
                f"blocks cut a language model's text into block_size tokens; set data.{missing}"
                + (" (the language whose text the model reads)" if missing == "side" else " (GPT-2's: 1024)"),
            )
        if self.block_size is not None and self.packing != "blocks":
            raise FieldError("block_size", "is the length of packed blocks; set data.packing: blocks, or drop it")
        return self

    _named_steps = field_validator("pipeline", mode="before")(named_steps)
    _check_steps = field_validator("pipeline")(check_steps)
    _bpe_by_default = field_validator("tokenizer", mode="before")(bpe_by_default)


class FilesDataSpec(_DataSpec):
    """Line-aligned files `{dir}/{split}.{lang}`, as fairseq's and OpenNMT-py's raw inputs."""

    type: Literal["files"] = "files"
    dir: str
    train: str = "train"
    valid: str = "valid"
    test: str = "test"


class DemoDataSpec(_DataSpec):
    """The generated English-German corpus built into the package (no download)."""

    type: Literal["demo"] = "demo"
    n_train: PositiveInt = 20000
    n_valid: PositiveInt = 300
    n_test: PositiveInt = 300
    seed: int = 1234


DataSpec = Annotated[FilesDataSpec | DemoDataSpec, Field(discriminator="type")]
