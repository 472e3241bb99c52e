"""What an importer returns: the suite to write, before it is written (:mod:`writer`).

Big upstream files (page images, game files, spreadsheets, document corpora) are *assets*:
referenced where they lie as ``@root/relative/path`` and recorded with their sha256 and size,
never copied. Small files the importer makes (an extracted image, a preview) go in ``files`` and
are written into the suite folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import InputError
from skillopt_ci.inputs.assets import file_sha256


@dataclass(frozen=True)
class Asset:
    path: Path
    sha256: str
    size: int


@dataclass
class SuiteDraft:
    name: str
    suite: dict[str, Any]
    tasks: dict[str, list[dict[str, Any]]]
    files: dict[str, bytes] = field(default_factory=dict)
    assets: dict[str, Asset] = field(default_factory=dict)
    asset_roots: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def chat_suite(description: str, prompt: str, scorer: str) -> dict[str, Any]:
    """The suite of a one-call chat benchmark: each task asked once, scored by ``scorer``."""
    return {"description": description, "prompt": prompt, "environment": "chat", "scorer": {"type": scorer},
            "repeats": 1}


def asset(path: Path) -> Asset:
    """Record the file at ``path`` (hashed, streamed) as an asset; a missing file is an InputError."""
    try:
        resolved = path.resolve(strict=True)
        return Asset(resolved, file_sha256(resolved), resolved.stat().st_size)
    except OSError as exc:
        raise InputError(f"cannot read {exc.strerror or exc}", where=str(path)) from None
