"""Decoding strategies are registered values (builder/decode/strategy.py, the `strategy` slot): one
Decoding built once from the CLI's flags, the API's arguments, a YAML decode.strategy or a request
translates exactly as the flags that spelled it before; a strategy of one's own is a class and a
registration; what does not go together is one message."""

from dataclasses import dataclass, replace
from typing import Literal

import pytest

from aiayn import StrategySpec, load_run
from aiayn.builder.cli import main
from aiayn.builder.decode.sampling import Sampling
from aiayn.builder.decode.strategy import BeamSearch, Decoding, Greedy, Sampled, Strategy, strategy_of
from aiayn.builder.errors import UserError
from aiayn.builder.run.config import load_experiment
from tests.builder.cli.test_sampling_mbr import LINES, rows, run, source, translator  # noqa: F401  (fixtures)
from tests.conftest import EXPERIMENTS, registry


def test_a_strategy_is_built_from_its_spec_as_yaml_writes_it():
    made = registry()
    assert strategy_of("beam", made) == BeamSearch() and strategy_of({"type": "greedy"}, made) == Greedy()
    assert strategy_of({"type": "sampling", "top_k": 20, "temperature": 0.5}, made) == Sampled(
        Sampling(temperature=0.5, top_k=20)
    )
    typical = strategy_of({"type": "sampling", "filters": [{"type": "typical", "mass": 0.5}]}, made)
    assert isinstance(typical, Sampled) and len(typical.sampling.filters) == 1
    for given, message in [
        (
            "contrastive",
            "strategy: input tag 'contrastive' found using 'type' does not match any of the expected tags: 'beam', 'greedy', "
            "'sampling'",
        ),
        ({"type": "sampling", "top_p": 2}, "strategy: top_p: Input should be less than or equal to 1"),
        ({"type": "sampling", "beam": 4}, "strategy: beam: Extra inputs are not permitted"),
        (
            {"type": "sampling", "temperature": 1e-40},
            "strategy: temperature: 1e-40 is too small for float32, which the model "
            "computes in (it becomes 0 or loses its precision); give a value between 1.2e-38 and 3.4e+38 in magnitude",
        ),
        (4, "strategy: expected a decoding strategy ({type: ..., ...}), got int 4"),
    ]:
        with pytest.raises(UserError) as e:
            strategy_of(given, made)
        assert str(e.value).partition(" (strategies")[0].lower() == message.lower(), str(e.value)
        assert str(e.value).endswith("(strategies: beam, greedy, sampling)") or isinstance(given, int)


def test_the_apis_strategy_and_decoding_translate_as_its_flags(translator):  # noqa: F811
    flags = translator.translate(LINES, n_best=3, sampling=True, top_k=20, seed=3, with_scores=True)
    named = translator.translate(LINES, n_best=3, strategy={"type": "sampling", "top_k": 20}, seed=3, with_scores=True)
    decoding = Decoding(Sampled(Sampling(top_k=20)), n_best=3, seed=3)
    given = translator.translate(LINES, n_best=3, decoding=decoding, with_scores=True)
    assert [[t.text for t in g] for g in named] == [[t.text for t in g] for g in flags] == [[t.text for t in g] for g in given]
    assert [[t.score for t in g] for g in named] == [[t.score for t in g] for g in flags]
    assert translator.translate(LINES, strategy="beam") == translator.translate(LINES)
    assert translator.translate(LINES, decoding=Decoding(n_best=2), n_best=2) == translator.translate(LINES, n_best=2)
    assert translator.translate(LINES, decoding=replace(decoding, n_best=1)) == translator.translate(
        LINES, sampling=True, top_k=20, seed=3
    )


def test_what_does_not_go_with_a_strategy_is_refused_by_name(translator):  # noqa: F811
    for kwargs, message in [
        (dict(strategy="sampling", sampling=True), "strategy: it says how to decode, and so does sampling=True; give one of them"),
        (dict(decoding=Decoding(), seed=2), "seed: decoding says how to decode; give it there, or drop decoding"),
        (dict(decoding=Decoding(n_best=2), n_best=3), "n_best (3) differs from decoding.n_best (2): give one of them"),
        (dict(decoding=Decoding(n_best=9)), "decoding.n_best (9) is more than the beam size (4): a search keeps 4 hypotheses a "
         "sentence; raise beam to at least 9"),
        (dict(decoding="beam"), "decoding: expected an aiayn Decoding, got str 'beam'"),
        (dict(strategy="sampling", n_best=2, beam=2, temperature=2.0), "temperature: it shapes sampling; give sampling=True, or drop it"),
    ]:  # fmt: skip
        with pytest.raises(UserError) as e:
            translator.translate(LINES, **kwargs)
        assert str(e.value) == message


