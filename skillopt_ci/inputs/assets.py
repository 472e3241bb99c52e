"""Suite assets: big files a suite references where they lie instead of holding them.

An imported benchmark names its upstream files (page images, game files, spreadsheets, document
corpora) as ``@root/relative/path`` in a task's ``files`` or ``images``. ``suite.yaml`` maps each
root to a folder (``assets: {docs: /data/officeqa/docs}``; a relative folder is relative to the
suite directory; ``${VAR}`` is read from the environment), and ``assets.json`` records every
referenced file's sha256 and size. The index is part of the suite hash, so results stay tied to
the bytes they were measured on, without re-reading gigabytes at each load: loading checks that
each file exists with its recorded size, and an environment checks the sha256 of each file as it
reads it for a rollout (:meth:`AssetIndex.resolve`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from skillopt_ci.core.errors import InputError

INDEX_FILE = "assets.json"
ROOT_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
CHUNK = 1 << 20


def is_asset_ref(path: str) -> bool:
    return path.startswith("@")


@dataclass(frozen=True)
class AssetIndex:
    """The roots and recorded files of one suite (empty for a suite without assets)."""

    roots: Mapping[str, Path] = field(default_factory=lambda: MappingProxyType({}))
    files: Mapping[str, tuple[str, int]] = field(default_factory=lambda: MappingProxyType({}))
    where: str = ""

    def path_of(self, ref: str) -> Path:
        """Where ``@root/rel`` lies (no check); ``InputError`` for an unknown root or a bad path."""
        root, _, rel = ref[1:].partition("/")
        if root not in self.roots:
            known = ", ".join(f"@{r}" for r in self.roots) or "none"
            raise InputError(f"asset {ref!r}: unknown root @{root} (roots in suite.yaml assets: {known})",
                             where=self.where)
        if not rel or Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise InputError(f"asset {ref!r}: the path after the root must stay inside it", where=self.where)
        return self.roots[root] / rel

    def problem(self, ref: str) -> str | None:
        """Why ``ref`` cannot be used (load-time check: listed, exists, recorded size), or None."""
        try:
            path = self.path_of(ref)
        except InputError as exc:
            return exc.message
        if ref not in self.files:
            return f"asset {ref!r} is not listed in {INDEX_FILE}; re-import the benchmark"
        try:
            size = path.stat().st_size
        except OSError:
            return f"asset {ref!r} not found at {path}; check the root in suite.yaml assets (or re-import)"
        if size != self.files[ref][1]:
            return (f"asset {ref!r} at {path} has changed since the import ({size} bytes, "
                    f"{self.files[ref][1]} recorded); re-import the benchmark")
        return None

    def resolve(self, ref: str, where: str | None = None) -> Path:
        """The checked path of ``ref``: its sha256 must be the recorded one (a changed file is an
        InputError: the results would no longer be about the imported data)."""
        problem = self.problem(ref)
        if problem:
            raise InputError(problem, where=where or self.where)
        path = self.path_of(ref)
        if file_sha256(path) != self.files[ref][0]:
            raise InputError(f"asset {ref!r} at {path} has changed since the import (sha256 differs)",
                             where=where or self.where, hint="re-import the benchmark")
        return path


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def load_assets(suite_dir: Path, roots: Any, shown: str) -> AssetIndex:
    """The asset index of a suite: its ``assets:`` roots and ``assets.json``. Raises InputError."""
    where = f"{shown}/suite.yaml"
    if roots is None:
        roots = {}
    if not isinstance(roots, dict):
        raise InputError('"assets" must map root names to folders', where=where)
    resolved: dict[str, Path] = {}
    for name, folder in roots.items():
        if not isinstance(name, str) or not ROOT_RE.match(name) or not isinstance(folder, str) or not folder:
            raise InputError(f"assets: {name!r} must be a name (letters, digits, _ -) mapping to a folder",
                             where=where)
        resolved[name] = _folder(suite_dir, folder, f"{where} (assets.{name})")
    files = _index(suite_dir / INDEX_FILE, f"{shown}/{INDEX_FILE}") if (suite_dir / INDEX_FILE).is_file() else {}
    return AssetIndex(MappingProxyType(resolved), MappingProxyType(files), where)


def _folder(suite_dir: Path, folder: str, where: str) -> Path:
    def var(match: re.Match[str]) -> str:
        value = os.environ.get(match.group(1))
        if not value:
            raise InputError(f"environment variable {match.group(1)} is not set", where=where,
                             hint=f"export {match.group(1)}=<the folder of the downloaded data>")
        return value

    path = Path(VAR_RE.sub(var, folder)).expanduser()
    return path if path.is_absolute() else suite_dir / path


def _index(path: Path, shown: str) -> dict[str, tuple[str, int]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", where=shown) from None
    entries = data.get("files") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise InputError('must be an object with "files": {"@root/path": {"sha256", "size"}}', where=shown)
    out = {}
    for ref, entry in entries.items():
        ok = isinstance(entry, dict) and isinstance(entry.get("sha256"), str) and isinstance(entry.get("size"), int)
        if not ok or not is_asset_ref(ref):
            raise InputError(f"entry {ref!r} needs a sha256 and a size", where=shown)
        out[ref] = (entry["sha256"], entry["size"])
    return out


_INDEXES: dict[tuple[Path, float, float], AssetIndex] = {}
_VERIFIED: set[tuple[Path, int, int]] = set()


def suite_index(suite_dir: Path) -> AssetIndex:
    """The asset index of the suite in ``suite_dir`` (read once per version of its files)."""
    root = suite_dir.resolve()
    stamps = tuple((root / n).stat().st_mtime if (root / n).is_file() else 0.0 for n in ("suite.yaml", INDEX_FILE))
    key = (root, stamps[0], stamps[1])
    if key not in _INDEXES:
        try:
            data = yaml.safe_load((root / "suite.yaml").read_text(encoding="utf-8")) if stamps[0] else {}
        except (OSError, yaml.YAMLError) as exc:
            raise InputError(f"cannot read: {exc}", where=str(root / "suite.yaml")) from None
        roots = data.get("assets") if isinstance(data, dict) else None
        _INDEXES[key] = load_assets(root, roots, str(suite_dir))
    return _INDEXES[key]


def suite_file(suite_dir: Path, relative: str, where: str | None = None) -> Path:
    """The path of a file a task names: ``suite_dir / relative``, or for ``@root/path`` the
    asset where it lies, its sha256 checked against ``assets.json`` (once per process per file
    version). Environments and scorers read every task file through this."""
    if not is_asset_ref(relative):
        return suite_dir / relative
    index = suite_index(suite_dir)
    path = index.path_of(relative)
    try:
        stat = path.stat()
        stamp = (path, stat.st_size, stat.st_mtime_ns)
    except OSError:
        stamp = None
    if stamp is not None and stamp in _VERIFIED and index.files.get(relative, ("", -1))[1] == stat.st_size:
        return path
    resolved = index.resolve(relative, where)
    if stamp is not None:
        _VERIFIED.add(stamp)
    return resolved
