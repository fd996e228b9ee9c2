"""Specs -> runnable objects: run/ (config, run directory), model/ (the registry, build, sizes,
loss), data/, decode/, train/, sweep/, export/ and cli/ (docs/architecture.md: they import one way)."""
