"""data.pipeline at run time: the steps each line goes through before BPE, for one language;
the processed files cached on disk; the check that a corpus is not tokenized already.

Each step's function is made by its registration (aiayn's own, sacremoses' ports of Moses'
scripts, in text_steps.py; a plugin's). Processing a split is deterministic, so the processed
files are cached under a key of the file's bytes, the language, the steps, sacremoses' version and
each plugin step's distribution, as the token cache keys on the text and the tokenizer (data/cache.py).
"""

import difflib
import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

from aiayn.builder.data.cache import hash_file
from aiayn.builder.data.corpus import line_blocks
from aiayn.builder.errors import UserError
from aiayn.builder.graph import graph_of
from aiayn.builder.registry import Registry, registry_of
from aiayn.builder.run.atomic import atomic_write
from aiayn.builder.run.jsonfile import read_json
from aiayn.schemas.text import MOSES_ESCAPES, TextStep, step_names, tokenize_step

FORMAT_VERSION = 2  # 2: the steps' owners in the key
PREPARED = "prepared.json"  # what `aiayn data` records in a corpus folder, its pipeline among it


def _step(step: TextStep, lang: str, registry: Registry) -> Callable[[str], str]:
    """The step's function of a line, made by its registration (aiayn's or a plugin's)."""
    return registry.registration(step).build(step, lang)


class TextPipeline:
    """The steps of data.pipeline for one language: `pipeline(line)` is the processed line."""

    def __init__(self, steps: Sequence[TextStep], lang: str, registry: Registry) -> None:
        self.steps, self.lang, self.registry = tuple(steps), lang, registry
        self._functions = [_step(step, lang, self.registry) for step in self.steps]
        self.tokenizer = tokenize_step(self.steps)
        if self.tokenizer is not None and not callable(getattr(self._functions[-1], "undo", None)):
            raise UserError(
                f"the text step {self.tokenizer.type!r} tokenizes, but its registration makes no undo(line): detokenizing needs one"
            )

    def __call__(self, line: str) -> str:
        for function in self._functions:
            line = function(line)
        return line

    def lines(self, lines: Iterable[str]) -> list[str]:
        return [self(line) for line in lines]

    def __repr__(self) -> str:
        return f"TextPipeline([{', '.join(step.type for step in self.steps)}], lang={self.lang!r})"

    @property
    def lowercases(self) -> bool:
        return any(step.lowercases for step in self.steps)

    def detokenize(self, line: str) -> str:
        """Plain text from this pipeline's output (its tokenizing step's undo: Moses' detokenizer.perl,
        escapes undone); the line as it is when the pipeline does not tokenize. Lowercasing cannot be undone."""
        return line if self.tokenizer is None else self._functions[-1].undo(line)  # type: ignore[attr-defined]

    def key(self) -> str:
        """What the output depends on: the steps, the language, sacremoses' version (aiayn's steps)
        and the version of each plugin distribution that registered a step."""
        steps = [step.model_dump(mode="json") for step in self.steps]
        owner = self.registry.owner
        owners = sorted({owner(step.type) for step in self.steps} - {owner("lowercase")})
        return json.dumps(
            {"v": FORMAT_VERSION, "steps": steps, "lang": self.lang, "sacremoses": version("sacremoses"), "owners": owners}
        )


def parse_steps(names: Sequence[Any], registry: Registry) -> tuple[TextStep, ...]:
    """data.pipeline's steps from their names (or {type: ...} mappings), checked as the schema checks them."""
    from pydantic import TypeAdapter, ValidationError

    from aiayn.schemas.text import check_steps, named_steps

    try:
        steps = TypeAdapter(tuple[TextStep, ...]).validate_python(named_steps(list(names)), context=registry.context)
        return check_steps(tuple(steps))
    except ValidationError as e:
        error = e.errors()[0]
        if error["type"] == "union_tag_invalid":
            known = list(registry.classes("text_step"))
            tag = error["ctx"]["tag"]
            close = difflib.get_close_matches(str(tag), known, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise UserError(f"{tag!r} is not a text pipeline step ({', '.join(known)}){hint}") from None
        raise UserError(error["msg"].removeprefix("Value error, ")) from None
    except ValueError as e:
        raise UserError(str(e)) from None


def pipelines_of(spec: Any) -> tuple[TextPipeline, TextPipeline] | None:
    """The (source, target) pipelines of an experiment's `data.pipeline`, None where it has none:
    what translate and evaluate apply to new input, each with its language's rules (the languages
    the graph reads and writes: a language model's are both its side's)."""
    data, registry = spec.data, registry_of(spec)
    if not data.pipeline:
        return None
    reads, writes = graph_of(spec).languages(spec)
    source = TextPipeline(data.pipeline, reads, registry)
    return source, source if writes == reads else TextPipeline(data.pipeline, writes, registry)


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
        record = read_json(path)
    except (OSError, ValueError) as e:
        raise UserError(f"{path} cannot be read as JSON ({e}); {fix}") from None
    steps = record.get("pipeline") if isinstance(record, dict) else None
    if (
        not isinstance(record, dict)
        or not isinstance(steps, (list, type(None)))
        or not all(isinstance(step, dict) and isinstance(step.get("type"), str) for step in steps or ())
    ):
        what = (
            "its pipeline is not a list of steps, each an object with a type"
            if isinstance(record, dict)
            else "it is not a JSON object"
        )
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
    found = _first_mark(train_file, steps)
    if found is not None:
        raise UserError(
            f"data.pipeline: {looks_tokenized(train_file, *found)}; point data.dir at the raw, untokenized corpus (aiayn data writes it)"
        )
    return False


def looks_tokenized(path: Path, line: int, mark: str, step: str) -> str:
    who = "Moses' tokenizer" if step == "moses_tokenize" else f"the text step {step}"
    return f"{path} looks tokenized already (line {line} holds {mark!r}, which {who} writes), and {step} would tokenize it again"


def _first_mark(path: Path, steps: Sequence[TextStep]) -> tuple[int, str, str] | None:
    """(line, mark, the step that writes it) of the first mark of the steps' output in `path`."""
    marks = {mark: step.type for step in steps for mark in step.marks}
    found = _first_escape(path, tuple(marks)) if marks else None
    return None if found is None else (*found, marks[found[1]])


def check_raw(path: Path, steps: Sequence[TextStep], fix: str) -> None:
    """A file given to translate or evaluate, which the run's pipeline will process, must not be
    its output already."""
    found = _first_mark(path, steps)
    if found is not None:
        raise UserError(f"{looks_tokenized(path, *found)}; {fix}")


def _first_escape(path: Path, marks: Sequence[str] = MOSES_ESCAPES) -> tuple[int, str] | None:
    """(line number, escape) of the first of Moses' escapes in the file, if any (a byte search:
    seconds for WMT's training text)."""
    lines, tail = 0, b""
    if not Path(path).is_file():  # evaluating a split whose training files have gone
        return None
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            text = tail + block
            found = [(i, e) for e in marks if (i := text.find(e.encode())) >= 0]
            if found:
                at, escape = min(found)
                return lines + text.count(b"\n", 0, at) + 1, escape
            keep = max(len(e) for e in marks) - 1  # an escape cut by the block's end
            lines, tail = lines + text.count(b"\n", 0, len(text) - keep), text[len(text) - keep :]
    return None
