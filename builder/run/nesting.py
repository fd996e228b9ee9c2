"""How deep a value read from a file or a command line nests, checked before anything recurses
into it: OmegaConf, pydantic and YAML's composer recurse once a level, so a few hundred levels of
`[[[...]]]` reached a RecursionError deep inside them. No setting of aiayn nests past a handful."""

from typing import Any

import yaml

MAX_NESTING = 64  # lists and mappings inside each other; an experiment's deepest is under ten


def nesting(value: Any) -> int:
    """The levels of lists and mappings in `value` (a scalar: 0), counted without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if depth <= MAX_NESTING:  # no need to walk further once past the limit
            stack.extend((child, depth + 1) for child in children)
    return deepest


def too_deep(value: Any) -> str | None:
    """Why `value` is refused (it nests past MAX_NESTING), or None."""
    depth = nesting(value)
    return (
        f"its values nest more than {MAX_NESTING} levels deep (lists or mappings inside each other)"
        if depth > MAX_NESTING
        else None
    )


def yaml_nesting(text: str) -> str | None:
    """Why YAML `text` is refused for its nesting, or None (also where it is no YAML: whoever
    reads it says so)."""
    try:
        return too_deep(yaml.safe_load(text))
    except RecursionError:
        return f"its values nest more than {MAX_NESTING} levels deep (lists or mappings inside each other)"
    except (yaml.YAMLError, ValueError):
        return None
