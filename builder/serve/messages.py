"""The JSON bodies `aiayn serve` takes, as pydantic models: FastAPI checks each request against
them and writes the OpenAPI schema from them. Strict: a field of the wrong type is refused, not
coerced ("4" is no beam), and an unknown field is refused by name. The options are the Python
API's keywords (`Translator.translate`, `Translator.score`, `LanguageModel.generate` and
`.score`), which are the flags of `aiayn translate`, `score` and `generate` with `_` for `-`."""

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

MODEL = "the model's name (GET /models); default: the first model served"
NOT_TEXT = re.compile("[\ud800-\udfff\x00-\x08\x0a-\x1f\x7f]")  # lone surrogates; control characters but the tab


def _text_line(text: str) -> str:
    """A line of text: no lone surrogate (JSON's \\ud800 alone, which no UTF-8 holds) and no control character."""
    found = NOT_TEXT.search(text)
    if found is not None:
        code, at = ord(found.group()), found.start()
        what = "a lone surrogate" if 0xD800 <= code <= 0xDFFF else "a control character"
        raise PydanticCustomError(
            "not_text",
            "{what} (U+{code}) at character {at}: a line is text, one sentence; drop it",
            {"what": what, "code": f"{code:04X}", "at": at},
        )
    return text


Line = Annotated[str, AfterValidator(_text_line)]


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    model: str | None = Field(default=None, description=MODEL)
    timeout_s: float | None = Field(
        default=None, gt=0, description="answer 504 and stop its work past this many seconds (default and most: the server's)"
    )


class DecodeOptions(Request):
    """The decode settings a request may override (each default: the run's decode section)."""

    alpha: float | None = Field(default=None, ge=0, description="length penalty exponent (paper: 0.6)")
    length_penalty: Literal["gnmt", "fairseq"] | None = None
    max_tokens: int | None = Field(default=None, ge=1, description="padded source tokens a decoding batch")
    max_input_len: int | None = Field(default=None, ge=1, description="refuse lines longer than this many tokens")


class TranslateRequest(DecodeOptions):
    """POST /translate: what `aiayn translate` does, one line of `lines` a source sentence."""

    lines: list[Line] = Field(min_length=1, description="the source sentences (a blank one: an empty translation)")
    beam: int | None = Field(default=None, ge=1, description="beam size (paper: 4)")
    max_len_a: float | None = Field(default=None, ge=0)
    max_len_b: int | None = Field(default=None, ge=0)
    n_best: int | None = Field(default=None, ge=1, description="the K best of each line, best first (K <= beam)")
    scores: bool = Field(default=False, description="each translation with its score, log P, tokens and theirs")
    alignments: bool = Field(default=False, description="each translation with its word alignment (Pharaoh i-j)")
    alignment_layer: int | None = None
    detokenize: bool = False
    unique: bool = False
    strategy: str | dict[str, Any] | None = Field(
        default=None, description="a registered decoding strategy: beam, sampling, a plugin's (default: decode.strategy)"
    )
    sampling: bool = Field(default=False, description="draw n_best samples instead of searching")
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    epsilon: float | None = None
    filters: list[str | dict[str, Any]] | None = Field(default=None, description="a plugin's sampling filters, in order")
    seed: int = 1
    mbr: str | dict[str, Any] | None = Field(default=None, description="minimum-Bayes-risk choice with this utility")
    mbr_weights: Literal["uniform", "model"] = "uniform"
    mbr_references: int | None = None
    stream: bool = Field(default=False, description="answer as server-sent events while it decodes (one output a line)")


class ScoreRequest(DecodeOptions):
    """POST /score: forced decoding of `tgt` given `src` (a translation model), or the
    log-probability of each line of `text` (a language model), as `aiayn score` gives them."""

    src: list[Line] | None = Field(default=None, min_length=1, description="source sentences (a translation model)")
    tgt: list[Line] | None = Field(default=None, min_length=1, description="one target a source")
    text: list[Line] | None = Field(default=None, min_length=1, description="a language model's lines")
    alignments: bool = False
    alignment_layer: int | None = None


class GenerateRequest(Request):
    """POST /generate: what `aiayn generate` does, a language model's continuation of each prompt."""

    prompts: list[Line] = Field(min_length=1)
    max_new_tokens: int = Field(default=50, ge=1)
    greedy: bool = False
    strategy: str | dict[str, Any] | None = Field(
        default=None, description="a registered decoding strategy: greedy, beam, sampling, a plugin's (default: sampling)"
    )
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    epsilon: float = 0.0
    filters: list[str | dict[str, Any]] | None = Field(default=None, description="a plugin's sampling filters, in order")
    seed: int = 1
    stream: bool = Field(default=False, description="answer as server-sent events while it generates (not a beam's)")


class ErrorBody(BaseModel):
    """Every answer that is not a 2xx: what is wrong, and the request's field to blame where one is."""

    error: str = Field(description="what is wrong, and what to send instead")
    field: str | None = Field(default=None, description="the field to blame (lines.0 for a list's first item)")
    request_id: str = Field(description="the request's id: its X-Request-ID, or the one the server made (also in that header)")


class Hypothesis(BaseModel):
    """One translation: its text; with scores, its numbers; with alignments, its word alignment."""

    text: str
    score: float | None = None
    log_prob: float | None = None
    length: int | None = None
    tokens: list[str] | None = None
    token_log_probs: list[float] | None = None
    alignment: str | None = None
    utility: float | None = None


class TranslateResponse(BaseModel):
    model: str
    translations: list[list[Hypothesis]] = Field(description="a list a line: its n best (one by default), best first")
    source_words: list[list[str]] | None = Field(
        default=None, description="with alignments: each line's words as the model read them"
    )


class ScoreResponse(BaseModel):
    model: str
    scores: list[dict[str, Any]] = Field(description="a pair's (or line's) numbers, as `aiayn score` writes them")


class GenerateResponse(BaseModel):
    model: str
    texts: list[str] = Field(description="each prompt with its continuation")
