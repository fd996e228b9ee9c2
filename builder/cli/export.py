"""aiayn export RUN_OR_CKPT --to ctranslate2|huggingface OUT: deploy a trained model outside aiayn.

ctranslate2: a CTranslate2 model folder (model.bin, config.json, vocabulary) with aiayn's
tokenizer.json beside it; --quantization is passed to CTranslate2's converter. huggingface: a
MarianMTModel folder (config, weights, generation config, tokenizer) for `from_pretrained`.
"""

import argparse
from pathlib import Path

from aiayn.builder.cli.translate import add_checkpoint_argument
from aiayn.builder.export import TARGETS
from aiayn.builder.export import export as export_model

# CTranslate2's weight types (its converters' --quantization)
QUANTIZATIONS = ("int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16", "float32")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_checkpoint_argument(p)
    p.add_argument("--to", required=True, choices=tuple(TARGETS), help="the runtime to export for")
    p.add_argument("out", type=Path, metavar="OUT", help="the folder to write (new or empty; see --force)")
    p.add_argument("--quantization", choices=QUANTIZATIONS, help="CTranslate2 weight type (default: the checkpoint's float32)")
    p.add_argument("--force", action="store_true", help="replace OUT if it holds files (only once the export succeeded)")


def export(args: argparse.Namespace) -> int:
    loaded = export_model(
        args.checkpoint, args.to, args.out, quantization=args.quantization, force=args.force, registry=args.registry
    )
    print(f"exported {loaded.checkpoint} ({loaded.what}) to {args.out} ({TARGETS[args.to][2]})")
    return 0
