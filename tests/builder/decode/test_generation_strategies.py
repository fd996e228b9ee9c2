"""A language model continues its prompts by a strategy value as a translation model finds its
candidates: `greedy`, `beam` (the run's decode.beam) and `sampling` by name, by spec or as a value,
from the API, `aiayn generate --strategy` and a request, each equal to the flags that say the same;
a beam that holds every candidate finds the best continuation of all; a chooser may ask the loop
for the decoder's hidden states, and gets the ones the logits are projected from."""

import itertools
import math
import shutil

import pytest
import torch

from aiayn import load_run
from aiayn.blocks import TransformerModel
from aiayn.builder.cli import main
from aiayn.builder.decode.loop import Step, continue_prompts, decode_sources
from aiayn.builder.decode.sampling import Sampling
from aiayn.builder.decode.search import Beams, beam_continuations
from aiayn.builder.decode.strategy import BeamSearch, Greedy, Sampled, Strategy
from aiayn.builder.errors import UserError
from tests.builder.decode.test_sampling_filters import FIXTURES

PROMPTS = ["a man", "two dogs", "a"]


@pytest.fixture
def runs(tmp_path):
    shutil.copytree(FIXTURES, tmp_path / "runs")
    return tmp_path / "runs"


def test_a_strategy_by_name_spec_or_value_continues_as_the_flags_that_say_it(runs):
    lm = load_run(runs / "lm" / "version_0")
    greedy = lm.generate(PROMPTS, greedy=True, max_new_tokens=6)
    assert lm.generate(PROMPTS, strategy="greedy", max_new_tokens=6) == greedy
    assert lm.generate(PROMPTS, strategy=Greedy(), max_new_tokens=6) == greedy
    drawn = lm.generate(PROMPTS, top_k=5, temperature=1.5, seed=3, max_new_tokens=6)
    spec = {"type": "sampling", "top_k": 5, "temperature": 1.5}
    assert lm.generate(PROMPTS, strategy=spec, seed=3, max_new_tokens=6) == drawn
    assert lm.generate(PROMPTS, strategy=Sampled(Sampling(temperature=1.5, top_k=5)), seed=3, max_new_tokens=6) == drawn
    assert drawn != lm.generate(PROMPTS, strategy=spec, seed=4, max_new_tokens=6)  # the seed reaches the sampler
    beam = lm.generate(PROMPTS, strategy="beam", max_new_tokens=6)
    ids = [[lm.model.source_bos_id, *p] for p in lm.tokenizer.encode_batch(PROMPTS)]
    decode = lm.spec.decode
    for text, prompt in zip(beam, ids):
        found = beam_continuations(
            lm.model, torch.tensor([prompt]), steps=6, eos_id=lm.tokenizer.eos_id, beam=decode.beam, alpha=decode.alpha,
            length_penalty=decode.length_penalty, early_stopping=decode.early_stopping,
        )[0]  # fmt: skip
        assert text == lm.tokenizer.decode([*prompt[1:], *found])


def test_aiayn_generate_strategy_prints_what_its_flags_print(runs, capsys):
    run = str(runs / "lm" / "version_0")

    def printed(*flags: str) -> str:
        assert main(["generate", run, "-p", "a man", "-p", "two", "-n", "6", *flags]) == 0
        return capsys.readouterr().out

    assert printed("--strategy", "greedy") == printed("--greedy")
    assert printed("--strategy", "{type: sampling, top_p: 0.8}", "--seed", "2") == printed("--top-p", "0.8", "--seed", "2")
    assert printed("--strategy", "beam") == "".join(
        f"{t}\n" for t in load_run(run).generate(["a man", "two"], strategy="beam", max_new_tokens=6)
    )
    for flags, message in [
        (["--strategy", "greedy", "--greedy"], "--strategy: it says how to generate, and so does --greedy; give one of them"),
        (["--strategy", "beam", "--top-k", "3"], "--strategy: it says how to generate, and so does --top-k; give one of them"),
        (["--strategy", "{type: sampling, top_k: -1}"], "--strategy: top_k: Input should be greater than or equal to 0 (strategies: beam, greedy, sampling)"),
    ]:  # fmt: skip
        assert main(["generate", run, "-p", "a", *flags]) == 2
        assert capsys.readouterr().err == f"aiayn generate: error: {message}\n"


class SourcesOnly(Strategy):
    def hypotheses(self, model, src, decode, wanted):
        return BeamSearch().hypotheses(model, src, decode, wanted)


def test_what_does_not_go_together_is_one_message(runs):
    lm = load_run(runs / "lm" / "version_0")
    for kwargs, message in [
        ({"strategy": "greedy", "greedy": True}, "strategy: it says how to generate, and so does greedy; give one of them"),
        ({"strategy": "beam", "top_p": 0.5}, "strategy: it says how to generate, and so does top_p; give one of them"),
        ({"strategy": "beam", "filters": ["typical"]}, "strategy: it says how to generate, and so does filters; give one of them"),
        ({"greedy": True, "epsilon": 0.1}, "epsilon: it shapes sampling, and greedy takes the most probable token: give one or the other"),
        ({"greedy": "yes"}, "greedy: expected True or False, got str 'yes'"),
        ({"strategy": 3}, "strategy: expected a decoding strategy ({type: ..., ...}), got int 3"),
        ({"strategy": SourcesOnly()}, "the strategy SourcesOnly finds a source's candidates and continues no prompt; "
                                      "generate with greedy, beam or sampling"),
    ]:  # fmt: skip
        with pytest.raises(UserError) as e:
            lm.generate(PROMPTS, **kwargs)
        assert str(e.value) == message


