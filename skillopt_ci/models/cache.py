"""Response cache in SQLite, keyed by provider, model, parameters, messages and sample index
(and, when present, the tools offered, the caller's context and a non-default API).

The sample index is part of the key so that repeats are real repeats, not copies of the first
sample. A plain call (text-only messages, no tools, no context, Chat Completions or Anthropic
Messages) hashes exactly the payload it hashed before tools existed, so old caches still hit.
Images enter the key by media type and sha256, tool calls by id, name and arguments. Modes: ``read-write`` (default), ``refresh`` (never read, always write), ``off``, and
``replay-only`` (read; a miss is an error, for fully deterministic CI).

Nothing stored holds a registered secret in any form (:mod:`skillopt_ci.core.redact`): the
cache is kept between CI runs and restored by later ones, so it is a sink like the run directory.
:func:`redacted` gives a completion as it is stored; the pool hands that same value to its caller,
so a live run and its replay see the same text.

Safe with concurrent writers: WAL journal, a busy timeout, and ``INSERT OR REPLACE`` so two
processes recording the same key both succeed. Schema changes go through numbered migrations.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skillopt_ci.core.cache_modes import CACHE_MODES
from skillopt_ci.core.errors import InputError, RuntimeFailure
from skillopt_ci.core.redact import redact, redact_obj
from skillopt_ci.inputs.writable import check_file
from skillopt_ci.models.base import Completion, Message, ToolCall, ToolSpec, Usage

_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE responses (
        key TEXT PRIMARY KEY,
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        text TEXT NOT NULL,
        finish_reason TEXT,
        input_tokens INTEGER,
        output_tokens INTEGER,
        latency_s REAL NOT NULL,
        created_at REAL NOT NULL
    )
    """,
    # 2: the tool calls of a reply, as a JSON list of {"id", "name", "arguments"}; NULL for none
    "ALTER TABLE responses ADD COLUMN tool_calls TEXT",
    # 3: whole scored rollouts of environments whose model calls this cache cannot see (agent
    # CLIs call the model themselves): the result line and the files it kept (path -> base64)
    """
    CREATE TABLE rollouts (
        key TEXT PRIMARY KEY,
        result TEXT NOT NULL,
        files TEXT NOT NULL,
        created_at REAL NOT NULL
    )
    """,
)


def redacted(completion: Completion) -> Completion:
    """``completion`` with its text and tool-call arguments redacted (itself when nothing changes)."""
    text = redact(completion.text)
    calls = tuple(dataclasses.replace(c, arguments=redact(c.arguments)) if c.arguments else c
                  for c in completion.tool_calls)
    if text == completion.text and calls == completion.tool_calls:
        return completion
    return dataclasses.replace(completion, text=text, tool_calls=calls)


