"""The `aiayn` console script. Each verb's work lives in its own module, imported on use, so
`aiayn validate` does not pay for importing Lightning."""

import argparse
import importlib
import sys
from collections.abc import Sequence

from builder.errors import UserError

# verb -> (module, function, help); the function takes the parsed argparse namespace
VERBS = {
    "validate": ("builder.commands.inspect", "validate", "validate an experiment"),
    "show": ("builder.commands.inspect", "show", "resolved config, parameters, FLOPs, memory"),
    "schema": ("builder.commands.inspect", "schema", "JSON Schema of the experiment format"),
}


def _experiment_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment", help="experiment YAML file")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="dotlist overrides, e.g. dims.h=16")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aiayn", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    helps = {verb: text for verb, (_, _, text) in VERBS.items()}

    p = sub.add_parser("validate", help=helps["validate"])
    _experiment_args(p)
    p = sub.add_parser("show", help=helps["show"])
    _experiment_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    sub.add_parser("schema", help=helps["schema"])
    for verb, (module, _, _) in VERBS.items():
        extend = getattr(importlib.import_module(module), "add_arguments", None) if verb not in ("validate", "show", "schema") else None
        if extend is not None:
            extend(sub.add_parser(verb, help=helps[verb]))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    module, function, _ = VERBS[args.verb]
    try:
        handler = getattr(importlib.import_module(module), function)
        return int(handler(args) or 0)
    except UserError as e:
        print(f"aiayn {args.verb}: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print(f"aiayn {args.verb}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
