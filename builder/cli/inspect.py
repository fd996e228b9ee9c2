"""aiayn validate / show / schema: read an experiment, build nothing."""

import argparse
import json
import sys
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from aiayn.builder.decode.checkpoint import source_model
from aiayn.builder.errors import UserError, check_name_lengths
from aiayn.builder.graph import graph_of
from aiayn.builder.model.size import check_size
from aiayn.builder.model.summary import render, summary
from aiayn.builder.run.atomic import check_writable
from aiayn.builder.run.config import load_experiment, parent_of
from aiayn.builder.run.outputs import check_output
from aiayn.schemas.experiment import ExperimentSpec
from aiayn.schemas.slots import json_schema


def add_experiment_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment", help="experiment YAML file")
    p.add_argument("overrides", nargs="*", default=[], metavar="KEY=VALUE", help="dotlist overrides, e.g. dims.h=16")


def add_validate_arguments(p: argparse.ArgumentParser) -> None:
    add_experiment_arguments(p)
    p.add_argument(
        "--schema-only",
        action="store_true",
        help="check the YAML alone; by default also what `aiayn train` would refuse (data files, devices, memory)",
    )


def add_show_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "experiment",
        metavar="EXPERIMENT_OR_MODEL",
        help="an experiment YAML file, or a trained model: a run directory, a .ckpt, a Hugging Face folder (Marian, GPT-2, Llama)",
    )
    p.add_argument(
        "overrides", nargs="*", default=[], metavar="KEY=VALUE", help="dotlist overrides of an experiment, e.g. dims.h=16"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--figure",
        type=Path,
        metavar="PATH",
        help="also draw the model, in the manner of the paper's Figure 1, to PATH (.svg or .png, 800 px wide)",
    )


def validate(args: argparse.Namespace) -> int:
    spec = load_experiment(
        args.experiment, args.overrides, registry=args.registry, model_of=partial(source_model, registry=args.registry)
    )
    check_size(spec.model)
    if not args.schema_only:
        from aiayn.builder.train.checks import check_before_training  # imports Lightning

        check_before_training(spec)
    for caution in spec.cautions:
        print(f"warning: {caution}", file=sys.stderr)
    info = summary(spec)
    columns = ", ".join(f"{k}={v}" for k, v in info["paper"].items())
    print(f"{args.experiment}: ok: {spec.name}, {info['params']:,} parameters ({columns})")
    return 0


def show(args: argparse.Namespace) -> int:
    path = Path(args.experiment)
    loaded = _trained(path, args.overrides, args.registry)
    spec = (
        loaded.spec
        if loaded is not None
        else load_experiment(
            args.experiment, args.overrides, registry=args.registry, model_of=partial(source_model, registry=args.registry)
        )
    )
    check_size(spec.model)
    if args.figure is not None:
        write_figure(spec, args.figure, path, experiment=loaded is None)
    info = summary(spec)
    if loaded is not None:  # the model's own tokenizers, not what the experiment's data section would train
        info["tokenizer"] = tokenizers_described(loaded.src_tokenizer, loaded.tgt_tokenizer)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    marian = loaded is not None and loaded.checkpoint.is_dir()  # its weights are the folder's, not a .ckpt
    resolved = spec.model_dump(mode="json", exclude={"extends", "data"} if marian else {"extends"})
    what = "a trained model, its experiment as stored" if loaded is not None else "resolved (defaults filled in)"
    print(f"# {args.experiment}, {f'{loaded.what} as aiayn reads it' if marian else what}")
    print(yaml.safe_dump(resolved, sort_keys=False, default_flow_style=None, width=100).rstrip())
    print()
    print(render(info, graph_of(spec)))
    return 0


def tokenizers_described(src: Any, tgt: Any) -> str:
    """The layout of a trained model's tokenizers and each one's size (both, where they differ)."""
    from aiayn.builder.data.tokenizer import layout

    sides = src.describe() if src is tgt else f"source: {src.describe()}; target: {tgt.describe()}"
    return f"{layout(src, tgt)}; {sides}"


def _trained(path: Path, overrides: list[str], registry: Any) -> Any:
    """A trained model (a run directory, a .ckpt, a Hugging Face Marian folder) as `aiayn translate`
    reads it, or None for an experiment's YAML file."""
    if path.suffix.lower() in (".yaml", ".yml") or not (path.is_dir() or path.suffix == ".ckpt"):
        return None
    from aiayn.builder.decode.checkpoint import load_for_inference  # torch, for a trained model only

    if overrides:
        raise UserError(f"{path} is a trained model, shown as it is: overrides ({overrides[0]}, ...) apply to experiments")
    return load_for_inference(path, registry)


def write_figure(spec: ExperimentSpec, path: Path, source: Path, *, experiment: bool = True) -> None:
    """The model drawn to `path`, which may not be `source` (an experiment's YAML, and the files it
    extends, or a trained model) or lie inside it."""
    from aiayn.builder.model.figure import layout, save  # matplotlib is imported only here

    if path.suffix.lower() not in (".svg", ".png"):
        raise UserError(f"--figure {path}: give a file name ending in .svg or .png (the suffix chooses the format)")
    check_name_lengths(path, "--figure")
    if path.is_dir():
        raise UserError(f"--figure {path} is a folder; give a file name ending in .svg or .png")
    check_writable(path, "--figure")  # a missing folder is made, as translate -o makes one
    reads, parent = [source], parent_of(source) if experiment else None
    while parent is not None and parent not in reads:
        reads.append(parent)
        parent = parent_of(parent)
    check_output(path, "--figure", inputs=reads)
    width, height = save(layout(spec.model, title=spec.name), path)
    size = f"{width} x {height} px" if path.suffix.lower() == ".png" else f"{width / 100:g} x {height / 100:g} in"
    print(f"wrote {path} ({size})", file=sys.stderr)


def schema(args: argparse.Namespace) -> int:
    document = json_schema(ExperimentSpec, args.registry)
    document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    document["title"] = "aiayn experiment"
    print(json.dumps(document, indent=2))
    return 0
