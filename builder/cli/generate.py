"""aiayn generate RUN [--prompt P] [--max-new-tokens N] [--greedy | --temperature T --top-k K --top-p P]
[--seed S]: a decoder-only language model's continuation of each prompt (--prompt, else one a line
of stdin; an empty line: from <s> alone), printed with its prompt on one line, as the tokenizer
decodes the prompt's tokens and the generated ones."""

import argparse
import sys

from aiayn.builder.cli.translate import add_checkpoint_argument, device_of, read_input
from aiayn.builder.decode.translator import load_run
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
        "--temperature", type=float, default=None, metavar="T", help="divide the logits by T before sampling (default: 1)"
    )
    g.add_argument("--top-k", type=int, default=None, metavar="K", help="sample among the K most probable tokens (default: all)")
    g.add_argument(
        "--top-p",
        type=float,
        default=None,
        metavar="P",
        help="sample among the fewest tokens whose probability reaches P (default: 1)",
    )
    g.add_argument("--seed", type=int, default=1, help="the sampler's seed: the same seed, the same text (default: 1)")
    p.add_argument("--device", help="torch device (default: cuda if available, else cpu)")


def generate(args: argparse.Namespace) -> int:
    sampled = [flag for flag, value in (("--temperature", args.temperature), ("--top-k", args.top_k), ("--top-p", args.top_p))
               if value is not None]  # fmt: skip
    if args.greedy and sampled:
        raise UserError(f"--greedy takes the most probable token; {sampled[0]} shapes sampling: give one or the other")
    model = load_run(args.checkpoint, device=device_of(args))
    if not hasattr(model, "generate"):
        raise UserError(
            f"{args.checkpoint} is a translation model (its experiment has {'an encoder' if model.spec.model.encoder else 'no data.side'}); "
            "aiayn generate continues a language model's text: use aiayn translate"
        )
    prompts = args.prompt if args.prompt is not None else read_input(None)
    texts = model.generate(
        prompts, max_new_tokens=args.max_new_tokens, greedy=args.greedy, temperature=1.0 if args.temperature is None else args.temperature,
        top_k=args.top_k or 0, top_p=1.0 if args.top_p is None else args.top_p, seed=args.seed,
    )  # fmt: skip
    sys.stdout.write("".join(f"{text}\n" for text in texts))
    return 0