def cache_key(
    provider: str,
    model: str,
    params: Mapping[str, Any],
    messages: Sequence[Message],
    sample_index: int,
    *,
    tools: Sequence[ToolSpec] = (),
    context: Mapping[str, Any] | None = None,
    api: str = "chat",
    reply: Mapping[str, Any] | None = None,
) -> str:
    """Stable sha256 of everything that determines a response. ``tools``, a non-empty
    ``context``, an ``api`` other than "chat" and a structured ``reply`` join the payload only when present, so a plain
    call keeps the key it always had."""
    payload: dict[str, Any] = {
        "provider": provider,
        "model": model,
        "params": dict(params),
        "messages": [m.cache_form() for m in messages],
        "sample": sample_index,
    }
    if tools:
        payload["tools"] = [t.to_dict() for t in tools]
    if context:
        payload["context"] = dict(context)
    if api != "chat":
        payload["api"] = api
    if reply:
        payload["reply"] = dict(reply)
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ResponseCache:
    """A handle on the cache file. Use from one thread (the event loop); open one per process."""

    def __init__(self, path: Path, mode: str = "read-write"):
        if mode not in CACHE_MODES:
            raise InputError(f"unknown cache mode {mode!r}", hint=f"use one of: {', '.join(CACHE_MODES)}")
        self.path = path
        self.mode = mode
        self.hits = 0
        self.misses = 0
        self._db: sqlite3.Connection | None = None
        if mode != "off":
            self._db = self._open(path)

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        elsewhere = "set cache.path in skillopt.yml to a file in a writable place, or pass --cache off"
        try:
            check_file(path, "cache.path")
            path.parent.mkdir(parents=True, exist_ok=True)
        except InputError as exc:
            raise InputError(exc.message, where=str(path), hint=elsewhere) from None
        except OSError as exc:
            raise InputError(f"cannot create the directory for cache.path: {exc.strerror}", where=str(path),
                             hint=elsewhere) from None
        try:
            db = sqlite3.connect(path, timeout=30.0, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            for number, statement in enumerate(_MIGRATIONS[version:], start=version + 1):
                db.execute("BEGIN IMMEDIATE")
                current = db.execute("PRAGMA user_version").fetchone()[0]
                if current < number:  # another process may have migrated meanwhile
                    db.execute(statement)
                    db.execute(f"PRAGMA user_version={number}")
                db.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if "unable to open" in str(exc) or "readonly" in str(exc):  # a path problem, not a bad file
                raise InputError(f"cannot open the response cache for writing: {exc}", where=str(path),
                                 hint=elsewhere) from None
            raise InputError(
                f"cannot open the response cache: {exc}", where=str(path), hint="delete the file or set cache.mode: off"
            ) from None
        return db

    @property
    def readable(self) -> bool:
        return self.mode in ("read-write", "replay-only")

    @property
    def writable(self) -> bool:
        return self.mode in ("read-write", "refresh")

    def get(self, key: str) -> Completion | None:
        if self._db is None or not self.readable:
            return None
        row = self._db.execute(
            "SELECT text, finish_reason, input_tokens, output_tokens, latency_s, tool_calls FROM responses WHERE key = ?",
            (key,),
        ).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        calls = tuple(ToolCall.from_dict(c) for c in json.loads(row[5])) if row[5] else ()
        # Redacted on the way in, and again on the way out: the file may come from an older version.
        return redacted(Completion(text=row[0], finish_reason=row[1], usage=Usage(row[2], row[3]),
                                   latency_s=row[4], cached=True, tool_calls=calls))

    def put(self, key: str, provider: str, model: str, completion: Completion) -> None:
        if self._db is None or not self.writable:
            return
        completion = redacted(completion)
        calls = json.dumps([c.to_dict() for c in completion.tool_calls]) if completion.tool_calls else None
        self._write(
            "INSERT OR REPLACE INTO responses (key, provider, model, text, finish_reason, input_tokens, "
            "output_tokens, latency_s, created_at, tool_calls) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                key,
                provider,
                model,
                completion.text,
                completion.finish_reason,
                completion.usage.input_tokens,
                completion.usage.output_tokens,
                completion.latency_s,
                time.time(),
                calls,
            ),
        )

    def get_rollout(self, key: str) -> tuple[dict[str, Any], dict[str, bytes]] | None:
        """A cached rollout: its result (as ``TaskResult.to_dict``) and the files it kept."""
        if self._db is None or not self.readable:
            return None
        row = self._db.execute("SELECT result, files FROM rollouts WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return redact_obj(json.loads(row[0])), {k: _redact_file(base64.b64decode(v))
                                                for k, v in json.loads(row[1]).items()}

    def put_rollout(self, key: str, result: dict[str, Any], files: Mapping[str, bytes]) -> None:
        if self._db is None or not self.writable:
            return
        packed = json.dumps({k: base64.b64encode(_redact_file(v)).decode("ascii") for k, v in files.items()})
        # An agent's steps may show its own environment: the cache is a sink like the run directory.
        self._write("INSERT OR REPLACE INTO rollouts (key, result, files, created_at) VALUES (?, ?, ?, ?)",
                    (key, json.dumps(redact_obj(result), ensure_ascii=False), packed, time.time()))

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        """One insert; a full disk (SQLite's SQLITE_FULL) is a runtime failure naming the cache,
        as a full run directory is, never a traceback: the results already written are kept."""
        assert self._db is not None
        try:
            self._db.execute(sql, params)
        except sqlite3.OperationalError as exc:
            if "full" not in str(exc).lower():
                raise
            raise RuntimeFailure(f"no space left on device: {self.path}",
                                 hint="free some space (or set cache.mode: off), then run the same command again; "
                                      "the results written so far are kept") from None

    def count(self) -> int:
        if self._db is None:
            return 0
        return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def _redact_file(data: bytes) -> bytes:
    """A kept file's bytes as stored: a text file redacted (base64 would hide a key from every later
    reader's redaction but not from a decoder), anything else as it is."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    masked = redact(text)
    return data if masked == text else masked.encode("utf-8")
