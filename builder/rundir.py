"""The run directory, Lightning's layout: runs/<name>/version_<n>/.

It holds config.yaml (the resolved experiment), config.diff.yaml (what it changes in the
experiment it extends), tokenizer.json, checkpoints/, TensorBoard events, status.json (running,
interrupted, failed or finished) and, only once training finished, results.json.
"""

import json
import os
import re
from pathlib import Path
from typing import Any

import yaml

from builder.errors import UserError

RUN_DIR_ENV = "AIAYN_RUN_DIR"  # set by rank 0 so the processes it launches share its run directory


def versions(root: Path, name: str) -> list[int]:
    found = [re.fullmatch(r"version_(\d+)", p.name) for p in (root / name).glob("version_*") if p.is_dir()]
    return sorted(int(m.group(1)) for m in found if m)


def new_run_dir(root: Path, name: str) -> Path:
    existing = versions(root, name)
    path = root / name / f"version_{existing[-1] + 1 if existing else 0}"
    path.mkdir(parents=True)
    return path


def latest_run_dir(root: Path, name: str) -> Path:
    existing = versions(root, name)
    if not existing:
        raise UserError(f"--resume: no run of {name!r} under {root / name}; train it first, without --resume")
    return root / name / f"version_{existing[-1]}"


def last_checkpoint(run_dir: Path) -> Path:
    path = run_dir / "checkpoints" / "last.ckpt"
    if not path.is_file():
        raise UserError(f"--resume: {run_dir} has no checkpoint to resume from ({path} does not exist)")
    return path


def version_of(run_dir: Path) -> int:
    match = re.fullmatch(r"version_(\d+)", run_dir.name)
    if not match:
        raise UserError(f"{run_dir}: a run directory is named version_<n>")
    return int(match.group(1))


def inherited_run_dir() -> Path | None:
    """The run directory of the rank-0 process that launched this one, if any."""
    value = os.environ.get(RUN_DIR_ENV)
    return Path(value) if value and os.environ.get("LOCAL_RANK", "0") != "0" else None


def write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def write_yaml(path: Path, data: dict[str, Any]) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100))


def diff(parent: Any, child: Any) -> Any:
    """The parts of `child` that differ from `parent` (nested mappings compared key by key)."""
    if isinstance(parent, dict) and isinstance(child, dict):
        out = {}
        for key, value in child.items():
            if key not in parent:
                out[key] = value
            elif parent[key] != value:
                out[key] = diff(parent[key], value)
        return out
    return child
