"""data.pipeline at run time: the steps each line goes through before BPE, for one language;
the processed files cached on disk; the check that a corpus is not tokenized already.

The steps are sacremoses' ports of Moses' scripts. Processing a split is deterministic, so the
processed files are cached under a key of the file's bytes, the language, the steps and
sacremoses' version, as the token cache keys on the text and the tokenizer (data/cache.py).
"""

import difflib
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

from aiayn.builder.data.cache import hash_file
from aiayn.builder.data.corpus import line_blocks
from aiayn.builder.errors import UserError
from aiayn.builder.run.atomic import atomic_write
from aiayn.schemas.text import (
    STEPS,
    LowercaseStep,
    MosesTokenizeStep,
    NormalizePunctuationStep,
    TextStep,
    step_names,
    tokenize_step,
)

FORMAT_VERSION = 1
PREPARED = "prepared.json"  # what `aiayn data` records in a corpus folder, its pipeline among it
# what Moses' tokenizer writes for every ' and " with escaping on; raw text hardly ever holds them
# (web text does hold &amp;: Multi30k's raw English has 16)
MOSES_ESCAPES = ("&apos;", "&quot;")
_DASH = re.compile(r" @-@ ")


def _step(step: TextStep, lang: str) -> Callable[[str], str]:
    from sacremoses import MosesPunctNormalizer, MosesTokenizer  # a second or so to import its tables

    if isinstance(step, LowercaseStep):
        return str.lower
    if isinstance(step, NormalizePunctuationStep):
        return MosesPunctNormalizer(lang=lang).normalize
    if isinstance(step, MosesTokenizeStep):
        moses = MosesTokenizer(lang=lang)
        escape, dashes = step.escape, step.aggressive_dash_splits
        return lambda line: moses.tokenize(line, escape=escape, aggressive_dash_splits=dashes, return_str=True)
    raise TypeError(f"no implementation for the text step {step!r}")


class TextPipeline:
    """The steps of data.pipeline for one language: `pipeline(line)` is the processed line."""

    def __init__(self, steps: Sequence[TextStep], lang: str) -> None:
        self.steps, self.lang = tuple(steps), lang
        self._functions = [_step(step, lang) for step in self.steps]
        self.tokenizer = tokenize_step(self.steps)

    def __call__(self, line: str) -> str:
        for function in self._functions:
            line = function(line)
        return line

    def lines(self, lines: Iterable[str]) -> list[str]:
        return [self(line) for line in lines]

    @property
    def lowercases(self) -> bool:
        return "lowercase" in step_names(self.steps)

    def detokenize(self, line: str) -> str:
        """Plain text from this pipeline's output (Moses' detokenizer.perl, escapes undone); the
        line as it is when the pipeline does not tokenize. Lowercasing cannot be undone."""
        if self.tokenizer is None:
            return line
        from sacremoses import MosesDetokenizer

        if self.tokenizer.aggressive_dash_splits:
            line = _DASH.sub("-", line)
        return MosesDetokenizer(lang=self.lang).detokenize(line.split(), unescape=self.tokenizer.escape)

    def key(self) -> str:
        """What the output depends on: the steps, the language and sacremoses' version."""
        steps = [step.model_dump(mode="json") for step in self.steps]
        return json.dumps({"v": FORMAT_VERSION, "steps": steps, "lang": self.lang, "sacremoses": version("sacremoses")})


def parse_steps(names: Sequence[Any]) -> tuple[TextStep, ...]:
    """data.pipeline's steps from their names (or {type: ...} mappings), checked as the schema checks them."""
    from pydantic import TypeAdapter, ValidationError

    from aiayn.schemas.text import check_steps, named_steps

    try:
        return check_steps(tuple(TypeAdapter(tuple[TextStep, ...]).validate_python(named_steps(list(names)))))
    except ValidationError as e:
        error = e.errors()[0]
        if error["type"] == "union_tag_invalid":
            tag, known = error["ctx"]["tag"], ", ".join(STEPS)
            close = difflib.get_close_matches(str(tag), STEPS, n=1, cutoff=0.5)
            raise UserError(f"{tag!r} is not a text pipeline step ({known}){'; did you mean ' + repr(close[0]) + '?' if close else ''}") from None
        raise UserError(error["msg"].removeprefix("Value error, ")) from None
    except ValueError as e:
        raise UserError(str(e)) from None


