"""aiayn generate RUN [--prompt P] [--max-new-tokens N] [--greedy | --strategy SPEC | --temperature T --top-k K
--top-p P --epsilon E] [--seed S]: a decoder-only language model's continuation of each prompt (--prompt, else one a line
of stdin; an empty line: from <s> alone), printed with its prompt on one line, as the tokenizer
decodes the prompt's tokens and the generated ones."""

import argparse
import sys

from aiayn.builder.cli.choice import SAMPLING_FLAGS, add_sampling_arguments, sampling_settings, spec_argument
from aiayn.builder.cli.translate import add_checkpoint_argument, device_of, read_input
from aiayn.builder.decode.language_model import LanguageModel
from aiayn.builder.decode.load import load_run
from aiayn.builder.decode.sampling import filters_of
from aiayn.builder.decode.strategy import Strategy, strategy_of
from aiayn.builder.errors import UserError


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_checkpoint_argument(p)
    p.add_argument("--prompt", "-p", action="append", metavar="P", help="a prompt (repeatable; default: one a line of stdin)")
    p.add_argument(
        "--max-new-tokens", "-n", type=int, default=50, metavar="N", help="tokens to add at most, </s> included (default: 50)"
    )
    g = p.add_argument_group("choosing each token (default: sampled from the model's distribution, temperature 1)")
    g.add_argument("--greedy", action="store_true", help="the most probable token at every step")
    g.add_argument(
        "--strategy",
        metavar="SPEC",
        help="a registered decoding strategy: greedy, beam (the run's decode.beam and alpha), sampling, a plugin's, or "
        "one with settings as YAML ('{type: sampling, top_p: 0.9}')",
    )
    add_sampling_arguments(p, switch=False)
    p.add_argument("--device", help="torch device (default: cuda if available, else cpu)")


def generate(args: argparse.Namespace) -> int:
    sampling = sampling_settings(args)
    if args.greedy and sampling:
        flag = SAMPLING_FLAGS[next(iter(sampling))]
        raise UserError(f"--greedy takes the most probable token; {flag} shapes sampling: give one or the other")
    strategy: Strategy | None = None
    if args.strategy is not None:
        other = "--greedy" if args.greedy else next((SAMPLING_FLAGS[name] for name in sampling), None)
        if other is not None:
            raise UserError(f"--strategy: it says how to generate, and so does {other}; give one of them")
        spec = spec_argument(args.strategy, "--strategy", "greedy", "{type: sampling, top_p: 0.9}")
        strategy = strategy_of(spec, args.registry, "--strategy")
    filters_of(sampling.get("filters"), args.registry, "--filter")  # named by its flag, before the model loads
    if args.max_new_tokens < 1:  # named by its flag here; the Python API names its keyword
        raise UserError(f"--max-new-tokens (-n): give 1 or more tokens to add, got {args.max_new_tokens}")
    model = load_run(args.checkpoint, device=device_of(args), registry=args.registry)
    model.check_verb("generate", args.checkpoint)
    assert isinstance(model, LanguageModel)  # what generates
    prompts = args.prompt if args.prompt is not None else read_input(None)
    texts = model.generate(
        prompts, max_new_tokens=args.max_new_tokens, greedy=args.greedy, strategy=strategy, seed=args.seed, **sampling
    )
    sys.stdout.write("".join(f"{text}\n" for text in texts))
    return 0
