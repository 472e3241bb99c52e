"""SpreadsheetBench's cell comparison, in two variants. Pure functions over openpyxl workbooks.

``official`` follows the benchmark's own evaluator (``evaluation/evaluation.py``):

- ``answer_position`` is split on ``,``; a piece with ``!`` is ``sheet!range`` (single quotes
  stripped from both); a piece without one names the golden workbook's first sheet. A piece
  with two ``!`` is unreadable and fails the case (the official script raises there).
- A range ``A1:C3`` is expanded column by column from the letters and digits of its two cells;
  a single cell is used as it is.
- The prediction must have the sheet ("worksheet not found" fails the case); every cell's value is
  transformed, then compared: numbers (``bool`` included) and numeric strings become
  ``round(float, 2)``; ``datetime`` becomes its Excel serial day rounded to 0 decimals; ``time``
  becomes its ``str`` without the last 3 characters; ``""`` and ``None`` are equal; otherwise the
  types must match and the values be equal. Fonts and fills are not compared.
- Anything that raises while comparing (a cell name openpyxl cannot read) fails the case, as the
  official script's bare ``except`` does.

``reference`` reproduces the reference system's port: pieces are stripped of whitespace and of
``'`` and ``"``, split at the first ``!`` only, and a task's ``answer_sheet`` is put in front of
the whole position even when the position already names a sheet. ``'Output'!A1:G10`` with
``answer_sheet: Output`` becomes ``Output!'Output'!A1:G10``: the sheet ``Output`` and the range
``Output'!A1:G10``, whose start cell reads as a column past ``G``, so the range holds **zero
cells** and any workbook that has the sheet passes (an unchanged input included). A position
without a sheet is read on ``answer_sheet`` instead of the golden's first sheet.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from skillopt_ci.core.text import clip

VARIANTS = ("official", "reference")
EXCEL_EPOCH = datetime.datetime(1899, 12, 30)
_CELL_NAME = re.compile(r"^\$?[A-Za-z]{1,3}\$?[0-9]+$")


class Unreadable(Exception):
    """The answer position (or a cell name in it) cannot be read: the case fails."""


@dataclass(frozen=True)
class CaseResult:
    ok: bool
    reason: str = ""  # why it failed, without the golden value (the optimizer reads it)


def transform(value: Any) -> Any:
    """A cell value as the official evaluator compares it."""
    if isinstance(value, (int, float)):  # bool is an int: True becomes 1.0, as upstream
        return round(float(value), 2)
    if isinstance(value, datetime.time):
        return str(value)[:-3]
    if isinstance(value, datetime.datetime):
        delta = value - EXCEL_EPOCH
        return round(delta.days + delta.seconds / 86400.0, 0)
    if isinstance(value, str):
        try:
            return round(float(value), 2)
        except ValueError:
            return value
    return value


def same_value(gold: Any, pred: Any) -> bool:
    gold, pred = transform(gold), transform(pred)
    if (gold is None or gold == "") and (pred is None or pred == ""):
        return True
    if type(gold) is not type(pred):
        return False
    return bool(gold == pred)


def column_number(letters: str) -> int:
    """``A`` = 1, ``Z`` = 26, ``AA`` = 27: the upstream arithmetic, applied to whatever it gets."""
    number = 0
    for char in letters:
        number = number * 26 + (ord(char) - ord("A") + 1)
    return number


def column_name(number: int) -> str:
    name = ""
    while number > 0:
        number, rest = divmod(number - 1, 26)
        name = chr(65 + rest) + name
    return name


def cell_names(cell_range: str, variant: str) -> list[str]:
    """The cells of ``A1:C3`` column by column (``official``: every non-digit character counts as
    a column letter; ``reference``: only letters do)."""
    if ":" not in cell_range:
        return [cell_range]
    ends = cell_range.split(":")
    if len(ends) != 2:
        raise Unreadable(f"cannot read the range {cell_range!r}")
    bounds = []
    for end in ends:
        digits = "".join(c for c in end if c.isdigit())
        letters = "".join(c for c in end if (c.isalpha() if variant == "reference" else not c.isdigit()))
        if not digits:
            raise Unreadable(f"cannot read the range {cell_range!r}")
        bounds.append((column_number(letters), int(digits)))
    (first_col, first_row), (last_col, last_row) = bounds
    columns = [column_name(i) for i in range(first_col, last_col + 1)]
    return [f"{col}{row}" for col in columns for row in range(first_row, last_row + 1)]


def ranges(position: str, answer_sheet: str | None, gold_first_sheet: str, variant: str) -> Iterator[tuple[str, str]]:
    """(sheet, range) for every piece of the answer position, as ``variant`` reads it."""
    if variant == "official":
        for piece in position.split(","):
            if "!" in piece:
                parts = piece.split("!")
                if len(parts) != 2:
                    raise Unreadable(f"cannot read the answer position piece {piece!r}")
                sheet, cell_range = parts[0].strip("'"), parts[1]
            else:
                sheet, cell_range = gold_first_sheet, piece
            yield sheet, cell_range.strip("'")
        return
    if position and answer_sheet:
        position = f"{answer_sheet}!{position}"
    for piece in position.split(","):
        piece = piece.strip()
        if not piece:
            continue
        if "!" in piece:
            sheet, cell_range = piece.split("!", 1)
            sheet = sheet.strip().strip("'\"")
        else:
            sheet, cell_range = gold_first_sheet, piece
        yield sheet, cell_range.strip().strip("'\"")


def compare_workbooks(gold: Any, pred: Any, position: str, answer_sheet: str | None = None,
                      variant: str = "official") -> CaseResult:
    """Whether the prediction workbook ``pred`` matches ``gold`` at ``position`` (both loaded with
    ``data_only=True``). Never raises for what the workbooks hold."""
    try:
        first = gold.sheetnames[0] if gold.sheetnames else ""
        for sheet, cell_range in ranges(position, answer_sheet, first, variant):
            if sheet not in pred.sheetnames:
                return CaseResult(False, f"worksheet {sheet!r} not found in the output")
            if sheet not in gold.sheetnames:
                return CaseResult(False, f"worksheet {sheet!r} is not in the golden workbook")
            for name in cell_names(cell_range, variant):
                if not _CELL_NAME.match(name):
                    raise Unreadable(f"cannot read the cell {name!r} of {cell_range!r}")
                got = pred[sheet][name].value
                if not same_value(gold[sheet][name].value, got):
                    return CaseResult(False, f"{sheet}!{name.upper()} differs (the output has {_shown(got)})")
    except Unreadable as exc:
        return CaseResult(False, str(exc))
    except Exception as exc:  # the official evaluator fails the case on any exception
        return CaseResult(False, f"cannot compare: {type(exc).__name__}: {exc}")
    return CaseResult(True)


def _shown(value: Any) -> str:
    return clip(repr(value), 40)  # redacted before the cut
