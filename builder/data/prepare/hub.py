"""A corpus from the Hugging Face Hub through `datasets` (the optional extra `aiayn[hub]`).

`datasets` downloads the Hub's files once into its cache (~/.cache/huggingface) and reads
them from there; offline, or without the package, the message names the other way: `--from`
a folder of the downloaded files.
"""

from collections.abc import Iterator

from aiayn.builder.data.prepare.corpora import Corpus, Split
from aiayn.builder.errors import UserError


def unavailable(corpus: Corpus, reason: str) -> UserError:
    where = corpus.hub.path + (f" ({corpus.hub.config})" if corpus.hub.config else "")
    return UserError(
        f"cannot load {corpus.name} from the Hugging Face Hub {where}: {reason}. Either download "
        f"{corpus.downloads} into a folder and run `aiayn data {corpus.name} DIR --from FOLDER`, or "
        "install the Hub client (pip install datasets) and run it again where the Hub can be reached"
    )


def load_splits(corpus: Corpus) -> dict[str, object]:
    """Every split of the Hub dataset (a `datasets.DatasetDict`), downloaded or from the cache."""
    try:
        import datasets
    except ImportError:
        raise unavailable(corpus, "the `datasets` package is not installed") from None
    try:
        return datasets.load_dataset(corpus.hub.path, corpus.hub.config)
    except (OSError, ValueError) as exc:  # no network (ConnectionError is an OSError), offline mode, nothing cached
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise unavailable(corpus, first.rstrip(".")) from None


def hub_pairs(corpus: Corpus, split: Split, rows) -> Iterator[tuple[str, str]]:
    """(source, target) of each row in the corpus's languages; a sentence holding a line break
    could not stay line-aligned."""
    src, tgt = corpus.langs
    for number, row in enumerate(rows, 1):
        pair = row[corpus.hub.field] if corpus.hub.field else row
        en, de = pair[src] or "", pair[tgt] or ""  # a missing sentence (None) is an empty line
        if "\n" in en or "\n" in de:
            raise UserError(
                f"{corpus.hub.path} {split.hub_split} row {number} holds a line break; it cannot be written one sentence a line"
            )
        yield en, de
