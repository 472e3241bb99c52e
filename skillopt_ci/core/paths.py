"""How paths are shown to users: relative to the working directory when inside it."""

from __future__ import annotations

from pathlib import Path


def display_path(path: Path | str) -> str:
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(p)
