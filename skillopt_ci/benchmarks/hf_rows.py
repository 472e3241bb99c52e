"""Rows of a Hugging Face dataset download: parquet files (read in batches, only the rows a manifest
names kept whole), JSON arrays and JSON Lines (also under a ``.json`` name, as ``to_json`` writes).

:class:`RowScan` yields ``(id, row, where)`` triples for :func:`manifest.pick`, with ``where``
naming the file and the row (``data/validation-00000-of-00001.parquet row 17``), and counts every
row it saw so the importer can say how many it used. A missing column, a file that is not what
its name says, or a row without the id field is an :class:`InputError` naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillopt_ci.benchmarks.extras import require
from skillopt_ci.core.errors import InputError

BATCH_ROWS = 256


def data_files(source: Path, suffixes: Sequence[str]) -> list[Path]:
    """``source`` itself, or every file under the folder ``source`` ending in one of ``suffixes``
    (hidden folders skipped), sorted by path."""
    if source.is_file():
        return [source]
    found = [p for p in source.rglob("*") if p.is_file() and p.name.endswith(tuple(suffixes))
             and not any(part.startswith(".") for part in p.relative_to(source).parts)]
    return sorted(found)


@dataclass
class RowScan:
    """Reads rows from files of one benchmark; ``total`` counts the rows seen so far."""

    benchmark: str
    id_field: str
    columns: tuple[str, ...]
    wanted: set[str]
    total: int = 0
    files: list[str] = field(default_factory=list)

    def rows(self, paths: Sequence[Path]) -> Iterator[tuple[str, dict[str, Any], str]]:
        """Every wanted row of ``paths`` (other rows are counted, not materialised)."""
        for path in paths:
            self.files.append(str(path))
            if path.suffix == ".parquet":
                yield from self._parquet(path)
            else:
                yield from self._json(path)

    def _parquet(self, path: Path) -> Iterator[tuple[str, dict[str, Any], str]]:
        pq = require("pyarrow.parquet", self.benchmark)
        try:
            handle = pq.ParquetFile(path)
            names = set(handle.schema_arrow.names)
        except Exception as exc:  # pyarrow raises its own error types for a broken file
            raise InputError(f"not a readable parquet file: {exc}", where=str(path)) from None
        self._check_columns(names, path)
        offset = 0
        for batch in handle.iter_batches(batch_size=BATCH_ROWS, columns=list(self.columns)):
            ids = [str(v) for v in batch.column(self.id_field).to_pylist()]
            hits = [i for i, row_id in enumerate(ids) if row_id in self.wanted]
            if hits:
                for i, row in zip(hits, batch.take(hits).to_pylist(), strict=True):
                    yield ids[i], row, f"{path} row {offset + i}"
            offset += len(ids)
            self.total += len(ids)

    def _json(self, path: Path) -> Iterator[tuple[str, dict[str, Any], str]]:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read: {exc}", where=str(path)) from None
        for row, where in _json_records(text, path):
            if not isinstance(row, dict):
                raise InputError(f"a row must be a JSON object, got {type(row).__name__}", where=where)
            self._check_columns(set(row), where)
            self.total += 1
            row_id = str(row[self.id_field])
            if row_id in self.wanted:
                yield row_id, {c: row[c] for c in self.columns}, where

    def _check_columns(self, names: set[str], where: Path | str) -> None:
        missing = [c for c in self.columns if c not in names]
        if missing:
            raise InputError(f"no {', '.join(missing)} field (it has: {', '.join(sorted(names)) or 'none'})",
                             where=str(where), hint=f"pass the {self.benchmark} files as the dataset publishes them")


def _json_records(text: str, path: Path) -> Iterator[tuple[Any, str]]:
    """A JSON array's items, or a JSON Lines file's lines, each with its place."""
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            if exc.msg == "Extra data" and exc.lineno > 1:  # JSON Lines in a .json file (datasets' to_json)
                yield from _json_lines(text, path)
                return
            raise InputError(f"not valid JSON: {exc.msg}", where=f"{path}:{exc.lineno}") from None
        if isinstance(data, dict) and isinstance(data.get("data"), list):
            data = data["data"]
        if not isinstance(data, list):
            raise InputError("a .json data file must hold a list of rows", where=str(path))
        yield from ((row, f"{path} row {i}") for i, row in enumerate(data))
        return
    yield from _json_lines(text, path)


def _json_lines(text: str, path: Path) -> Iterator[tuple[Any, str]]:
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                yield json.loads(line), f"{path}:{lineno}"
            except json.JSONDecodeError as exc:
                raise InputError(f"not valid JSON: {exc.msg}", where=f"{path}:{lineno}") from None
