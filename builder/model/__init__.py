"""Specs -> modules: the registry (schema class -> block), build_model, the loss, sizes (exact
parameter counts from meta-built modules; FLOPs and memory in closed form) and what `aiayn show`
prints. Imports blocks, schemas and builder.run."""
