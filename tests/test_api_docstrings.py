"""Every public name of `aiayn` documents its parameters in the one docstring style the API page
renders as a table (reST fields, mkdocs.yml's docstring_style: sphinx): a function each of its
parameters (`:param name:`), a class those of its constructor, in the class's docstring, and the
public methods of the classes a user calls (Translator, LanguageModel, Registry, RegistryBuilder)
theirs. A spec class's fields are its YAML's, documented by the schema page (docs/schema.md), not here."""

import dataclasses
import inspect

import pytest

import aiayn

METHODS_OF = ("Translator", "LanguageModel", "Registry", "RegistryBuilder")
SKIPPED = {"self", "args", "kwargs", "decode"}  # `**decode`: the run's decode settings, named in the text


def parameters(obj) -> list[str]:
    """The parameters a docstring must name: a function's, a class's constructor's."""
    if inspect.isclass(obj):
        if issubclass(obj, aiayn.Spec) or issubclass(obj, BaseException):
            return []
        if dataclasses.is_dataclass(obj) or hasattr(obj, "_fields"):  # fields set by the constructor
            names = [f.name for f in dataclasses.fields(obj)] if dataclasses.is_dataclass(obj) else list(obj._fields)
            return [n for n in names if not n.startswith("_")]
        init = obj.__dict__.get("__init__")
        return [] if init is None else [p for p in inspect.signature(init).parameters if p not in SKIPPED]
    return [p for p in inspect.signature(obj).parameters if p not in SKIPPED]


def documented(obj) -> list[str]:
    """The parameters its docstring names as `:param name:`; a class's, or its bases' (a field it inherits)."""
    owners = [c for c in obj.__mro__ if c.__module__.startswith("aiayn.")] if inspect.isclass(obj) else [obj]
    doc = "\n".join(c.__doc__ or "" for c in owners)
    return [line.split(":param ", 1)[1].split(":", 1)[0].split()[-1] for line in doc.splitlines() if ":param " in line]


def public_names() -> list[tuple[str, object]]:
    found = []
    for name in aiayn.__all__:
        obj = getattr(aiayn, name)
        if not callable(obj) or getattr(obj, "__module__", "").startswith("typing"):
            continue
        found.append((name, obj))
        if name in METHODS_OF:
            found += [(f"{name}.{m}", v) for m, v in vars(obj).items() if inspect.isfunction(v) and not m.startswith("_")]
    return found


@pytest.mark.parametrize(("name", "obj"), public_names(), ids=[n for n, _ in public_names()])
def test_every_parameter_is_documented(name, obj):
    missing = [p for p in parameters(obj) if p not in documented(obj)]
    assert not missing, f"{name}: document {', '.join(missing)} with ':param <name>: ...' in its docstring"