def test_the_runs_decode_strategy_is_what_translates_where_no_call_names_one(run, translator, source, capsys):  # noqa: F811
    spec = translator.spec.model_copy(update={"decode": translator.spec.decode.model_copy(update={"strategy": _sampling(20)})})
    sampled = type(translator)(translator.model, spec, translator.src_tokenizer, translator.tgt_tokenizer, run, "step")
    assert sampled.translate(LINES, seed=4) == translator.translate(LINES, sampling=True, top_k=20, seed=4)
    assert sampled.translate(LINES, strategy="beam") == translator.translate(LINES)
    experiment = load_experiment(EXPERIMENTS / "demo.yaml", ["decode.strategy={type: sampling, top_p: 0.9}"], registry=registry())
    assert strategy_of(experiment.decode.strategy, registry()) == Sampled(Sampling(top_p=0.9))


def test_a_run_that_samples_by_default_lists_any_number_of_samples(tmp_path, capsys):
    """A run whose decode.strategy samples has no beam to bound --n-best (the command line asks the strategy)."""
    from tests.builder.decode.test_checkpoint import make_run

    sampled = make_run(tmp_path, seed=21, overrides=("decode.strategy={type: sampling, top_k: 20}",))
    line = tmp_path / "src.txt"
    line.write_text("she sold eight apples\n")
    assert main(["translate", str(sampled), "--input", str(line), "--n-best", "9", "--seed", "3"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 9  # more than the beam's 4


def _sampling(top_k: int):
    return load_experiment(
        EXPERIMENTS / "demo.yaml", [f"decode.strategy={{type: sampling, top_k: {top_k}}}"], registry=registry()
    ).decode.strategy


def test_the_command_lines_strategy_is_its_sampling_flags(run, source, capsys):  # noqa: F811
    common = ["translate", str(run), "--input", str(source), "--n-best", "3", "--seed", "3", "--scores"]
    assert main([*common, "--sampling", "--top-k", "20"]) == 0
    flags = rows(capsys.readouterr().out)
    assert main([*common, "--strategy", "{type: sampling, top_k: 20}"]) == 0
    assert rows(capsys.readouterr().out) == flags
    for extra, message in [
        (["--strategy", "sampling", "--sampling"], "--strategy: it says how to decode, and so does --sampling; give one of them"),
        (["--strategy", "{type: sampling, top_p: 0}"], "--strategy: top_p: Input should be greater than 0 (strategies: beam, greedy, sampling)"),
        (["--strategy", "{type:"], "--strategy {type:: not a YAML mapping; give a type (sampling) or '{type: sampling, top_p: 0.9}'"),
    ]:  # fmt: skip
        assert main(["translate", str(run), "--input", str(source), *extra]) == 2
        assert capsys.readouterr().err == f"aiayn translate: error: {message}\n"


class WorstFirstSpec(StrategySpec):
    """The beam's candidates, the worst first (a strategy of one's own, for the test)."""

    type: Literal["worst_first"] = "worst_first"


@dataclass(frozen=True)
class WorstFirst(Strategy):
    def n_best_limit(self, decode):
        return decode.beam

    def hypotheses(self, model, src, decode, wanted):
        found = BeamSearch().hypotheses(model, src, decode, wanted)
        return [hyps[::-1] for hyps in found]


def test_a_strategy_of_ones_own_is_a_class_and_a_registration(run):  # noqa: F811
    extended = registry().extended(lambda r: r.add(WorstFirstSpec, slot="strategy", build=lambda spec: WorstFirst()))
    mine = load_run(run, device="cpu", registry=extended)
    beam = mine.translate(LINES, n_best=4, with_scores=True)
    worst = mine.translate(LINES, n_best=4, strategy="worst_first", with_scores=True)
    assert [[t.ids for t in g] for g in worst] == [[t.ids for t in g[::-1]] for g in beam]
    assert any([t.ids for t in g] != [t.ids for t in b] for g, b in zip(worst, beam))  # it chose otherwise
    first = mine.translate(LINES, decoding=Decoding(WorstFirst(), n_best=4))  # the first of each line's four
    assert first == [g[0].text for g in worst]
