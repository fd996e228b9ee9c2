"""The one-way imports of docs/architecture.md, read from the source (imports inside functions too):
schemas import no torch; blocks import no schemas, builder or pydantic; builder's subsystems
import one way (errors, registry <- run <- data <- model <- decode <- train <- sweep <- cli; decode <- export <- cli; decode <- serve <- cli),
and nothing imports cli.
The installed names carry the `aiayn.` prefix (aiayn.builder.run is the folder builder/run); `aiayn`
itself, the public API, re-exports what a plugin needs."""

import ast
from pathlib import Path

import pytest
import tomllib

from tests.conftest import ROOT

# what the layers from decode up may import, besides themselves and the layers between
MODELLING = (
    "schemas",
    "blocks",
    "builder.errors",
    "builder.registry",
    "builder.graph",
    "builder.plugins",
    "builder.run",
    "builder.model",
    "builder.data",
)
# package -> the project packages it may import (its own included)
ALLOWED = {
    "schemas": {"schemas"},
    "blocks": {"blocks"},
    "builder.errors": set(),
    "builder.registry": {"schemas", "builder.errors", "builder.registry"},
    # loads the entry points into a Registry; the public functions' default (registry=None) calls it
    "builder.plugins": {"schemas", "builder.errors", "builder.registry", "builder.plugins"},
    # what a graph answers (builder/graph.py): asked by every layer from data up, it imports no graph
    "builder.graph": {"schemas", "builder.errors", "builder.registry", "builder.graph"},
    "builder.run": {"schemas", "builder.errors", "builder.run"},
    "builder.data": {"schemas", "builder.errors", "builder.registry", "builder.graph", "builder.run", "builder.data"},
    "builder.model": {
        "schemas",
        "blocks",
        "builder.errors",
        "builder.registry",
        "builder.graph",
        "builder.run",
        "builder.data",
        "builder.model",
    },
    # the field's formats, in (a released folder read) and out (written): below decoding, which reads through them
    "builder.formats": {*MODELLING, "builder.formats"},
    "builder.decode": {*MODELLING, "builder.formats", "builder.decode"},
    "builder.train": {*MODELLING, "builder.formats", "builder.decode", "builder.train"},
    "builder.export": {*MODELLING, "builder.formats", "builder.decode", "builder.export"},
    "builder.sweep": {*MODELLING, "builder.formats", "builder.decode", "builder.sweep"},
    "builder.serve": {*MODELLING, "builder.formats", "builder.decode", "builder.serve"},
    # aiayn's graphs, one file each (registered through an entry point; nothing imports them)
    "builder.graphs": {*MODELLING, "builder.formats", "builder.decode", "builder.train", "builder.export", "builder.graphs"},
    "builder.cli": set(),  # anything: checked below only for what it is
    # the public names (aiayn/__init__.py's typed import block: the lazy map's targets, held equal by tests/test_api.py)
    "aiayn": {*MODELLING, "builder.formats", "builder.decode"},
    "aiayn.__main__": set(),  # `python -m aiayn`: the CLI
}
CLI = {"builder.cli", "aiayn.__main__"}
PREFIX = "aiayn."
FORBIDDEN_THIRD_PARTY = {"schemas": {"torch", "lightning"}, "blocks": {"pydantic", "omegaconf", "lightning"}}


def owner(name: str) -> str | None:
    """The package of ALLOWED a dotted module name belongs to (the longest prefix)."""
    for package in sorted(ALLOWED, key=len, reverse=True):
        if name == package or name.startswith(package + "."):
            return package
    return None


def imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [f"{node.module}.{alias.name}" for alias in node.names]
    return [name.removeprefix(PREFIX) for name in found]


def violations(root: Path) -> list[str]:
    bad = []
    for path in sorted(p for top in ("schemas", "blocks", "builder", "aiayn") for p in (root / top).rglob("*.py")):
        module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        package = owner(module)
        for name in imports(path):
            target = owner(name)
            if target == "builder.cli" and package not in CLI:
                bad.append(f"{module} imports {name}: nothing imports the CLI")
            elif target is not None and package not in CLI and target not in ALLOWED[package]:
                bad.append(f"{module} imports {name}: {package} may import only {sorted(ALLOWED[package])}")
            elif name.split(".")[0] in FORBIDDEN_THIRD_PARTY.get(package, ()):
                bad.append(f"{module} imports {name}, which {package} must not depend on")
    return bad


