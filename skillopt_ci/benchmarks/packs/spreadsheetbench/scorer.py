"""The ``spreadsheet`` scorer: SpreadsheetBench's cell-by-cell comparison of the workbooks a
``codegen`` rollout wrote with the golden workbooks.

The task names its test cases and goldens:

- ``cases``: ``[{"input": "cases/1/input.xlsx", "output": "cases/1/output.xlsx"}, ...]``:
  workspace paths (the ``codegen`` environment runs the final code on every case);
- ``expected``: ``{"answer_position": "E4:E12", "answer_sheet": "Output" (optional),
  "golden": [{"path": "<suite-relative path or @root/path>", "sha256": "<hex>" (optional)}, ...]}``,
  one golden per case, in the same order.

Each output workbook and its golden are opened with openpyxl ``data_only=True`` (so a formula the
model wrote reads as its cached value: ``None`` unless a spreadsheet application saved the file)
and compared as ``spreadsheet_compare`` describes, in the ``variant`` chosen (``official``, the
default, or ``reference``). A missing output file fails its case. ``hard`` = every case passes,
``soft`` = the fraction that pass; ``Score.value`` is ``hard`` unless ``report: soft``;
``passed`` is always ``hard``. The feedback names both numbers and the first difference, never a
golden value.

A rollout without a workspace cannot be scored (``ScoringError``); a golden file that is missing
or whose sha256 differs from the one recorded at import is an ``InputError`` (re-import).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillopt_ci.benchmarks.packs.spreadsheetbench.compare import (
    VARIANTS,
    CaseResult,
    compare_workbooks,
)
from skillopt_ci.core.errors import InputError, ScoringError
from skillopt_ci.core.task import Task
from skillopt_ci.core.trajectory import Rollout
from skillopt_ci.inputs.assets import suite_file
from skillopt_ci.models.base import ModelCaller
from skillopt_ci.sandbox import SandboxError
from skillopt_ci.sandbox.paths import confine
from skillopt_ci.scorers.base import Score, Scorer

REPORTS = ("hard", "soft")


@dataclass(frozen=True)
class SpreadsheetOptions:
    variant: str = "official"  # official | reference (the reference system's port, see the docs)
    report: str = "hard"  # hard | soft: which number is Score.value (passed is always hard)


def load_openpyxl() -> Any:
    try:
        import openpyxl
    except ImportError:
        raise InputError('the spreadsheet scorer needs openpyxl: pip install "skillopt-ci[benchmarks]"') from None
    return openpyxl


@dataclass(frozen=True)
class Golden:
    path: Path
    shown: str
    sha256: str | None


class SpreadsheetScorer(Scorer):
    name = "spreadsheet"
    Options = SpreadsheetOptions

    def setup(self) -> None:
        if self.options.variant not in VARIANTS:
            raise self.error(f"variant must be one of {', '.join(VARIANTS)}, got {self.options.variant!r}")
        if self.options.report not in REPORTS:
            raise self.error(f"report must be one of {', '.join(REPORTS)}, got {self.options.report!r}")
        self._checked: dict[Path, tuple[int, int]] = {}

    def score(self, output: str, task: Task) -> Score:
        raise self._no_workspace(task)

    def _no_workspace(self, task: Task) -> ScoringError:
        return ScoringError(f'scorer "spreadsheet" needs the workspace of a codegen rollout; task "{task.id}" '
                            "was run without one (use environment: codegen)")

    async def ascore_rollout(self, rollout: Rollout, task: Task, models: ModelCaller | None = None) -> Score:
        if rollout.workspace is None:
            raise self._no_workspace(task)
        return await asyncio.to_thread(self.score_workspace, Path(rollout.workspace), task)

    def score_workspace(self, workspace: Path, task: Task) -> Score:
        """Compare every case's output under ``workspace`` with its golden (blocking I/O)."""
        openpyxl = load_openpyxl()
        workspace = Path(os.path.realpath(workspace))
        outputs, goldens, position, sheet = self._read_task(task)
        results = []
        for output, golden in zip(outputs, goldens, strict=True):
            self._check_golden(golden, task)
            results.append(self._case(openpyxl, workspace, output, golden.path, position, sheet))
        passes = sum(r.ok for r in results)
        hard = passes == len(results)
        soft = passes / len(results)
        value = soft if self.options.report == "soft" else float(hard)
        return Score(value, hard, _feedback(results, hard, soft))

    def _case(self, openpyxl: Any, workspace: Path, output: str, golden: Path, position: str,
              sheet: str | None) -> CaseResult:
        try:
            target = confine(workspace, output)
        except SandboxError:
            return CaseResult(False, f"the output {output} is not a file of the workspace")
        if not target.is_file():
            return CaseResult(False, f"no output file {output}")
        books = []
        try:
            for path in (golden, target):
                books.append(openpyxl.load_workbook(filename=str(path), data_only=True))
        except Exception as exc:  # a file that is not a workbook fails its case, as upstream
            which = "golden" if not books else "output"
            return CaseResult(False, f"cannot open the {which} workbook: {type(exc).__name__}: {exc}")
        try:
            return compare_workbooks(books[0], books[1], position, sheet, self.options.variant)
        finally:
            for book in books:
                book.close()

    def _read_task(self, task: Task) -> tuple[list[str], list[Golden], str, str | None]:
        where = task.source or None
        expected = task.expected
        if not isinstance(expected, dict) or not isinstance(expected.get("answer_position"), str):
            raise self.error(f'task "{task.id}" needs "expected" with "answer_position" and "golden"', where=where)
        cases = task.fields.get("cases")
        if not isinstance(cases, list) or not cases or not all(
                isinstance(c, dict) and isinstance(c.get("output"), str) for c in cases):
            raise self.error(f'task "{task.id}" needs "cases": a list of {{"input", "output"}} workspace paths',
                             where=where)
        raw = expected.get("golden")
        if not isinstance(raw, list) or len(raw) != len(cases):
            raise self.error(f'task "{task.id}": expected.golden must list one golden workbook per case '
                             f"({len(cases)})", where=where)
        goldens = [self._golden(entry, task) for entry in raw]
        sheet = expected.get("answer_sheet")
        return [c["output"] for c in cases], goldens, expected["answer_position"], sheet if isinstance(sheet, str) else None

    def _golden(self, entry: Any, task: Task) -> Golden:
        if isinstance(entry, str):
            entry = {"path": entry}
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise self.error(f'task "{task.id}": a golden must be a path or {{"path", "sha256"}}',
                             where=task.source or None)
        # suite_file: a plain path is relative to the suite; an asset @root/path is found where it
        # lies, its sha256 checked against assets.json.
        path = suite_file(self.suite_dir, entry["path"], task.source or None)
        return Golden(path, entry["path"], entry.get("sha256") if isinstance(entry.get("sha256"), str) else None)

    def _check_golden(self, golden: Golden, task: Task) -> None:
        """The golden exists and has the bytes recorded at import (checked once per file state)."""
        try:
            info = golden.path.stat()
        except OSError:
            raise self.error(f'task "{task.id}": golden workbook {golden.shown} not found in the suite directory',
                             where=task.source or None, hint="re-import the benchmark") from None
        state = (info.st_size, info.st_mtime_ns)
        if golden.sha256 is None or self._checked.get(golden.path) == state:
            return
        digest = hashlib.sha256(golden.path.read_bytes()).hexdigest()
        if digest != golden.sha256:
            raise self.error(f'task "{task.id}": golden workbook {golden.shown} changed since the import '
                             "(sha256 differs)", where=task.source or None, hint="re-import the benchmark")
        self._checked[golden.path] = state


def _feedback(results: list[CaseResult], hard: bool, soft: float) -> str:
    passes = sum(r.ok for r in results)
    head = f"test cases passed: {passes} of {len(results)} (hard {int(hard)}, soft {soft:.2f})"
    failed = next(((i, r) for i, r in enumerate(results, 1) if not r.ok), None)
    if failed is None:
        return head
    return f"{head}; case {failed[0]}: {failed[1].reason}"