class Bigram(TransformerModel):
    """A model whose next token depends on the last alone, by a table: what a continuation's log P
    is, is a product of its rows (pad 0, eos 2)."""

    pad_id, source_bos_id = 0, 1

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("log_p", table.log())

    def decode(self, tgt, memory, memory_padding_mask, state=None):
        return self.log_p[tgt]  # (B, T, V): each position's next token by its own

    def output_room(self, src):
        return None


def test_a_beam_that_holds_every_candidate_finds_the_best_continuation_of_all():
    """After the prompt's last token 3, token 4 is the least probable of three (0.1), but </s> is
    certain after it; after 5 (0.5) and 6 (0.4) the next is spread over ten tokens. The best
    continuation of at most two tokens is [4]; greedy takes 5, and a beam of two keeps 5 and 6."""
    V = 20
    table = torch.full((V, V), 1e-9)
    table[3, 4], table[3, 5], table[3, 6] = 0.1, 0.5, 0.4
    table[4, 2] = 1.0
    table[5, 10:20] = table[6, 10:20] = 0.1
    table[[0, 1, 2, *range(7, 20)], 2] = 1.0
    model = Bigram(table / table.sum(1, keepdim=True)).eval()
    prompt = torch.tensor([[1, 7, 3]])
    log_p = model.log_p.clone()
    log_p[:, 0] = -math.inf  # never <pad>
    best = max(
        [((), float(log_p[3, 2]))] + [((a,), float(log_p[3, a] + log_p[a, 2])) for a in range(3, V)]
        + [((a, b), float(log_p[3, a] + log_p[a, b])) for a, b in itertools.product(range(3, V), range(1, V)) if b != 2],
        key=lambda item: item[1],
    )  # fmt: skip
    assert best[0] == (4,)
    for use_cache in (True, False):
        assert beam_continuations(model, prompt, steps=2, eos_id=2, beam=V, use_cache=use_cache) == [[4]]
        assert beam_continuations(model, prompt, steps=2, eos_id=2, beam=3, use_cache=use_cache) == [[4]]
    assert beam_continuations(model, prompt, steps=2, eos_id=2, beam=2)[0][0] in (5, 6)
    assert beam_continuations(model, prompt, steps=2, eos_id=2)[0][0] == 5  # greedy


class HiddenGreedy(Strategy):
    """Greedy decoding by a chooser that reads the decoder's hidden states and checks them: the
    output projection of each is the step's log-probabilities."""

    def __init__(self, graph_of):
        self.graph_of, self.steps = graph_of, []

    def chooser(self, model, n, eos_id, device):
        strategy, graph = self, self.graph_of(model)

        class Reading(Beams):
            wants_hidden = True

            def choose(self, at: Step):
                projected = graph.generator(at.hidden).float().log_softmax(-1)
                kept = at.log_probs.isfinite()
                torch.testing.assert_close(projected[kept], at.log_probs[kept], rtol=1e-5, atol=1e-5)
                strategy.steps.append(at.hidden.shape)
                return super().choose(at)

        return Reading(
            n, 1, eos_id=eos_id, alpha=0.0, length_penalty="gnmt", n_best=1, kept=1, early_stopping=True, device=device
        )

    def hypotheses(self, model, src, decode, wanted):
        beams = self.chooser(model, src.size(0), wanted.eos_id, src.device)
        decode_sources(model, src, beams, copies=1, bos_id=wanted.bos_id, eos_id=wanted.eos_id, max_len_a=decode.max_len_a,
                       max_len_b=decode.max_len_b, rules=wanted.rules, use_cache=True)  # fmt: skip
        return beams.best()

    def continuations(self, model, prompts, steps, decode, wanted, use_cache=True):
        beams = self.chooser(model, prompts.size(0), wanted.eos_id, prompts.device)
        continue_prompts(model, prompts, beams, copies=1, steps=steps, eos_id=wanted.eos_id, use_cache=use_cache)
        return [hyps[0].ids for hyps in beams.best()]


def test_a_chooser_that_wants_hidden_states_gets_the_ones_the_logits_come_from(runs):
    lm = load_run(runs / "lm" / "version_0")
    reading = HiddenGreedy(lambda model: model.graph())
    assert lm.generate(PROMPTS, strategy=reading, max_new_tokens=6) == lm.generate(PROMPTS, greedy=True, max_new_tokens=6)
    width = lm.spec.model.d_model
    assert reading.steps and all(shape[-1] == width and len(shape) == 2 for shape in reading.steps)
    translator = load_run(runs / "prefix" / "version_0")
    lines = (runs / "prefix" / "version_0" / "data" / "valid.en").read_text().splitlines()[:6]
    reading = HiddenGreedy(lambda model: model.graph())
    assert translator.translate(lines, strategy=reading) == translator.translate(lines, strategy="greedy")
    assert reading.steps
    ensemble = load_run([runs / "prefix" / "version_0", runs / "prefix" / "version_0"])
    with pytest.raises(UserError) as e:
        ensemble.translate(lines, strategy=HiddenGreedy(lambda model: model.graph()))
    assert str(e.value) == "this search reads the decoder's hidden states, and an ensemble has one a member: decode one model"
