"""The places outside blocks/ that know which graph they hold (issue 63): callers ask the model
(blocks/model.py's TransformerModel: memory_is_prompt, cross_attention, source_extra,
first_output_id, stacks, graph) instead of its class. A line asks the graph where it tests a
class of graph (isinstance of DecoderOnly or EncoderDecoder), a spec's `decoder_only` or a missing
encoder (`.encoder is None`), or probes for an encoder's attributes; an `assert` that narrows a
type after a refusal (a Marian or CTranslate2 writer, which hold one graph) asks nothing. Every such
line carries a `# graph:` comment saying why, and so does any line marked so; at most MAX_FILES
files hold them."""

import re

from tests.conftest import ROOT

QUESTION = re.compile(
    r"isinstance\([^)]*\b(DecoderOnly|EncoderDecoder)\b"
    r"|\bdecoder_only\b"
    r"|\.encoder is (not )?None"
    r"|(get|has)attr\([^)]*[\"'](encoder|src_embed)[\"']"
)
MARK = "# graph: "
MAX_FILES = 5  # the model's builder, its figure, its summary, and the two of export that route and refuse


def graph_places() -> dict[str, list[str]]:
    """{file: [line, ...]} of the lines outside blocks/ (and schemas/, where the graphs are defined) that ask."""
    found: dict[str, list[str]] = {}
    for folder in ("builder", "aiayn"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("#")[0]
                if (QUESTION.search(code) and not code.lstrip().startswith("assert ")) or MARK in line:
                    found.setdefault(str(path.relative_to(ROOT)), []).append(f"{n}: {line.strip()}")
    return found


def test_every_place_that_knows_the_graph_says_why_and_there_are_few():
    places = graph_places()
    unmarked = [f"{f}:{line}" for f, lines in places.items() for line in lines if MARK not in line]
    assert not unmarked, "ask the model (blocks/model.py), or say why with '# graph: ...':\n" + "\n".join(unmarked)
    assert len(places) <= MAX_FILES, places
    assert sorted(places) == [
        "builder/export/__init__.py",
        "builder/export/limits.py",
        "builder/model/build.py",
        "builder/model/figure.py",
        "builder/model/summary.py",
    ], places


def test_the_questions_are_recognised():
    for line in (
        "if isinstance(model, DecoderOnly):",
        "x = isinstance(m, (EncoderDecoder, Ensemble))",
        "if spec.model.decoder_only and data.side is None:",
        "if spec.encoder is None:",
        'embed = getattr(model, "src_embed", model.tgt_embed)',
    ):
        assert QUESTION.search(line), line
    for line in ("if model.memory_is_prompt:", "assert graph is not None", "left = None if encoder is None else Column()"):
        assert not QUESTION.search(line), line
