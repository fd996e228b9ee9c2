"""The flags that choose translations besides the beam's best: --sampling and what shapes it,
--mbr and its settings (translate, evaluate; generate takes the sampling flags)."""

import argparse
from typing import Any

import yaml

from aiayn.builder.decode.mbr import WEIGHTS, MBRChoice, check_mbr, utility_spec
from aiayn.builder.decode.sampling import Sampling, check_sampling, filters_of, sampling_from, seed_argument
from aiayn.builder.decode.strategy import Decoding, Sampled, Strategy, strategy_of
from aiayn.builder.errors import UserError
from aiayn.builder.run.nesting import yaml_nesting

# the sampling flags, as the Python API names them
SAMPLING_FLAGS = {
    "temperature": "--temperature", "top_k": "--top-k", "top_p": "--top-p", "epsilon": "--epsilon", "filters": "--filter",
}  # fmt: skip
FLAGS = {  # each setting's flag, for the messages of the rules the Python API checks too
    **SAMPLING_FLAGS, "sampling": "--sampling", "beam": "--beam", "n_best": "--n-best", "mbr": "--mbr",
    "mbr_references": "--mbr-references", "mbr_weights": "--mbr-weights",
}  # fmt: skip


def add_choice_arguments(p: argparse.ArgumentParser, *, n_best: bool = False) -> None:
    """--sampling and its flags, --mbr and its flags; `n_best`: with --n-best, MBR's candidates
    (evaluate's; translate has its own, for n-best lists)."""
    if n_best:
        p.add_argument(
            "--n-best", type=int, metavar="K", help="with --mbr: choose among K candidates (the beam's K best, or K samples)"
        )
    p.add_argument(
        "--strategy",
        metavar="SPEC",
        help="how to find the candidates, a registered strategy: beam, sampling, a plugin's, or one with settings as YAML "
        "('{type: sampling, top_p: 0.9}') (default: the run's decode.strategy)",
    )
    add_sampling_arguments(p)
    g = p.add_argument_group(
        "minimum-Bayes-risk decoding: of each line's --n-best K candidates (a beam's, or samples), the one that agrees most "
        "with the others"
    )
    g.add_argument(
        "--mbr",
        metavar="UTILITY",
        help="choose by MBR with this utility: chrf, bleu, a plugin's, or one with settings as YAML ('{type: chrf, word_order: 2}')",
    )
    g.add_argument(
        "--mbr-weights",
        choices=WEIGHTS,
        default="uniform",
        help="the pseudo-references' weights: uniform (default), or model: each one's P(Y | X) under the model (its "
        "log-probability summed over its tokens and </s>, no length penalty, temperature or filter), renormalised over them",
    )
    g.add_argument(
        "--mbr-references",
        type=int,
        metavar="N",
        help="draw N samples as pseudo-references (default: the candidates themselves)",
    )


def add_sampling_arguments(p: argparse.ArgumentParser, *, switch: bool = True) -> None:
    """--sampling (where `switch`) and the flags that shape it, --seed."""
    g = p.add_argument_group("sampling (instead of beam search): each token drawn from the model's distribution")
    if switch:
        g.add_argument(
            "--sampling", action="store_true", help="draw --n-best K samples of each line (default 1) instead of searching"
        )
    g.add_argument("--temperature", type=float, metavar="T", help="divide the logits by T before sampling (default: 1)")
    g.add_argument("--top-k", type=int, metavar="K", help="sample among the K most probable tokens (default: 0, no limit)")
    g.add_argument(
        "--top-p", type=float, metavar="P", help="sample among the fewest tokens whose probability reaches P (default: 1)"
    )
    g.add_argument("--epsilon", type=float, metavar="E", help="sample among the tokens of probability >= E (default: 0, all)")
    g.add_argument(
        "--filter",
        dest="filters",
        action="append",
        metavar="SPEC",
        help="a plugin's sampling filter, after the above (repeatable, in order): its type, or YAML with its settings "
        "('{type: min_p, min_p: 0.1}')",
    )
    g.add_argument("--seed", type=int, default=1, help="the sampler's seed: the same seed, the same samples (default: 1)")


def sampling_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The sampling flags given, by their Python names, checked in the flags' words."""
    given = {name: getattr(args, name) for name in SAMPLING_FLAGS if getattr(args, name) is not None}
    if "filters" in given:
        given["filters"] = [spec_argument(text, "--filter", "min_p", "{type: min_p, min_p: 0.1}") for text in given["filters"]]
    seed_argument(args.seed, "--seed")
    try:
        sampling_from(**{k: v for k, v in given.items() if k != "filters"})  # the filters: where the registry builds them
    except UserError as e:
        name = str(e).split(" ", 1)[0].rstrip(":")
        raise UserError(str(e).replace(name, SAMPLING_FLAGS.get(name, name), 1)) from None
    return given


def check_choice(args: argparse.Namespace) -> None:
    """--sampling, --mbr and their flags: what goes with what."""
    seed_argument(args.seed, "--seed")  # named by its flag (the Python API names its keyword)
    shaping = [name for name in SAMPLING_FLAGS if getattr(args, name) is not None]
    check_sampling(args.sampling, shaping, args.beam is not None, FLAGS)  # the API's rules, in the flags' names
    if args.strategy is not None and args.sampling:
        raise UserError("--strategy: it says how to decode, and so does --sampling; give one of them")
    check_mbr(args.mbr is not None, args.n_best, args.mbr_references, args.mbr_weights, FLAGS)
    if args.mbr is not None and getattr(args, "alignments", False):
        raise UserError("--alignments: MBR's choice is written without them; align it with aiayn score --alignments")


def decoding_from(args: argparse.Namespace) -> Decoding:
    """The Decoding the flags ask for, built once (check_choice has checked what goes with what): a plugin's filter or
    utility that does not validate is named by its flag."""
    strategy: Strategy | None = None  # the run's decode.strategy
    if args.sampling:
        settings = sampling_settings(args)
        made = filters_of(settings.pop("filters", None), args.registry, "--filter")
        strategy = Sampled(Sampling(**settings, filters=made))
    elif args.strategy is not None:
        spec = spec_argument(args.strategy, "--strategy", "sampling", "{type: sampling, top_p: 0.9}")
        strategy = strategy_of(spec, args.registry, "--strategy")
    mbr = None
    if args.mbr is not None:
        mbr = MBRChoice(utility_spec(mbr_utility(args.mbr), args.registry, "--mbr"), args.mbr_weights, args.mbr_references)
    return Decoding(strategy, n_best=args.n_best or 1, unique=getattr(args, "unique", False), mbr=mbr, seed=args.seed)


def spec_argument(text: str, flag: str, example: str, settings: str) -> Any:
    """A flag's registered type: its name, or a YAML mapping with its settings (`example`, `settings`: the message's)."""
    text = text.strip()
    if not text.startswith("{"):
        return text
    how = f"give a type ({example}) or '{settings}'"
    deep = yaml_nesting(text)
    if deep is not None:
        raise UserError(f"{flag}: {deep}; {how}")
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        raise UserError(f"{flag} {text}: not a YAML mapping; {how}") from None


def mbr_utility(text: str) -> Any:
    """--mbr's value: a type name, or a YAML mapping with its settings."""
    return spec_argument(text, "--mbr", "chrf", "{type: chrf, word_order: 2}")
