"""Run directories on disk: atomic files, an append-only results log, and resume.

Layout of an eval run::

    run.json        what this run is (skill, suite, split, model, repeats); checked on resume
    skill.md        the evaluated skill, byte for byte
    results.jsonl   one line per task × repeat, appended in batches
    summary.json    written atomically at the end
    report.md       written atomically at the end

Every file is either complete or absent: JSON files are written to a temporary name and renamed;
``results.jsonl`` only grows by whole lines, and a line torn by a kill is dropped on resume.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from skillopt_ci.errors import InputError
from skillopt_ci.records import TaskResult
from skillopt_ci.redact import redact

MANIFEST = "run.json"
RESULTS = "results.jsonl"


def run_kind(directory: Path) -> str | None:
    """``gate``, ``eval`` or ``train`` for a run directory; ``None`` for anything else."""
    if (directory / "gate.json").is_file():
        return "gate"
    try:
        manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    kind = manifest.get("kind") if isinstance(manifest, dict) else None
    return kind if kind in ("eval", "train") else None


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so a reader sees the old file or the new one, never a part.
    Secrets are redacted on the way (:mod:`skillopt_ci.redact`)."""
    text = redact(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


class RunDir:
    """One run directory. ``created`` is true when this process made it (so an aborted run with
    nothing worth keeping can be removed without touching anything older)."""

    def __init__(self, path: Path):
        self.path = path
        self.created = False

    def open(self, manifest: dict[str, Any], *, fresh: bool = False) -> list[TaskResult]:
        """Create the directory or resume it. Returns the results already recorded.

        Raises :class:`InputError` when the directory holds a different run (another skill,
        suite, split, model or repeat count): resuming it would mix incomparable results.
        """
        if fresh and self.path.exists():
            if not (self.path / MANIFEST).is_file() and any(self.path.iterdir()):
                raise InputError("refusing to --fresh a directory that is not a run directory", where=str(self.path))
            shutil.rmtree(self.path)
        existing = self.path / MANIFEST
        if existing.is_file():
            try:
                old = json.loads(existing.read_text(encoding="utf-8"))
            except json.JSONDecodeError:
                raise InputError("run.json is not valid JSON", where=str(existing), hint="delete the run directory") from None
            different = [k for k in manifest if k != "created_at" and old.get(k) != manifest[k]]
            if different:
                raise InputError(
                    f"this run directory holds a different run ({', '.join(different)} differ)",
                    where=str(self.path),
                    hint="pass --fresh to start over, or --out for a new directory",
                )
            return self.load_results()
        if self.path.exists() and any(self.path.iterdir()):
            raise InputError("output directory exists and is not a run directory", where=str(self.path),
                             hint="choose an empty or new --out")
        self.created = not self.path.exists()
        self.path.mkdir(parents=True, exist_ok=True)
        write_json_atomic(existing, manifest)
        return []

    def load_results(self) -> list[TaskResult]:
        """Read ``results.jsonl``; a torn last line (killed mid-write) is dropped and the file
        truncated to its last whole line. A later record for the same task × repeat wins."""
        file = self.path / RESULTS
        if not file.exists():
            return []
        data = file.read_bytes()
        keep = data.rfind(b"\n") + 1
        if keep < len(data):
            with open(file, "r+b") as fh:
                fh.truncate(keep)
        latest: dict[tuple[str, int], TaskResult] = {}
        for lineno, line in enumerate(data[:keep].splitlines(), start=1):
            if not line.strip():
                continue
            try:
                result = TaskResult.from_dict(json.loads(line))
            except (ValueError, KeyError, TypeError):
                raise InputError("unreadable result line", where=f"{file}:{lineno}",
                                 hint="delete the run directory or pass --fresh") from None
            latest[(result.task_id, result.repeat)] = result
        return list(latest.values())

    def append_results(self, results: list[TaskResult]) -> None:
        if not results:
            return
        payload = redact("".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in results))
        with open(self.path / RESULTS, "a", encoding="utf-8") as fh:
            fh.write(payload)
            fh.flush()

    def write_json(self, name: str, data: Any) -> None:
        write_json_atomic(self.path / name, data)

    def write_text(self, name: str, text: str) -> None:
        write_atomic(self.path / name, text)

    def discard(self) -> bool:
        """Remove the directory if this process created it (an aborted run with nothing worth
        resuming). Returns whether it was removed."""
        if self.created:
            shutil.rmtree(self.path, ignore_errors=True)
            return True
        return False
