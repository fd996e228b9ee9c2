"""A trained decoder-only language model in Python: `aiayn.load_run(run)` of a language model's run
gives one, as it gives a Translator for a translation model."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiayn.blocks import TransformerModel
from aiayn.builder.decode.generate import generate_ids
from aiayn.builder.decode.inference import TextInference
from aiayn.builder.decode.metrics import line_log_probs, text_scores
from aiayn.builder.decode.records import LineScore, line_record
from aiayn.builder.decode.sampling import seed_argument
from aiayn.builder.decode.strategy import Strategy, generation_strategy
from aiayn.builder.errors import UserError, described, strings_argument
from aiayn.builder.graph import graph_of
from aiayn.builder.registry import registry_of
from aiayn.schemas.experiment import ExperimentSpec
from aiayn.schemas.strategy import StrategySpec


class LanguageModel(TextInference):
    """A decoder-only model of one language's text with its tokenizer and its run's settings
    (`aiayn.load_run` of a language model's run makes one).

    :param model: the decoder-only model, in eval mode
    :param spec: the run's ExperimentSpec
    :param tokenizer: its tokenizer
    :param checkpoint: the file the weights came from
    :param what: which model that is: "step 300", "the mean of ..." """

    task = "language_model"
    kind = "a language model"
    endpoints = ("/generate", "/score")
    verbs = frozenset({"generate", "score --text", "evaluate"})
    model: TransformerModel
    spec: ExperimentSpec

    def refusal(self, verb: str, path: Path | str) -> str:
        """Why a language model does not take `verb` (translate, score of pairs), and what to use instead.

        :param verb: the verb refused
        :param path: the model, as the command named it"""
        if verb == "translate":
            language = graph_of(self.spec).languages(self.spec)[1]  # the one it reads and writes
            return (
                f"{path} is a language model of {language} text, which translates nothing: aiayn generate "
                "continues its text, aiayn evaluate gives its perplexity and bits per byte"
            )
        return f"{path} is a language model: score its lines with --text"

    def __repr__(self) -> str:
        params = sum(p.numel() for p in self.model.parameters())
        device = next(self.model.parameters()).device
        return f"LanguageModel({str(self.checkpoint)!r}, {self.what}, {params:,} parameters, on {device})"

    def decode_settings(self) -> dict[str, Any]:
        """What `generate` uses where a call names none: sampling with its defaults, and the run's beam settings for
        the beam strategy (the rest of its decode section is a translation's: lengths, batches, token rules)."""
        beam = {k: getattr(self.spec.decode, k) for k in ("beam", "alpha", "length_penalty", "early_stopping")}
        defaults = inspect.signature(LanguageModel.generate).parameters
        shaping = {k: defaults[k].default for k in ("temperature", "top_k", "top_p", "epsilon")}
        lengths = {k: defaults[k].default for k in ("max_new_tokens", "seed")}
        return {**lengths, "strategy": {"type": "sampling", **shaping}, "beam": beam}

    def generate(
        self,
        prompts: Sequence[str] | str,
        *,
        max_new_tokens: int = 50,
        greedy: bool = False,
        strategy: Strategy | StrategySpec | str | dict[str, Any] | None = None,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        epsilon: float = 0.0,
        filters: Sequence[Any] | None = None,
        seed: int = 1,
    ) -> list[str]:
        """Each prompt with its continuation, as one text: the tokenizer's decoding of the prompt's
        tokens and the generated ones, as `aiayn generate` prints them. Each prompt draws from a
        generator of its own seeded with `seed`: its continuation does not depend on the prompts
        beside it.

        :param prompts: the texts to continue (a str: that one)
        :param max_new_tokens: at most this many tokens after each prompt (fewer at </s>)
        :param greedy: the most probable token at every step (the greedy strategy) instead of drawing
        :param strategy: how to continue: a registered strategy as YAML writes it ("greedy", "beam", {"type": "sampling",
            "top_p": 0.9}, a plugin's) or a Strategy value (default: sampling with the settings below)
        :param temperature: divide the logits by it before drawing
        :param top_k: draw among the k most probable tokens (0: no limit)
        :param top_p: draw among the fewest tokens whose probability reaches p (1.0: no limit)
        :param epsilon: draw among the tokens of probability >= epsilon (0: no limit)
        :param filters: sampling filters a plugin registers, applied after those above, in order: specs as YAML writes
            them ([{"type": "min_p", "min_p": 0.1}], or a type's name for its defaults)
        :param seed: the sampler's seed
        :returns: a text a prompt"""
        prompts = strings_argument(prompts, "prompts", one=True)
        shaping = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "epsilon": epsilon, "filters": filters}
        chosen = generation_strategy(greedy, strategy, shaping, registry_of(self.spec))
        seed = seed_argument(seed)
        if not isinstance(max_new_tokens, int) or isinstance(max_new_tokens, bool) or max_new_tokens < 1:
            raise UserError(f"max_new_tokens: expected a whole number >= 1, got {described(max_new_tokens)}")
        ids = self.prompt_ids(prompts)
        self.model.eval()
        found = generate_ids(
            self.model,
            ids,
            max_new_tokens=max_new_tokens,
            eos_id=self.tokenizer.eos_id,
            strategy=chosen,
            decode=self.spec.decode,
            seed=seed,
        )
        return [self.tokenizer.decode([*p, *c]) for p, c in zip(ids, found)]

    def score(self, lines: Sequence[str] | str, *, max_tokens: int | None = None) -> list[LineScore]:
        """Each line's log-probability under the model, as `aiayn score RUN --text` writes it and
        as `aiayn evaluate` counts it: summed over the lines, -log_prob / ln 2 over their bytes is
        evaluate's bits per byte of the same text.

        :param lines: the lines (a str: that one line), none blank
        :param max_tokens: padded tokens a batch (default: the run's decode.max_tokens)
        :returns: a `LineScore` a line: log_prob, length, n_bytes, bpb, token_log_probs
        :raises UserError: a blank line (a language model scores sentences), or one longer than its positions"""
        lines = strings_argument(lines, "lines", one=True)
        blank = next((i for i, line in enumerate(lines) if not line.strip()), None)
        if blank is not None:
            raise UserError(f"line {blank + 1} is blank: a language model scores sentences (aiayn evaluate skips blank lines)")
        limit = self.spec.decode.max_tokens if max_tokens is None else max_tokens
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise UserError(f"max_tokens: expected a whole number >= 1, got {described(limit)}")
        ids = self.tokenizer.encode_batch(list(lines))
        positions = self.model.target_positions()
        too_long = next((i for i, x in enumerate(ids) if positions is not None and len(x) + 1 > positions), None)
        if too_long is not None:
            raise UserError(
                f"line {too_long + 1} has {len(ids[too_long])} tokens, and with its <s> more than the model's {positions} "
                "learned positions; shorten or split it"
            )
        found = line_log_probs(self.model, self.tokenizer, lines, max(limit, max(len(x) for x in ids) + 1))
        return [line_record(text, x, p, self.tokenizer) for text, x, p in zip(lines, ids, found)]

    def text_scores(self, lines: Sequence[str], max_tokens: int) -> dict[str, Any]:
        """PPL and bits per byte of `lines`, teacher-forced (metrics.py's text_scores).

        :param lines: the sentences, blank ones skipped
        :param max_tokens: padded tokens a batch"""
        return text_scores(self.model, self.tokenizer, lines, max_tokens)

    def text_report(self, data: str, metrics: dict[str, Any]) -> list[str]:
        """The numbers of `text_scores` as `aiayn evaluate` prints them.

        :param data: the text scored, in words
        :param metrics: what text_scores gave"""
        return [
            f"data        {data} ({metrics['n_sentences']} sentences, {metrics['n_tokens']} tokens predicted)",
            f"PPL         {metrics['ppl']:6.2f}  per token, teacher-forced, no label smoothing",
            f"bits/byte   {metrics['bpb']:6.3f}  the summed NLL over the text's UTF-8 bytes (a newline each line)",
        ]

    def prompt_ids(self, prompts: Sequence[str]) -> list[list[int]]:
        """Each prompt's token ids, none empty, each leaving the model room to continue it.

        :param prompts: the texts to continue
        :raises UserError: the first prompt that is empty or too long"""
        blank = next((i for i, p in enumerate(prompts) if not p.strip()), None)
        if blank is not None:
            raise UserError(f"prompt {blank + 1} is empty; give the text to continue (the model starts it with <s> itself)")
        ids = self.tokenizer.encode_batch(list(prompts))
        self.check_prompts(ids)
        return ids

    def check_prompts(self, ids: Sequence[Sequence[int]]) -> None:
        """Every prompt leaves a learned position table room for one token or more.

        :param ids: each prompt's token ids
        :raises UserError: the first prompt that leaves none"""
        positions = self.model.target_positions()
        for i, p in enumerate(ids):
            if positions is not None and len(p) + 1 >= positions:
                raise UserError(
                    f"prompt {i + 1} has {len(p)} tokens, and with its <s> the model's {positions} learned positions leave no "
                    "room to continue it; shorten it"
                )
