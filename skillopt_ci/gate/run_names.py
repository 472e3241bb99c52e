"""Default run directories, named by content.

A run directory resumes only the run it was made for (``run.json`` is checked), so its default
name is a digest of everything that decides what it evaluates: the skill text (or commits), the
suite, split, repeats, target model and shard. An edited skill gets a new directory; re-running
an unchanged command resumes the old one. ``--out`` names a directory explicitly and ``--fresh``
starts it over; every command that writes a run takes both.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.names import run_dir_name
from skillopt_ci.core.paths import display_path
from skillopt_ci.core.shard import Shard
from skillopt_ci.core.skill import load_skill
from skillopt_ci.gate.changes import resolve_changes
from skillopt_ci.gate.git import Git
from skillopt_ci.inputs.config import Config
from skillopt_ci.inputs.suite import load_suite


def run_key(ident: dict[str, Any]) -> str:
    """Ten hex digits of the sha256 of ``ident`` (canonical JSON)."""
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:10]


def _common(config: Config, shard: Shard | None) -> dict[str, Any]:
    policy = config.gate
    return {"split": policy.split, "repeats": policy.repeats, "model": config.models["target"].to_dict(),
            "shard": str(shard) if shard else None}


def compare_run_dir(config: Config, base_path: Path, head_path: Path, suite_path: Path,
                    shard: Shard | None) -> Path:
    """``compare``: both skills' content hashes, the suite's hash, split, repeats, model, shard.
    Raises :class:`InputError` when a skill or the suite cannot be loaded."""
    base = load_skill(base_path, display=display_path(base_path))
    head = load_skill(head_path, display=display_path(head_path))
    suite = load_suite(suite_path, display=display_path(suite_path))
    key = run_key({"kind": "compare", "base": base.hash, "head": head.hash, "suite": suite.hash,
                   **_common(config, shard)})
    return config.runs_dir / run_dir_name("compare", head.name, config.gate.split, key)


def gate_run_dir(config: Config, git: Git, base_ref: str, head_ref: str | None, shard: Shard | None,
                 only: Sequence[str] = ()) -> Path:
    """``gate``: the merge base and the head commit, or, for the working tree, the content of
    every changed skill and its suite; split, repeats, model, shard and ``--skill`` filter."""
    base_sha, head_sha, merge_base, changes = resolve_changes(config, git, base_ref, head_ref, only)
    head: Any = head_sha
    if head_ref is None:
        top = git.top_level()
        head = {c.name: [_file_digest(top / c.path), _suite_digest(top / c.suite)]
                for c in changes if c.status != "deleted"}
    key = run_key({"kind": "gate", "merge_base": merge_base, "head": head, "only": sorted(only),
                   **_common(config, shard)})
    label = "worktree" if head_ref is None else head_sha[:8]
    return config.runs_dir / f"gate-{base_sha[:8]}-{label}-{key}"


def _file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _suite_digest(folder: Path) -> str | None:
    """The suite's hash; None when it does not load (the gate itself then reports why)."""
    try:
        return load_suite(folder, display=folder.name).hash
    except InputError:
        return None
