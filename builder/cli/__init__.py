"""The `aiayn` console script. Each verb lives in a module of builder/cli with
`add_arguments(parser)` and a handler that parses, calls the subsystem and prints; modules are
imported on use, so `aiayn validate` does not pay for importing Lightning. Nothing imports cli."""

import argparse
import errno
import importlib
import os
import signal
import sys
from collections.abc import Sequence

from aiayn.builder.errors import UserError, check_name_lengths, loop_message
from aiayn.builder.plugins import default_registry
from aiayn.builder.registry import Registry
from aiayn.builder.run.cpu import quiet_waits
from aiayn.builder.run.time_limit import remember_time_limit_signal
from aiayn.schemas.slots import PluginError

# verb -> (module, handler, help)
VERBS = {
    "validate": ("aiayn.builder.cli.inspect", "validate", "validate an experiment"),
    "show": ("aiayn.builder.cli.inspect", "show", "resolved config, per-block parameters, FLOPs, memory"),
    "schema": ("aiayn.builder.cli.inspect", "schema", "JSON Schema of the experiment format"),
    "data": ("aiayn.builder.cli.data", "data", "write a corpus (wmt14-en-de, wmt14-en-fr, multi30k, wsj) for the experiments"),
    "train": ("aiayn.builder.cli.train", "train", "train an experiment; --resume continues the latest run"),
    "sweep": ("aiayn.builder.cli.sweep", "sweep", "run every trial of a sweep, skip finished ones, write the results table"),
    "results": ("aiayn.builder.cli.results", "results", "the Table-3-style table of finished runs (markdown, CSV, plot)"),
    "translate": ("aiayn.builder.cli.translate", "translate", "translate stdin (or --input) with beam search"),
    "generate": (
        "aiayn.builder.cli.generate",
        "generate",
        "continue prompts with a decoder-only language model (greedy or sampled)",
    ),
    "score": (
        "aiayn.builder.cli.score",
        "score",
        "forced decoding: the model's score of given targets (log P, length, per token), or a language model's of lines (--text)",
    ),
    "evaluate": ("aiayn.builder.cli.evaluate", "evaluate", "sacreBLEU, chrF and perplexity of a checkpoint"),
    "average": ("aiayn.builder.cli.average", "average", "average the parameters of checkpoints"),
    "serve": (
        "aiayn.builder.cli.serve",
        "serve",
        "the models behind HTTP: translate, score and generate as JSON, dynamic batching, a page to compare two",
    ),
    "export": ("aiayn.builder.cli.export", "export", "export a model to CTranslate2 or Hugging Face transformers (Marian)"),
}
# verb -> the name of its argument-adding function in its module
ARGUMENTS = {"validate": "add_validate_arguments", "show": "add_show_arguments", "schema": None}


def top_parser() -> argparse.ArgumentParser:
    """`aiayn -h`: the verbs, each with its one-line help."""
    parser = argparse.ArgumentParser(
        prog="aiayn", description="A config-driven Transformer (Vaswani et al. 2017).", allow_abbrev=False
    )
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for name, (_, _, text) in VERBS.items():
        sub.add_parser(name, help=text, description=text)
    return parser


def verb_parser(verb: str) -> argparse.ArgumentParser:
    """The parser of one verb (only its module is imported); its usage names the verb."""
    module, _, text = VERBS[verb]
    # allow_abbrev=False: a typo such as --resum is an error, not --resume
    parser = argparse.ArgumentParser(prog=f"aiayn {verb}", description=text, allow_abbrev=False)
    adder = ARGUMENTS.get(verb, "add_arguments")
    if adder:
        getattr(importlib.import_module(module), adder)(parser)
    return parser


def main(argv: Sequence[str] | None = None, *, registry: Registry | None = None) -> int:
    """`aiayn VERB ...`; `registry`: the registrations to use (default: aiayn's own blocks and the
    installed plugins $AIAYN_PLUGINS selects, loaded here)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in VERBS:
        top_parser().parse_args(argv)  # prints the help, or the usage and what is wrong; exits
        return 2
    verb = argv[0]
    quiet_waits(os.environ)  # before any verb's module imports torch (OpenMP reads it then)
    if verb == "train":  # SLURM's time-limit signal in the start-up: answered once training runs
        remember_time_limit_signal()
    # options and KEY=VALUE overrides in any order, as Hydra and LightningCLI take them
    args = verb_parser(verb).parse_intermixed_args(argv[1:])
    module, handler, _ = VERBS[verb]
    try:
        args.registry = registry if registry is not None else default_registry()
        return int(getattr(importlib.import_module(module), handler)(args) or 0)
    except UserError as e:
        print(f"aiayn {verb}: error: {e.command_line()}", file=sys.stderr)
        return e.exit_code
    except PluginError as e:  # a plugin that fails to load, or a type registered twice
        print(f"aiayn {verb}: error: {e}", file=sys.stderr)
        return UserError.exit_code
    except KeyboardInterrupt:
        print(f"aiayn {verb}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader left early (`aiayn show ... | head`): stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        return 128 + signal.SIGPIPE
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG and e.filename is not None:  # a path given, opened where no check measured it
            print(f"aiayn {verb}: error: {too_long(e.filename)}", file=sys.stderr)
            return UserError.exit_code
        if e.errno != errno.ELOOP:
            raise
        # a link that loops, opened where no check resolved it first
        print(f"aiayn {verb}: error: {loop_message(e.filename)}", file=sys.stderr)
        return UserError.exit_code


def too_long(path: str) -> str:
    """What check_name_lengths says of a path the filesystem found too long (or, where a limit of
    another filesystem was met, that it was)."""
    try:
        check_name_lengths(path)
    except UserError as e:
        return str(e)
    return f"{path}: its name is longer than this filesystem takes; shorten it"
