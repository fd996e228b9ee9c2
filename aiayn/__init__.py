"""aiayn: a declarative, config-driven builder for the Transformer of "Attention Is All You Need".

The public API is what a plugin needs to add a block (docs/plugins.md):

    specs       Spec, SublayerSpec, NormSpec, PositionalSpec, StackBiasSpec (the bases of a
                block's YAML schema), PositiveInt, Probability, FieldError
    register    register(SpecClass, slot=..., build=..., flops=..., activations=..., label=...),
                BuildContext (what build receives), PluginError
    blocks      Sublayer (the base of a sub-layer block), LayerContext, PackedRows, DecoderState
                (what its forward reads), and blocks to compose: MultiHeadAttention (with its
                seams: kv_heads, positions, score_bias), PositionwiseFeedForward, Dropout

Everything else (aiayn.blocks, aiayn.builder, aiayn.schemas) is internal. Names are imported on
first use, so `import aiayn` (and `import aiayn.schemas`) does not pay for PyTorch.
"""

import importlib
from typing import Any

_PUBLIC = {
    "Spec": "aiayn.schemas._base",
    "PositiveInt": "aiayn.schemas._base",
    "Probability": "aiayn.schemas._base",
    "FieldError": "aiayn.schemas._base",
    "SublayerSpec": "aiayn.schemas.sublayer",
    "NormSpec": "aiayn.schemas.norm",
    "PositionalSpec": "aiayn.schemas.positional",
    "StackBiasSpec": "aiayn.schemas.stack_bias",
    "PluginError": "aiayn.schemas.slots",
    "register": "aiayn.builder.model.registry",
    "BuildContext": "aiayn.builder.model.registry",
    "Sublayer": "aiayn.blocks",
    "LayerContext": "aiayn.blocks",
    "PackedRows": "aiayn.blocks",
    "DecoderState": "aiayn.blocks",
    "MultiHeadAttention": "aiayn.blocks",
    "PositionwiseFeedForward": "aiayn.blocks",
    "Dropout": "aiayn.blocks",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'aiayn' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
