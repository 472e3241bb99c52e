"""Run directories on disk: atomic files, an append-only results log, and resume.

Layout of an eval run::

    run.json        what this run is (skill, suite, split, model, repeats); checked on resume
    skill.md        the evaluated skill, byte for byte
    results.jsonl   one line per task × repeat, appended as each one finishes
    summary.json    written atomically at the end
    report.md       written atomically at the end
    batches.jsonl   eval --batch: each batch submitted to a provider, and when it was collected
    .lock           the writer's lock (see :mod:`skillopt_ci.engine.runlock`)

Every file is either complete or absent: JSON files are written to a temporary name and renamed;
``results.jsonl`` only grows by whole lines — one ``O_APPEND`` write per result, so ``kill -9``
loses only the rollouts in flight — and a line torn by a full disk is dropped on resume.
Files get the user's umask (``0644`` under umask 022), like any file a command creates.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.records import TaskResult
from skillopt_ci.core.redact import redact
from skillopt_ci.engine.runlock import LOCK, created_by_lock

# Atomic writes live a layer down, so that records which save themselves (the training state) need
# no engine module; re-exported here for the run directory's callers.
from skillopt_ci.inputs.writable import write_atomic as write_atomic
from skillopt_ci.inputs.writable import write_json_atomic as write_json_atomic
from skillopt_ci.models.batch import BatchJournal

MANIFEST = "run.json"
RESULTS = "results.jsonl"
BATCHES = "batches.jsonl"
# Manifest keys that follow from the others (and that older run directories lack): not compared
# on resume.
DERIVED = ("created_at", "split_task_ids")


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


def _entries(directory: Path) -> list[Path]:
    """What a directory holds, apart from its lock file."""
    return [p for p in directory.iterdir() if p.name != LOCK]


def count_kept(directory: Path) -> int:
    """Finished (not errored) task × repeat results under ``directory``, sub-runs included."""
    total = 0
    if not directory.is_dir():
        return 0
    for file in sorted(directory.rglob(RESULTS)):
        with contextlib.suppress(InputError, OSError):
            total += sum(1 for r in RunDir(file.parent).load_results() if r.ok)
    return total


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
            if not (self.path / MANIFEST).is_file() and _entries(self.path):
                raise InputError("refusing to --fresh a directory that is not a run directory", where=str(self.path))
            # Keep the lock file: removing it would let another process lock a new one.
            for entry in _entries(self.path):
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
        existing = self.path / MANIFEST
        if existing.is_file():
            try:
                old = json.loads(existing.read_text(encoding="utf-8"))
            except json.JSONDecodeError:
                raise InputError("run.json is not valid JSON", where=str(existing), hint="delete the run directory") from None
            different = [k for k in manifest if k not in DERIVED and old.get(k) != manifest[k]]
            if different:
                raise InputError(
                    f"this run directory holds a different run ({', '.join(different)} differ)",
                    where=str(self.path),
                    hint="pass --fresh to start over, or --out for a new directory",
                )
            learned = {k: manifest[k] for k in ("split_task_ids",) if k in manifest and old.get(k) != manifest[k]}
            if learned:  # an older run directory gains what this version records
                write_json_atomic(existing, {**old, **learned})
            return self.load_results()
        if self.path.exists() and _entries(self.path):
            raise InputError("output directory exists and is not a run directory", where=str(self.path),
                             hint="choose an empty or new --out")
        self.created = created_by_lock(self.path) or not self.path.exists()
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
        with ResultLog(self.path / RESULTS) as log:
            log.write("".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in results))

    def result_log(self) -> ResultLog:
        return ResultLog(self.path / RESULTS)

    def write_json(self, name: str, data: Any) -> None:
        write_json_atomic(self.path / name, data)

    def write_text(self, name: str, text: str) -> None:
        write_atomic(self.path / name, text)

    def discard(self) -> bool:
        """Remove the directory if this process created it (an aborted run with nothing worth
        resuming). Returns whether it was removed. A run waiting on a provider batch is kept:
        resuming it polls that batch instead of paying for it again."""
        if self.created and not BatchJournal(self.path / BATCHES).open_batches():
            shutil.rmtree(self.path, ignore_errors=True)
            return True
        return False


class ResultLog:
    """``results.jsonl`` opened once with ``O_APPEND``: each :meth:`append` is one ``write`` of
    one whole line, which the kernel appends atomically — no buffer to lose on ``kill -9``."""

    def __init__(self, path: Path):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)

    def __enter__(self) -> ResultLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def append(self, result: TaskResult) -> None:
        self.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")

    def write(self, text: str) -> None:
        """Append ``text`` (whole lines), with secrets redacted (:mod:`skillopt_ci.core.redact`)."""
        data = memoryview(redact(text).encode("utf-8"))
        while data:  # a regular file takes the whole line at once unless the disk is full
            data = data[os.write(self.fd, data):]

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
