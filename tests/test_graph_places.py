"""Outside the graph files nobody asks which graph they hold (issue 72).

A graph is a registered value (schemas/graph.py's spec, builder/graphs/ its registration); what
the rest of aiayn needs to know it asks the graph (builder/graph.py's `graph_of(spec)`: the model
it builds, its inference object, its validation, its export) or the inference object
(builder/decode/inference.py: its task, endpoints, verbs, tokenizers). A line asks which graph it
holds where it tests a class of graph or of inference object, a spec's `decoder_only` or a missing
encoder, the task by value, a language model's side, the layout of a pair read as one sequence
(`JointLayout`, `pairs_in_one_sequence`, `memory_is_prompt`, a `joint` layout), or probes a model
for an encoder's attributes. An `assert` that narrows a type after a refusal asks nothing.

The goal is none outside builder/graph.py and builder/graphs/. `REMAINING` lists, file by file, the
lines not yet moved (the data layer's reading of a language model's side and of a pair's layout,
the ensemble's and the validation's reading of the model); it may only shrink:
a new line anywhere fails the test, and so does a file that asks less than it is allowed without
its entry being lowered."""

import re
from pathlib import Path

from tests.conftest import ROOT

QUESTION = re.compile(
    r"isinstance\([^)]*\b(DecoderOnly|EncoderDecoder|LanguageModel|Translator|DecoderOnlySpec|EncoderDecoderSpec)\b"
    r"|\bdecoder_only\b"
    r"|\.encoder is (not )?None"
    r"|\btask\s*[!=]="
    r"|\.side\b"
    r"|\bJointLayout\b|\bpairs_in_one_sequence\b|\bmemory_is_prompt\b|\bself\.joint\b"
    r"|(get|has)attr\([^)]*[\"'](encoder|src_embed|generate|translate)[\"']"
)
GRAPH_FILES = ("builder/graph.py", "builder/graphs/")
# file -> the lines that still ask (goal: none; lower an entry when a file asks less, never raise one)
REMAINING: dict[str, int] = {}  # every line moved: a graph is asked, never named


def graph_places(root: Path = ROOT) -> dict[str, list[str]]:
    """{file: [line, ...]} of the lines outside the graph files (and schemas/, blocks/) that ask."""
    found: dict[str, list[str]] = {}
    for folder in ("builder", "aiayn"):
        for path in sorted((root / folder).rglob("*.py")):
            name = str(path.relative_to(root))
            if name.startswith(GRAPH_FILES):
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("#")[0]
                if QUESTION.search(code) and not code.lstrip().startswith("assert "):
                    found.setdefault(name, []).append(f"{n}: {line.strip()}")
    return found


def excess(found: dict[str, list[str]]) -> list[str]:
    """The files that ask more than REMAINING allows them, with their lines."""
    return [
        f"{name} ({len(lines)} > {REMAINING.get(name, 0)}):\n  " + "\n  ".join(lines)
        for name, lines in sorted(found.items())
        if len(lines) > REMAINING.get(name, 0)
    ]


def test_outside_the_graph_files_nobody_asks_which_graph_they_hold():
    found = graph_places()
    assert not excess(found), "ask the graph (builder/graph.py's graph_of) or the inference object:\n" + "\n".join(excess(found))
    shrunk = {name: len(found.get(name, [])) for name, allowed in REMAINING.items() if len(found.get(name, [])) < allowed}
    assert not shrunk, f"fewer lines ask now: lower REMAINING to {shrunk}"
    assert sum(REMAINING.values()) == 0  # the lines left to move (57 before the graph became a value)


def test_a_line_that_asks_is_caught(tmp_path):
    for folder, line in (
        ("builder/train", "if spec.task == 'language_model':"),
        ("builder/cli", "if isinstance(model, LanguageModel):"),
        ("builder/export", "if spec.model.encoder is None:"),
        ("builder/serve", "tokenizer = model.tokenizer if data.side else model.src_tokenizer"),
        ("aiayn", "one = spec.pairs_in_one_sequence"),
    ):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "oops.py").write_text(line + "\n")
    (tmp_path / "builder" / "graphs").mkdir()
    (tmp_path / "builder" / "graphs" / "mine.py").write_text("if spec.data.side is not None:\n")  # a graph's own file
    found = graph_places(tmp_path)
    assert sorted(found) == [f"{f}/oops.py" for f in ("aiayn", "builder/cli", "builder/export", "builder/serve", "builder/train")]
    assert len(excess(found)) == 5


def test_the_questions_are_recognised():
    for line in (
        "if isinstance(model, DecoderOnly):",
        "x = isinstance(m, (EncoderDecoder, Ensemble))",
        "if spec.model.decoder_only and data.side is None:",
        "if spec.encoder is None:",
        'embed = getattr(model, "src_embed", model.tgt_embed)',
        'if not hasattr(model, "generate"):',
        "if loaded.spec.task != 'language_model':",
        "if self.joint is not None:",
        "if model.memory_is_prompt:",
    ):
        assert QUESTION.search(line), line
    for line in ("graph = graph_of(spec)", "left = None if encoder is None else Column()", 'model.check_verb("generate", path)'):
        assert not QUESTION.search(line), line
