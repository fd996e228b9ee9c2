"""Where the parallel text comes from, and how it is tokenized and filtered."""

from typing import Annotated, Literal

from pydantic import Field

from aiayn.schemas._base import PositiveInt, Spec


class TokenizerSpec(Spec):
    """A BPE vocabulary trained on the training split; its size is model.embedding.vocab_size."""

    type: Literal["bpe"] = "bpe"
    min_frequency: PositiveInt = 2
    # a larger training split trains the BPE on this many of its pairs, drawn at random with a
    # fixed seed (SentencePiece's input_sentence_size); null: every pair, however many
    train_sample_pairs: PositiveInt | None = 1_000_000


class _DataSpec(Spec):
    src_lang: str = "en"
    tgt_lang: str = "de"
    max_len: PositiveInt = 256  # tokens per side; longer training pairs are dropped
    min_len: PositiveInt = 1
    tokenizer: TokenizerSpec = TokenizerSpec()
    cache_dir: str | None = None  # None: $AIAYN_CACHE or ~/.cache/aiayn
    # DataLoader worker processes; auto: 2 when training on a GPU (batches are made while it
    # computes, in pinned memory), none on a CPU (whose cores the model needs)
    num_workers: Annotated[int, Field(ge=0)] | Literal["auto"] = "auto"
    pad_to_multiple: PositiveInt = 1  # pad batch widths to a multiple (8 suits tensor cores and compile)


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
