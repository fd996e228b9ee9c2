"""The Python API with `import aiayn` alone: an experiment loaded with overrides and its model
built (its count as `aiayn show` counts it), and a run loaded that translates as `aiayn
translate` does."""

import ast
import json
import os
import subprocess
import sys

import pytest

import aiayn
from tests.builder.cli.test_bad_inputs import TINY, cli
from tests.conftest import EXPERIMENTS, ROOT

DEMO = EXPERIMENTS / "demo.yaml"
LINES = ["she sold eight apples", "", "we counted two pictures"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    code, _, err = cli("train", DEMO, *TINY, "trainer.max_steps=3", f"data.cache_dir={root / 'cache'}", "--runs", root / "runs")
    assert code == 0, err
    return root / "runs" / "demo" / "version_0"


def test_an_experiment_and_its_model():
    spec = aiayn.load_experiment(DEMO, ["dims.N=1"])
    assert isinstance(spec, aiayn.ExperimentSpec) and spec.model.encoder.num_layers == 1
    model = aiayn.build_model(spec)
    shown = json.loads(cli("show", DEMO, "dims.N=1", "--json")[1])["params"]
    assert sum(p.numel() for p in model.parameters()) == shown
    with pytest.raises(aiayn.UserError) as error:
        aiayn.load_experiment(DEMO, ["dims.h=0"])
    assert str(error.value).endswith("\n  dims.h: input should be greater than 0, got 0 (set in overrides: dims.h=0)")


def test_a_run_translates_as_the_cli_does(run, tmp_path):
    translator = aiayn.load_run(run)
    assert translator.what == "step 3" and translator.checkpoint == run / "checkpoints" / "last.ckpt"
    source = tmp_path / "in.en"
    source.write_text("".join(line + "\n" for line in LINES))
    code, out, err = cli("translate", run, "--input", source)
    assert code == 0, err
    assert translator.translate(LINES) == out.splitlines()
    assert translator.translate(LINES[0]) == out.splitlines()[:1]
    code, out, _ = cli("translate", run, "--input", source, "--beam", "1", "--max-len-b", "2")
    assert translator.translate(LINES, beam=1, max_len_b=2) == out.splitlines()
    with pytest.raises(aiayn.UserError) as error:
        translator.translate(LINES, beam=0)
    assert str(error.value) == "decode: beam: input should be greater than 0, got 0"
    with pytest.raises(aiayn.UserError):
        translator.translate(LINES, detokenize=True)  # the demo's text is not tokenized


def test_the_api_needs_nothing_but_import_aiayn(run):
    """A fresh interpreter: the names resolve from the top-level package alone."""
    code = (
        "import aiayn\n"
        f"t = aiayn.load_run({str(run)!r})\n"
        "print(len(t.translate(['she sold eight apples', 'the dog'])))\n"
        f"print(aiayn.build_model(aiayn.load_experiment({str(DEMO)!r})).__class__.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True
    )
    assert done.stdout.splitlines() == ["2", "EncoderDecoder"], done.stderr


def test_n_best_lists_and_scores_agree_with_the_cli(run, tmp_path):
    translator = aiayn.load_run(run)
    source = tmp_path / "in.en"
    source.write_text("".join(line + "\n" for line in LINES))
    records = translator.translate(LINES, n_best=2, with_scores=True)
    assert [len(group) for group in records] == [2, 1, 2]  # a blank line: one empty translation
    assert records[1][0].text == "" and records[1][0].score == 0.0
    assert [[r.text for r in group] for group in records] == translator.translate(LINES, n_best=2)
    assert [group[0].text for group in records] == translator.translate(LINES)
    code, out, err = cli("translate", run, "--input", source, "--n-best", "2", "--scores")
    assert code == 0, err
    rows = [line.split("\t") for line in out.splitlines()]
    assert [(int(i), text) for i, _, text in rows] == [(i, r.text) for i, group in enumerate(records) for r in group]
    assert [float(score) for _, score, _ in rows] == pytest.approx([r.score for group in records for r in group], abs=1e-6)
    for r in (r for group in records for r in group if r.ids):
        assert r.tokens == [translator.tgt_tokenizer.id_to_token(i) for i in r.ids]
        assert sum(r.token_log_probs) == pytest.approx(r.log_prob, abs=1e-4)
        assert r.length == len(r.token_log_probs) and r.length in (len(r.ids), len(r.ids) + 1)


def test_forced_scores_of_the_translations_are_their_scores_in_python_and_the_cli(run, tmp_path):
    """Scoring a translation's text gives its token log-probabilities (this 3-step model never
    ends with EOS, so each is cut at the length limit; test_scores.py compares whole scores of
    hypotheses that end), and `aiayn score` writes what `Translator.score` returns."""
    translator = aiayn.load_run(run)
    sources = [line for line in LINES if line.strip()] + ["the dog"]
    best = [group[0] for group in translator.translate(sources, with_scores=True, alignments=True)]
    scores = translator.score(sources, [b.text for b in best], alignments=True)
    compared = [i for i, (b, s) in enumerate(zip(best, scores)) if s.ids == b.ids]  # the text tokenizes back to the same ids
    assert compared
    for i in compared:
        n = len(best[i].ids)
        assert scores[i].token_log_probs[:n] == pytest.approx(best[i].token_log_probs[:n], abs=1e-4)
        assert scores[i].length == n + 1  # a given target ends with EOS
        assert scores[i].alignment == best[i].alignment
    src, tgt = tmp_path / "s.txt", tmp_path / "t.txt"
    src.write_text("".join(s + "\n" for s in sources))
    tgt.write_text("".join(b.text + "\n" for b in best))
    code, out, err = cli("score", run, "--src", src, "--tgt", tgt, "--per-token", "--alignments")
    assert code == 0, err
    for columns, s in zip((line.split("\t") for line in out.splitlines()), scores):
        assert len(columns) == 5
        assert float(columns[0]) == pytest.approx(s.log_prob, abs=1e-6) and int(columns[1]) == s.length
        assert [float(x) for x in columns[2].split()] == pytest.approx(s.token_log_probs, abs=1e-6)
        assert columns[3] == s.pharaoh() and float(columns[4]) == pytest.approx(s.score, abs=1e-6)
    code, out, _ = cli("score", run, "--src", src, "--tgt", tgt, "--alpha", "0")
    assert [float(line.split("\t")[-1]) for line in out.splitlines()] == pytest.approx([s.log_prob for s in scores], abs=1e-6)


def test_the_api_refuses_wrong_arguments_by_name(run):
    translator = aiayn.load_run(run)
    refused = {
        lambda: aiayn.load_experiment(None): "path: expected a path (a str or pathlib.Path), got None",
        lambda: aiayn.load_experiment(3): "path: expected a path (a str or pathlib.Path), got int 3",
        lambda: aiayn.load_experiment(
            DEMO, "dims.h=2"
        ): "overrides: expected a list of strings, got the string 'dims.h=2'; wrap it in a list: ['dims.h=2']",
        lambda: aiayn.load_experiment(DEMO, ["dims.h=2", None]): "overrides[1]: expected a string, got None",
        lambda: aiayn.build_model(
            "demo.yaml"
        ): "spec: expected an ExperimentSpec or its model section, got str 'demo.yaml'; aiayn.load_experiment(path) reads one",
        lambda: aiayn.build_model(None): "spec: expected an ExperimentSpec or its model section, got None",
        lambda: aiayn.load_run(None): "path: expected a path (a str or pathlib.Path), got None",
        lambda: aiayn.load_run(run, device="tpu0"): "device 'tpu0' is not a torch device; use e.g. cpu, cuda or cuda:1",
        lambda: aiayn.load_run(run, device=0.5): "device: expected a device name such as 'cpu' or 'cuda', got float 0.5",
        lambda: translator.translate(None): "lines: expected a list of strings, got None",
        lambda: translator.translate(7): "lines: expected a list of strings, got int 7",
        lambda: translator.translate(["a", None]): "lines[1]: expected a string, got None",
        lambda: translator.translate(LINES, n_best=0): "n_best: expected a whole number >= 1, got int 0",
        lambda: translator.translate(LINES, n_best=True): "n_best: expected a whole number >= 1, got bool True",
        lambda: translator.translate(
            LINES, n_best=3
        ): "n_best (3) is more than the beam size (2): a search keeps 2 hypotheses a sentence; raise beam to at least 3",
        lambda: translator.translate(
            LINES, alignments=True, alignment_layer=1
        ): "alignment_layer: the decoder's layers are 0 to 0, got int 1",
        lambda: translator.score(["a"], ["b", "c"]): "1 sources but 2 targets: give one target per source",
        lambda: translator.score(["a", " "], ["b", "c"]): "sources[1] is blank: there is nothing to score its target against",
        lambda: translator.score("a", ["b"]): "sources: expected a list of strings, got the string 'a'; wrap it in a list: ['a']",
        lambda: translator.to("tpu"): "device 'tpu' is not a torch device; use e.g. cpu, cuda or cuda:1",
        lambda: translator.translate(LINES, alignments="yes"): "alignments: expected True or False, got str 'yes'",
        lambda: translator.translate(LINES, with_scores=1): "with_scores: expected True or False, got int 1",
        lambda: translator.score(["a"], ["b"], alignments=None): "alignments: expected True or False, got None",
        lambda: translator.translate(["a b c"], max_input_len=1): "input line 1 has 4 tokens, more than "
        "decode.max_input_len (1); split that line, or raise the limit (max_input_len)",  # the command says --max-input-len
    }
    for call, message in refused.items():
        with pytest.raises(aiayn.UserError) as error:
            call()
        assert str(error.value) == message


def test_a_translator_has_a_short_repr_and_every_public_name_a_docstring(run):
    translator = aiayn.load_run(run)
    params = sum(p.numel() for p in translator.model.parameters())
    assert repr(translator) == f"Translator({str(run / 'checkpoints' / 'last.ckpt')!r}, step 3, {params:,} parameters, on cpu)"
    undocumented = [name for name in aiayn.__all__ if not (getattr(aiayn, name).__doc__ or "").strip()]
    assert undocumented == []
    methods = [m for m in ("translate", "score", "to", "decode_spec", "pipelines") if not getattr(aiayn.Translator, m).__doc__]
    assert methods == []


def test_the_typed_import_block_names_what_the_lazy_map_names():
    # type checkers read the `if TYPE_CHECKING:` block; `import aiayn` reads the lazy map: one list
    tree = ast.parse((ROOT / "aiayn" / "__init__.py").read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", None) == "TYPE_CHECKING")
    typed = {a.asname: node.module for node in block.body if isinstance(node, ast.ImportFrom) for a in node.names}
    assert typed == aiayn._PUBLIC
    assert all(a.asname == a.name for node in block.body for a in node.names)  # re-exported under their own names