def test_imports_run_one_way():
    assert violations(ROOT) == []


def test_every_module_belongs_to_a_layer():
    modules = [p for top in ("schemas", "blocks", "builder", "aiayn") for p in (ROOT / top).rglob("*.py")]
    orphans = [str(p) for p in modules if owner(".".join(p.relative_to(ROOT).with_suffix("").parts)) is None]
    assert orphans == [] or orphans == [str(ROOT / "builder" / "__init__.py")]


@pytest.mark.parametrize(
    ("module", "line", "expected"),
    [
        (
            "builder/model/oops.py",
            "from builder.train.fit import fit",
            "builder.model.oops imports builder.train.fit.fit: builder.model may import only",
        ),
        ("builder/sweep/oops.py", "import builder.cli", "builder.sweep.oops imports builder.cli: nothing imports the CLI"),
        (
            "builder/train/oops.py",
            "import aiayn.builder.graphs",
            "builder.train.oops imports builder.graphs: builder.train may import only",
        ),
        ("schemas/oops.py", "import torch", "schemas.oops imports torch, which schemas must not depend on"),
        (
            "blocks/oops.py",
            "def f():\n    from schemas.model import ModelSpec",
            "blocks.oops imports schemas.model.ModelSpec: blocks may import only",
        ),
    ],
)
def test_a_back_import_is_caught(tmp_path, module, line, expected):
    path = tmp_path / module
    path.parent.mkdir(parents=True)
    path.write_text(line + "\n")
    for top in ("schemas", "blocks", "builder"):
        (tmp_path / top).mkdir(exist_ok=True)
    [found] = violations(tmp_path)
    assert found.startswith(expected)


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name (without the `aiayn.` prefix) -> its file."""
    paths = (p for top in ("schemas", "blocks", "builder", "aiayn") for p in (root / top).rglob("*.py"))
    return {".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p for p in paths}


def entry_point_edges(root: Path) -> list[tuple[str, str]]:
    """(the module that loads the entry points, the module an `aiayn.blocks` entry point names), from
    pyproject.toml: an import no import statement shows."""
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        return []
    group = tomllib.loads(pyproject.read_text()).get("project", {}).get("entry-points", {}).get("aiayn.blocks", {})
    return [("builder.plugins", value.partition(":")[0].removeprefix(PREFIX)) for value in group.values()]


def cycles(root: Path) -> list[list[str]]:
    """The import cycles between modules (strongly connected components of more than one module),
    imports inside functions included: what an import-graph tool draws."""
    files = modules(root)

    def module_of(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph = {m: {t for n in imports(f) if (t := module_of(n)) not in (None, m)} for m, f in files.items()}
    for loader, target in entry_point_edges(root):  # the loader imports what an entry point names
        if loader in graph and module_of(target):
            graph[loader].add(str(module_of(target)))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = stack[stack.index(v) :]
            del stack[stack.index(v) :]
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_no_module_imports_itself_round_a_cycle():
    assert cycles(ROOT) == []


def test_the_entry_points_are_loaded_above_what_they_register():
    """builder/plugins.py loads aiayn's own blocks (builder/model/builtin.py), graphs (builder/graphs/)
    and decoding strategies (builder/decode/strategies.py) as a plugin's: edges of the import graph
    too, and they close no cycle (the schemas load nothing; the graphs and the strategies import no
    module that loads the registry)."""
    assert entry_point_edges(ROOT) == [
        ("builder.plugins", "builder.model.builtin"),
        ("builder.plugins", "builder.graphs"),
        ("builder.plugins", "builder.decode.strategies"),
    ]
    assert cycles(ROOT) == []


def test_a_cycle_closed_inside_a_function_is_caught(tmp_path):
    (tmp_path / "builder" / "decode").mkdir(parents=True)
    (tmp_path / "builder" / "decode" / "a.py").write_text("from aiayn.builder.decode.b import f\n")
    (tmp_path / "builder" / "decode" / "b.py").write_text("def f():\n    from aiayn.builder.decode.a import g\n")
    (tmp_path / "builder" / "decode" / "c.py").write_text("from aiayn.builder.decode.a import f\n")
    assert cycles(tmp_path) == [["builder.decode.a", "builder.decode.b"]]


def test_no_function_is_over_50_lines():
    """A function a screen long at most (STYLE.md): the project's own code, docstrings included."""
    long = []
    for folder in ("schemas", "blocks", "builder", "aiayn"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 50:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert long == []
