"""The identity of a gate's configuration: what a sharded gate's shards must share with the job
that merges them.

:func:`config_hash` is a SHA-256 over a canonical form of the validated :class:`Config` (models,
skills and suites, gate policy, eval limits, training settings, budgets…), with paths relative to
the config's folder, so two checkouts of the same config in different folders hash alike and any
change to what the config says changes the hash. It is recorded in ``gate.json``; the merge job
compares it with its own and judges with its own policy, never a shard's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillopt_ci.inputs.config import Config


def config_hash(config: Config) -> str:
    """The hex SHA-256 of ``config``'s canonical form (the folder and file name left out)."""
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name not in ("root", "file")}
    text = json.dumps(_canonical(fields, config.root.resolve()), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _canonical(value: Any, root: Path) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _canonical(getattr(value, f.name), root) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _canonical(v, root) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v, root) for v in value]
    if isinstance(value, Path):
        resolved = (root / value).resolve()
        return resolved.relative_to(root).as_posix() if resolved.is_relative_to(root) else value.as_posix()
    return value
