"""The models `aiayn serve` holds: each a name, the paths it was loaded from (several: an
ensemble) and the loaded Translator or LanguageModel; what GET /models says of each; and the
calls the batcher makes on a batch of requests' items, in the worker thread."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiayn.builder.decode.language_model import LanguageModel
from aiayn.builder.decode.load import load_run
from aiayn.builder.decode.records import LineScore, Score, Translation
from aiayn.builder.decode.strategy import strategy_of
from aiayn.builder.decode.translator import Translator
from aiayn.builder.errors import UserError
from aiayn.builder.graph import graph_of
from aiayn.builder.registry import Registry, registry_of


@dataclass
class Served:
    """One model behind the server.

    :param name: what requests call it by
    :param paths: what it was loaded from (two or more: an ensemble)
    :param model: the loaded model"""

    name: str
    paths: list[str]
    model: Translator | LanguageModel

    @property
    def draws(self) -> bool:
        """Whether its run's decode.strategy draws (sampling): its requests are decoded alone."""
        spec = self.model.spec
        return self.model.reads_sources and strategy_of(spec.decode.strategy, registry_of(spec)).draws

    @property
    def task(self) -> str:
        """ "translation" or "language_model": what its inference object says it does."""
        return self.model.task

    def info(self) -> dict[str, Any]:
        """What GET /models says of it: its task, graph, exact parameters, tokenizer, decode settings."""
        model, spec = self.model, self.model.spec
        tokenizer = model.output_tokenizer
        return {
            "name": self.name,
            "task": self.task,
            "graph": graph_of(spec).name,
            "paths": self.paths,
            "ensemble": len(self.paths) > 1,
            "parameters": sum(p.numel() for p in model.model.parameters()),
            "checkpoint": str(model.checkpoint),
            "what": model.what,
            "experiment": spec.name,
            "tokenizer": tokenizer.describe(),
            "vocab_size": tokenizer.vocab_size,
            "decode": model.decode_settings(),
            "endpoints": list(model.endpoints),
        }

    def tokens(self, texts: Sequence[str], *, output: bool = False) -> int:
        """The tokens of `texts` (each with its </s>): a request's cost in the batch budget; `output`: texts the
        model wrote, counted by its output tokenizer."""
        tokenizer = self.model.output_tokenizer if output else self.model.input_tokenizer
        return sum(len(ids) + 1 for ids in tokenizer.encode_batch(list(texts))) if texts else 0


def model_argument(text: str) -> tuple[str | None, list[str]]:
    """`aiayn serve`'s MODEL: PATH, NAME=PATH, or PATH,PATH,... (an ensemble), named or not."""
    name, sep, rest = text.partition("=")
    if not sep or "/" in name or not name:
        name, rest = "", text
    paths = rest.split(",")
    if any(not p for p in paths):
        raise UserError(f"{text}: an empty path; give PATH, NAME=PATH or NAME=PATH,PATH (an ensemble)")
    return name or None, paths


def load_served(arguments: Sequence[str], *, device: Any, registry: Registry) -> list[Served]:
    """Each MODEL argument loaded and named (default: its experiment's name); names unique."""
    served: list[Served] = []
    for text in arguments:
        name, paths = model_argument(text)
        model = load_run(paths if len(paths) > 1 else paths[0], device=device, registry=registry)
        if not model.endpoints:
            raise UserError(model.refusal("serve", text))
        served.append(Served(name or model.spec.name, paths, model))
    names = [s.name for s in served]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is not None:
        raise UserError(f"two models are named {twice!r}: name each as NAME=PATH (aiayn serve base=runs/a variant=runs/b)")
    return served


def run_translate(served: Served, lines: list[str], options: dict[str, Any]) -> list[dict[str, Any]]:
    """Each line's n-best list, as `aiayn translate` finds it with the same options."""
    translator = served.model
    assert isinstance(translator, Translator)
    opts = {k: v for k, v in options.items() if v is not None}
    scores, alignments = opts.pop("scores", False), opts.get("alignments", False)
    n_best = opts.pop("n_best", None)
    listed = n_best if (n_best or scores or alignments or opts.get("sampling")) else None
    found: list[Any] = translator.translate(lines, n_best=listed, with_scores=scores, **opts)
    words: list[list[str] | None] = [None] * len(lines)
    if alignments:
        pipelines = translator.pipelines
        read = pipelines[0].lines(lines) if pipelines is not None else lines
        words = [line.split() for line in read]
    return [
        {"hypotheses": [hypothesis(e, scores, alignments) for e in ([g] if isinstance(g, str) else g)], "words": w}
        for g, w in zip(found, words)
    ]


def hypothesis(entry: str | Translation, scores: bool, alignments: bool) -> dict[str, Any]:
    """A translation as the response lists it: its text, its numbers where asked for."""
    if isinstance(entry, str):
        return {"text": entry}
    out: dict[str, Any] = {"text": entry.text}
    if scores:
        out.update(
            score=entry.score,
            log_prob=entry.log_prob,
            length=entry.length,
            tokens=entry.tokens,
            token_log_probs=entry.token_log_probs,
        )
        if entry.utility is not None:
            out["utility"] = entry.utility
    if alignments:
        out["alignment"] = entry.pharaoh()
    return out


def run_score(served: Served, items: list[Any], options: dict[str, Any]) -> list[dict[str, Any]]:
    """Each pair's (translation) or line's (language model) numbers, as `aiayn score` gives them."""
    opts = {k: v for k, v in options.items() if v is not None}
    model = served.model
    if not model.reads_sources:  # a language model scores lines, not pairs
        assert isinstance(model, LanguageModel)
        return [line_score(s) for s in model.score(items, max_tokens=opts.get("max_tokens"))]
    assert isinstance(model, Translator)
    sources, targets = [s for s, _ in items], [t for _, t in items]
    return [pair_score(s, opts.get("alignments", False)) for s in model.score(sources, targets, **opts)]


def pair_score(s: Score, alignments: bool) -> dict[str, Any]:
    out = {"log_prob": s.log_prob, "length": s.length, "token_log_probs": s.token_log_probs, "score": s.score}
    return {**out, "alignment": s.pharaoh()} if alignments else out


def line_score(s: LineScore) -> dict[str, Any]:
    return {"log_prob": s.log_prob, "length": s.length, "token_log_probs": s.token_log_probs, "bpb": s.bpb, "n_bytes": s.n_bytes}


def run_generate(served: Served, prompts: list[str], options: dict[str, Any]) -> list[str]:
    """Each prompt with its continuation, as `aiayn generate` prints it."""
    assert isinstance(served.model, LanguageModel)
    return served.model.generate(prompts, **options)
