"""SpreadsheetBench fixture: synthetic tasks in the Verified 400 layout (``dataset.json`` and
``spreadsheet/<id>/N_<id>_init.xlsx`` + ``N_<id>_golden.xlsx``) and a simulated code writer.

Three kinds of task, by the task's place in its split (the instruction starts with its tag):

- ``[sum]``: write the total of ``Data!A1:A5`` into ``B1``; two test cases with other numbers.
  The policy's program is right: every case passes.
- ``[upper]``: write ``A1:A3`` in capitals into ``'Data'!B1:B3``. The policy's first program
  raises (``AttributeError``); given the error it replies with a fixed one, which passes.
- ``[double]``: write twice each of ``A1:A3`` into ``C1:C3``. The policy writes Excel formulas,
  which the evaluator reads as their cached values (None): the case fails.

So a split holding the three kinds scores strictly between 0 and 1. Workbooks are built once per
kind and case and copied to every task of that kind (the split-size test writes 400 tasks).
Any other task (the real sample) gets a program that saves the input unchanged.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from skillopt_ci.benchmarks.manifest import Manifest, load_manifest
from skillopt_ci.sim.protocols import ScriptedRequest

KINDS = ("sum", "upper", "double")
FOLDER = "spreadsheetbench_verified_400"
SUM_CASES = ((3, 5, 7, 11, 13), (1.5, 2.25, 3, 4, 5.125))
WORDS = ("alpha", "beta", "gamma")
NUMBERS = (2, 3.5, 10)

_HEAD = "import openpyxl\nwb = openpyxl.load_workbook(INPUT_PATH)\nws = wb['Data']\n"
PROGRAMS = {
    "sum": _HEAD + "ws['B1'] = sum(ws[f'A{i}'].value for i in range(1, 6))\nwb.save(OUTPUT_PATH)\n",
    "upper-broken": _HEAD + "for i in range(1, 4):\n    ws[f'B{i}'] = ws[f'A{i}'].value.uper()\nwb.save(OUTPUT_PATH)\n",
    "upper": _HEAD + "for i in range(1, 4):\n    ws[f'B{i}'] = ws[f'A{i}'].value.upper()\nwb.save(OUTPUT_PATH)\n",
    "double": _HEAD + "for i in range(1, 4):\n    ws[f'C{i}'] = f'=A{i}*2'\nwb.save(OUTPUT_PATH)\n",
    "copy": "import shutil\nshutil.copyfile(INPUT_PATH, OUTPUT_PATH)\n",
}
TASKS = {
    "sum": ("[sum] Write the total of the numbers in A1:A5 of the sheet Data into cell B1.", "B1"),
    "upper": ("[upper] Write the text of A1:A3 in capital letters into B1:B3 of the sheet Data.", "'Data'!B1:B3"),
    "double": ("[double] Write twice each number of A1:A3 into C1:C3 of the sheet Data.", "C1:C3"),
}


def _book(values: dict[str, object]) -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Data"
    for cell, value in values.items():
        sheet[cell] = value
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def workbooks() -> dict[str, list[tuple[bytes, bytes]]]:
    """Per kind, its test cases as (init, golden) workbook bytes."""
    cases: dict[str, list[tuple[bytes, bytes]]] = {"sum": [], "upper": [], "double": []}
    for numbers in SUM_CASES:
        start: dict[str, object] = {f"A{i}": v for i, v in enumerate(numbers, 1)}
        cases["sum"].append((_book(start), _book({**start, "B1": sum(numbers)})))
    start = {f"A{i}": w for i, w in enumerate(WORDS, 1)}
    cases["upper"].append((_book(start), _book({**start, **{f"B{i}": w.upper() for i, w in enumerate(WORDS, 1)}})))
    start = {f"A{i}": v for i, v in enumerate(NUMBERS, 1)}
    cases["double"].append((_book(start), _book({**start, **{f"C{i}": 2 * v for i, v in enumerate(NUMBERS, 1)}})))
    return cases


def _ids(manifest: Manifest | None) -> dict[str, list[str]]:
    manifest = manifest if manifest is not None else load_manifest("spreadsheetbench")
    return {split: [i.id for i in items] for split, items in manifest.splits.items()}


def write_fixture(dest: Path, manifest: Manifest | None = None) -> Path:
    """Write ``dest/spreadsheetbench_verified_400/`` (one task per id of ``manifest``, by default
    of the published one, so that the published manifest imports it; plus one task no manifest
    names) and return it. Identical workbooks are shared bytes: 400 tasks take about a second."""
    root = dest / FOLDER
    books = workbooks()
    records = []
    for ids in _ids(manifest).values():
        for place, task_id in enumerate(ids):
            kind = KINDS[place % len(KINDS)]
            records.append(_write_task(root, task_id, kind, books[kind]))
    records.append(_write_task(root, "unused-1", "sum", books["sum"]))
    (root / "dataset.json").write_text(json.dumps(records, indent=1), encoding="utf-8")
    return root


def _write_task(root: Path, task_id: str, kind: str, cases: list[tuple[bytes, bytes]]) -> dict:
    folder = root / "spreadsheet" / task_id
    folder.mkdir(parents=True, exist_ok=True)
    for number, (init, golden) in enumerate(cases, 1):
        (folder / f"{number}_{task_id}_init.xlsx").write_bytes(init)
        (folder / f"{number}_{task_id}_golden.xlsx").write_bytes(golden)
    instruction, position = TASKS[kind]
    return {"id": task_id, "instruction": instruction, "spreadsheet_path": f"spreadsheet/{task_id}",
            "instruction_type": "Cell-Level Manipulation", "answer_position": position}


def policy(request: ScriptedRequest) -> str:
    """The simulated code writer (see the module doc)."""
    first = next((m["content"] for m in request.messages if m["role"] == "user"), "")
    kind = next((k for k in KINDS if f"[{k}]" in first), "copy")
    if kind == "upper" and "Error" not in request.last_user:
        kind = "upper-broken"
    return f"Here is the program.\n\n```python\n{PROGRAMS[kind]}```\n"
