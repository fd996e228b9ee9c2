"""Beam search as in Sec. 6.1: beam 4, length penalty alpha 0.6, output length <= input + 50."""

from typing import Literal

from pydantic import Field, model_validator

from aiayn.schemas._base import FieldError, Float32, PositiveInt, Spec
from aiayn.schemas.slots import AnyStrategy
from aiayn.schemas.strategies import BeamSearchSpec


class DecodeSpec(Spec):
    """length_penalty: gnmt divides log-probabilities by ((5+|Y|)/6)^alpha (the paper's, from
    Wu et al. 2016); fairseq divides by |Y|^alpha. The output is at most max_len_a * |X| +
    max_len_b tokens, EOS included (fairseq's --max-len-a/b; the paper's: |X| + 50).

    The rest are the settings of other decoders, each off by default (a Hugging Face Marian
    folder's generation_config.json sets them as transformers' generate() applies them):
    early_stopping false goes on past `beam` finished hypotheses while the best live one, scored
    at its current length, beats the worst of them (transformers' early_stopping=False);
    forced_eos ends a hypothesis that reaches the length limit with </s>, scored 0 (its
    forced_eos_token_id); suppress lists tokens never generated besides <pad> (bad_words_ids of
    one token, suppress_tokens); renormalize makes the log-probabilities sum to 1 over the tokens
    left (renormalize_logits), which changes the scores an n-best list prints.

    strategy: how aiayn translate, evaluate, serve and the Python API find candidates where the call
    names none (a registered `strategy`: beam, sampling with its settings, a plugin's); validation and
    results.json translate by beam search whatever it says, so that runs compare."""

    beam: PositiveInt = 4
    alpha: Float32 = Field(default=0.6, ge=0.0)
    length_penalty: Literal["gnmt", "fairseq"] = "gnmt"
    max_len_a: Float32 = Field(default=1.0, ge=0.0)
    max_len_b: int = Field(default=50, ge=0, le=2**31 - 1)
    early_stopping: bool = True
    forced_eos: bool = False
    suppress: tuple[str, ...] = ()  # tokens of the target vocabulary, as its pieces: ["<s>", "<unk>"]
    renormalize: bool = False
    max_tokens: PositiveInt = 4000  # source tokens per decoding batch
    max_input_len: PositiveInt = 1024  # longer input lines are refused (the output may be max_len_b longer)
    strategy: AnyStrategy = BeamSearchSpec()

    @model_validator(mode="after")
    def _some_output(self) -> "DecodeSpec":
        if self.max_len_a == 0 and self.max_len_b == 0:
            raise FieldError(
                "max_len_b",
                "with max_len_a 0 the output may have max_len_b tokens, and 0 leaves no room for </s>; give 1 or more",
            )
        return self
