"""MkDocs hooks (mkdocs.yml `hooks:`): the site's home page is README.md, its links into docs/
made relative to the site, and the schema page lists every section and block of the experiment
format from its JSON Schema (aiayn's own types: plugins are left out), field by field."""

import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LAYOUT = ROOT / "build" / "docs-api"  # the installed layout for mkdocstrings (mkdocs.yml's paths)
SUBPACKAGES = ("blocks", "builder", "schemas")  # the repository's folders that install as aiayn.<name>


def on_startup(command: str, dirty: bool) -> None:
    """build/docs-api/aiayn: the package as it installs (aiayn/ with blocks/, builder/ and
    schemas/ inside it) for mkdocstrings to read statically: aiayn/'s files copied (griffe looks
    for a module's submodules beside its real path), links to the three folders."""
    package = LAYOUT / "aiayn"
    package.mkdir(parents=True, exist_ok=True)
    for source in (ROOT / "aiayn").glob("*.py"):
        (package / source.name).write_bytes(source.read_bytes())
    for name in SUBPACKAGES:
        if not (package / name).is_symlink():
            (package / name).symlink_to(ROOT / name)


def on_page_read_source(page: Any, config: Any) -> str | None:
    if page.file.src_uri == "index.md":
        return re.sub(r"\]\(docs/", "](", (ROOT / "README.md").read_text(encoding="utf-8"))
    if page.file.src_uri == "schema.md":
        return (ROOT / "docs" / "schema.md").read_text(encoding="utf-8") + "\n" + schema_markdown()
    return None


def schema_markdown() -> str:
    """A section a schema definition: its description, then a table of its fields (type, default, bounds)."""
    from aiayn.builder.plugins import load_registry
    from aiayn.schemas.experiment import ExperimentSpec
    from aiayn.schemas.slots import json_schema

    document = json_schema(ExperimentSpec, load_registry(""))  # aiayn's own types, whatever plugins the machine has
    parts = [_section("ExperimentSpec (the file)", document)]
    parts += [_section(name, spec) for name, spec in sorted(document.get("$defs", {}).items())]
    return "\n".join(parts)


def _section(name: str, spec: dict[str, Any]) -> str:
    tag = spec.get("properties", {}).get("type", {}).get("const")
    lines = [f"## {name}" + (f" (`type: {tag}`)" if tag else "") + f" {{#{name.split()[0].lower()}}}", ""]
    if spec.get("description"):
        lines += [" ".join(spec["description"].split()), ""]
    lines += ["| field | type | default | constraints |", "|---|---|---|---|"]
    for field, prop in spec.get("properties", {}).items():
        required = field in spec.get("required", [])
        default = "required" if required else f"`{json.dumps(prop['default'])}`" if "default" in prop else ""
        lines.append(f"| `{field}` | {_type(prop)} | {default} | {_bounds(prop)} |")
    return "\n".join(lines) + "\n"


def _type(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    if "enum" in prop:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    for key in ("anyOf", "oneOf"):
        if key in prop:
            return " \\| ".join(dict.fromkeys(_type(p) for p in prop[key]))
    if prop.get("type") == "array":
        items = prop.get("items")
        return f"list of {_type(items)}" if isinstance(items, dict) else "list"
    if prop.get("type") == "object":
        values = prop.get("additionalProperties")
        return f"mapping of {_type(values)}" if isinstance(values, dict) else "mapping"
    return str(prop.get("type", "any"))


def _bounds(prop: dict[str, Any]) -> str:
    names = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<", "minLength": "length >=",
             "pattern": "matches"}  # fmt: skip
    return ", ".join(f"{words} `{prop[key]}`" for key, words in names.items() if key in prop)
