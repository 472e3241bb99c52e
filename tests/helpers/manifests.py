"""Cut-down copies of the published split manifests, for importing a fixture written without one."""

from __future__ import annotations

import json
from pathlib import Path

from skillopt_ci.benchmarks.manifest import load_manifest


def write_small_manifest(name: str, dest: Path, per_split: int = 3) -> Path:
    """A manifest folder holding the first ``per_split`` entries of each split of the published
    manifest of ``name`` (as published), for importing a fixture written without a manifest."""
    published = load_manifest(name)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "split_manifest.json").write_text(json.dumps({**published.meta, "note": "first items only"}, indent=1))
    for split, items in published.splits.items():
        (dest / split).mkdir(exist_ok=True)
        entries = [dict(item.fields) for item in items[:per_split]]
        (dest / split / "items.json").write_text(json.dumps(entries, indent=1))
    return dest
