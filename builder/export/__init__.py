"""Deploy a trained model outside aiayn: CTranslate2 (fast CPU/GPU inference, int8) or Hugging
Face `transformers` (a MarianMTModel that `from_pretrained` loads and `generate` runs).

Both exporters are optional extras (`pip install -e ".[export]"`); each target's package is
imported only when that target is asked for. An export reads the checkpoint with aiayn's own
loader, refuses what the target cannot express (a message naming the YAML field), and writes
OUT whole or not at all (builder/run/atomic.py's staged_folder). The writers of each format, and
what each cannot hold, are builder/formats/'s (beside the readers of the same formats).
"""

import importlib
import importlib.util
from pathlib import Path

from aiayn.builder.decode.checkpoint import ForInference, load_for_inference
from aiayn.builder.errors import UserError
from aiayn.builder.formats.limits import check_ctranslate2, check_marian
from aiayn.builder.graph import graph_of
from aiayn.builder.plugins import default_registry
from aiayn.builder.registry import Registry
from aiayn.builder.run.atomic import check_folder_output, staged_folder
from aiayn.builder.run.outputs import check_output

# --to name -> (module, the package it needs, what to call it in messages, its limits)
TARGETS = {
    "ctranslate2": ("aiayn.builder.formats.to_ctranslate2", "ctranslate2", "CTranslate2", check_ctranslate2),
    "huggingface": ("aiayn.builder.formats.to_marian", "transformers", "Hugging Face transformers", check_marian),
}


def export(
    checkpoint: str | Path,
    target: str,
    out: str | Path,
    *,
    quantization: str | None = None,
    force: bool = False,
    registry: Registry | None = None,
) -> ForInference:
    """Export the model of a run directory (its averaged model where it averaged) or .ckpt to
    `out`; returns what was loaded. `registry`: what reads it (default: aiayn.load_registry())."""
    if target not in TARGETS:
        raise UserError(f"--to {target!r}: export to one of {', '.join(TARGETS)}")
    module_name, package, name, check = TARGETS[target]
    if quantization is not None and target != "ctranslate2":
        raise UserError(f"--quantization applies to --to ctranslate2 only; {name} gets the checkpoint's float32 weights")
    out = Path(out)
    check_output(out, "OUT", inputs=[Path(checkpoint)])
    check_folder_output(out, force=force, purpose="export into")
    if importlib.util.find_spec(package) is None:
        raise UserError(
            f"--to {target} needs the {package} package, which is not installed: "
            f'pip install -e ".[export]" (or pip install {package})'
        )
    loaded = load_for_inference(checkpoint, registry or default_registry())
    graph = graph_of(loaded.spec)
    if graph.export(loaded, target, name, out, quantization):  # a route of the graph's own (GPT-2's, Llama's family)
        return loaded
    check(loaded.spec.model)
    module = importlib.import_module(module_name)
    # sinusoid tables cover the longest input aiayn translates plus the output it may add to it
    rows = loaded.spec.decode.max_input_len + loaded.spec.decode.max_len_b
    options = {"quantization": quantization} if target == "ctranslate2" else {}
    with staged_folder(out) as folder:
        module.write(loaded, folder, position_rows=rows, **options)
    return loaded
