"""Specs -> modules: the registry (`register`, the one way a block enters; builtin.py registers
aiayn's own), build_model, the loss, sizes (exact parameter counts from meta-built modules; FLOPs
and memory in closed form) and what `aiayn show` prints. Imports blocks, schemas and builder.run."""
