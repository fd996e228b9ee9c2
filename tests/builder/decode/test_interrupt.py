"""Stopping a decoding between its steps (builder/decode/interrupt.py), as the server's deadlines
do: a stopped line ends at the step it was stopped and the others find what they find alone; a call
whose every input is stopped raises Interrupted, for translation, forced scoring, MBR and
generation; nothing changes where nothing is watched."""

import pytest

import aiayn
from aiayn.builder.decode.interrupt import Interrupted, check, stopped_sources, watching
from tests.builder.decode.test_checkpoint import make_run
from tests.builder.serve.server import make_lm_run

LINES = ["she sold eight apples", "we counted two pictures", "two dogs saw a cat", "the dog"]


@pytest.fixture(scope="module")
def translator(tmp_path_factory):
    return aiayn.load_run(make_run(tmp_path_factory.mktemp("interrupt"), seed=5), device="cpu")


@pytest.fixture(scope="module")
def language_model(tmp_path_factory):
    return aiayn.load_run(make_lm_run(tmp_path_factory.mktemp("interrupt-lm")), device="cpu")


def after(calls: int, stopped: list[int]):
    """A `stopped()` that stops nothing for its first `calls` calls, then `stopped`."""
    count = {"n": 0}

    def now() -> list[int]:
        count["n"] += 1
        return stopped if count["n"] > calls else []

    return now


def test_a_stopped_line_ends_where_it_was_stopped_and_the_others_find_what_they_find_alone(translator):
    options = {"n_best": 2, "with_scores": True, "beam": 3, "max_len_b": 30}
    alone = translator.translate(LINES, **options)
    with watching(lambda: [1], len(LINES)):
        stopped_at_once = translator.translate(LINES, **options)
    with watching(after(4, [0, 3]), len(LINES)):  # the chunk's check, steps 1-3, then stopped: they end at step 4
        stopped_later = translator.translate(LINES, **options)
    assert [stopped_at_once[i] for i in (0, 2, 3)] == [alone[i] for i in (0, 2, 3)]
    assert max(len(h.ids) for h in stopped_at_once[1]) <= 1 < max(len(h.ids) for h in alone[1])
    assert [stopped_later[i] for i in (1, 2)] == [alone[i] for i in (1, 2)]
    assert max(len(h.ids) for i in (0, 3) for h in stopped_later[i]) == 4
    assert min(len(h.ids) for i in (0, 3) for h in alone[i]) > 4


def test_a_call_whose_every_input_is_stopped_raises_interrupted(translator, language_model):
    for call, n in (
        (lambda: translator.translate(LINES, beam=2), len(LINES)),
        (lambda: translator.translate(LINES, n_best=2, mbr="chrf"), len(LINES)),
        (lambda: translator.score(LINES, LINES), len(LINES)),
        (lambda: language_model.generate(["she sold", "two"], max_new_tokens=20), 2),
    ):
        with watching(lambda n=n: range(n), n), pytest.raises(Interrupted, match=f"all {n} inputs of the call were stopped"):
            call()
    with watching(after(6, [0, 1, 2, 3]), len(LINES)), pytest.raises(Interrupted):  # between steps, not only at the start
        translator.translate(LINES, beam=2, max_len_b=30)


def test_a_prompt_stopped_ends_and_the_other_continues_as_alone(language_model):
    prompts = ["she sold", "we counted"]
    alone = language_model.generate(prompts, max_new_tokens=20, seed=4)
    with watching(after(3, [0]), 2):
        found = language_model.generate(prompts, max_new_tokens=20, seed=4)
    assert found[1] == alone[1] and found[0] != alone[0]
    assert len(found[0]) < len(alone[0])


def test_nothing_watched_nothing_stops():
    assert stopped_sources() is None
    check()  # no caller: never raises
    with watching(lambda: [], 3):
        assert stopped_sources() is None
    with watching(lambda: [2], 3):
        assert stopped_sources() == [2]
    assert stopped_sources() is None