def pipelines_of(data: Any) -> tuple[TextPipeline, TextPipeline] | None:
    """The (source, target) pipelines of a data spec's `pipeline`, None where it has none: what
    translate and evaluate apply to new input."""
    if not data.pipeline:
        return None
    return TextPipeline(data.pipeline, data.src_lang), TextPipeline(data.pipeline, data.tgt_lang)


def processed_file(path: Path, pipeline: TextPipeline, cache: Path) -> Path:
    """`path`'s lines through `pipeline`, as a file under `cache` (written once, atomically)."""
    h = hashlib.sha256(pipeline.key().encode())
    hash_file(h, Path(path))
    out = Path(cache) / "text" / f"{Path(path).name}-{h.hexdigest()[:32]}"
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(out) as f:
            for block in line_blocks(path):
                f.write("".join(pipeline(line) + "\n" for line in block).encode("utf-8"))
    return out


def recorded_pipeline(directory: Path) -> list[dict] | None:
    """The steps `aiayn data --pipeline` applied to the corpus in `directory`, None if it says none
    (or there is no prepared.json: a corpus aiayn did not write). A prepared.json in any other
    shape is an error: guessing would process the text twice, or not at all."""
    path = Path(directory) / PREPARED
    if not path.is_file():
        return None
    fix = f"write the corpus again with `aiayn data`, or delete {PREPARED} if the text in {directory} is raw"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UserError(f"{path} cannot be read as JSON ({e}); {fix}") from None
    steps = record.get("pipeline") if isinstance(record, dict) else None
    if not isinstance(record, dict) or not isinstance(steps, (list, type(None))) or not all(
        isinstance(step, dict) and isinstance(step.get("type"), str) for step in steps or ()
    ):
        what = "its pipeline is not a list of steps, each an object with a type" if isinstance(record, dict) else "it is not a JSON object"
        raise UserError(f"{path} is not what `aiayn data` writes ({what}); {fix}")
    return steps or None


def check_not_tokenized(steps: Sequence[TextStep], train_file: Path, directory: Path | None) -> bool:
    """Whether the corpus in `directory` holds text `steps` made already (so it is not processed
    again); an error when it was processed otherwise, or when the pipeline would tokenize text
    that Moses' tokenizer has tokenized already (its escapes in the training file)."""
    wanted = [step.model_dump(mode="json") for step in steps]
    done = recorded_pipeline(directory) if directory is not None else None
    if done is not None:
        if done == wanted:
            return True
        names = [step.get("type") for step in done]
        raise UserError(
            f"data.pipeline: {directory} holds text that `aiayn data` processed with {names} ({PREPARED}), "
            f"and data.pipeline is {step_names(steps) or '[]'}; set data.pipeline to {names} to train on it as it is, "
            "or point data.dir at the raw corpus"
        )
    step = tokenize_step(steps)
    if step is None or not step.escape:
        return False
    found = _first_escape(train_file)
    if found is not None:
        raise UserError(f"data.pipeline: {looks_tokenized(train_file, *found)}; point data.dir at the raw, untokenized corpus (aiayn data writes it)")
    return False


def looks_tokenized(path: Path, line: int, escape: str) -> str:
    return f"{path} looks tokenized already (line {line} holds {escape!r}, which Moses' tokenizer writes), and moses_tokenize would tokenize it again"


def check_raw(path: Path, steps: Sequence[TextStep], fix: str) -> None:
    """A file given to translate or evaluate, which the run's pipeline will process, must not be
    its output already."""
    step = tokenize_step(steps)
    found = _first_escape(path) if step is not None and step.escape else None
    if found is not None:
        raise UserError(f"{looks_tokenized(path, *found)}; {fix}")


def _first_escape(path: Path) -> tuple[int, str] | None:
    """(line number, escape) of the first of Moses' escapes in the file, if any (a byte search:
    seconds for WMT's training text)."""
    lines, tail = 0, b""
    if not Path(path).is_file():  # evaluating a split whose training files have gone
        return None
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            text = tail + block
            found = [(i, e) for e in MOSES_ESCAPES if (i := text.find(e.encode())) >= 0]
            if found:
                at, escape = min(found)
                return lines + text.count(b"\n", 0, at) + 1, escape
            keep = max(len(e) for e in MOSES_ESCAPES) - 1  # an escape cut by the block's end
            lines, tail = lines + text.count(b"\n", 0, len(text) - keep), text[len(text) - keep :]
    return None
