"""A stream's text as its tokens come (builder/serve/streaming.py's TextStream): what it hands on
never has to be taken back, a trailing space a cleanup removes or an incomplete UTF-8 character
held until the next token settles it; the pieces joined are the final text."""

from aiayn.builder.serve.streaming import TextStream, event

PIECES = ["she", " sold", " ", ".", " two", " "]


def cleaned(ids):  # a decoder that takes back a space before a full stop, as cleanups do
    return "".join(PIECES[i] for i in ids).replace(" .", ".")


def test_a_space_the_next_token_takes_back_is_held():
    stream = TextStream(cleaned)
    handed = [stream.add(i) for i in range(len(PIECES))]
    assert handed == ["she", " sold", "", ".", " two", ""]
    assert "".join(handed) + stream.finish(cleaned(range(len(PIECES)))) == "she sold. two "


def test_an_incomplete_character_waits_for_its_last_byte():
    data = [b"a", b"\xc3", b"\xa4", b" b"]
    stream = TextStream(lambda ids: b"".join(data[i] for i in ids).decode("utf-8", errors="replace"))
    assert [stream.add(i) for i in range(4)] == ["a", "", "\u00e4", " b"]
    assert stream.finish("a\u00e4 b") == ""


def test_a_prompt_starts_the_text_and_an_event_is_one_line_of_json():
    stream = TextStream(lambda ids: "".join(PIECES[i] for i in ids), start=[0])
    assert stream.add(1) == "she sold"
    assert event({"index": 0, "text": "ä\n"}) == 'data: {"index": 0, "text": "ä\\n"}\n\n'
    assert event({"model": "m"}, "done") == 'event: done\ndata: {"model": "m"}\n\n'
