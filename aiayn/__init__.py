"""aiayn: a declarative, config-driven builder for the Transformer of "Attention Is All You Need".

The public API is what a plugin needs to add a block; everything else (aiayn.blocks,
aiayn.builder, aiayn.schemas) is internal. Names are imported on first use, so `import aiayn`
(and `import aiayn.schemas`) does not pay for PyTorch.
"""
