"""SpreadsheetBench: ``dataset.json`` and ``spreadsheet/<id>/`` test cases -> a ``codegen`` suite.

``--from`` is the data as distributed: the folder holding ``dataset.json`` (the Verified 400
archive extracted, or the original release), a folder whose one subfolder holds it, or the
``.tar.gz`` itself. ``dataset.json`` is a JSON array of tasks: ``id``, ``instruction``,
``instruction_type``, ``answer_position``, optional ``spreadsheet_path`` (default
``spreadsheet/<id>``), ``answer_sheet`` and ``data_position``. A task folder's test cases are
found by name, numbered cases first: ``N_<id>_input.xlsx`` + ``N_<id>_answer.xlsx`` (original),
``N_<id>_init.xlsx`` + ``N_<id>_golden.xlsx`` (Verified 400), else ``initial.xlsx`` +
``golden.xlsx`` (one case). A task without a case is an error naming its folder.

Workbooks from a folder are referenced where they lie (``@spreadsheetbench/<path>``, hashed in
``assets.json``); workbooks in an archive are extracted into the suite folder (they are small).
Each task: ``input`` is the whole user prompt (instruction, instruction type, answer position and
a preview of the first rows of every sheet of the first case's input, built here once so the
message is a pure function of the task); ``files`` puts case i's input at
``cases/i/input.xlsx``; ``cases`` names inputs and outputs; ``expected`` holds the answer position
(and sheet) and the golden workbooks with their sha256.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from skillopt_ci.benchmarks.draft import SuiteDraft, asset
from skillopt_ci.benchmarks.extras import require
from skillopt_ci.benchmarks.manifest import Manifest, pick
from skillopt_ci.benchmarks.packs.spreadsheetbench import PACK
from skillopt_ci.core.errors import InputError

ROOT = "spreadsheetbench"
PREVIEW_ROWS = 10
PREVIEW_COLUMNS = 20
PREVIEW_CELL_CHARS = 40
NUMBERED = (("_input.xlsx", "_answer.xlsx"), ("_init.xlsx", "_golden.xlsx"))
SUITE = {
    "description": "SpreadsheetBench: the model writes Python that turns the input workbook into the answer "
                   "workbook; every test case is scored cell by cell as the official evaluator does.",
    "prompt": "{{ input }}",
    "environment": {"type": "codegen", "max_turns": 30, "timeout_s": 600},
    "scorer": {"type": "spreadsheet", "variant": "official"},
}


@dataclass
class Data:
    """The dataset as found: a folder (``root``) or a tar archive (``members`` under ``prefix``)."""

    shown: str
    root: Path | None = None
    tar: tarfile.TarFile | None = None
    members: dict[str, tarfile.TarInfo] = field(default_factory=dict)

    def names_in(self, folder: str) -> list[str]:
        if self.root is not None:
            path = self.root / folder
            return sorted(p.name for p in path.iterdir() if p.is_file()) if path.is_dir() else []
        prefix = folder.rstrip("/") + "/"
        return sorted(n[len(prefix):] for n in self.members if n.startswith(prefix) and "/" not in n[len(prefix):])

    def read(self, relative: str) -> bytes:
        if self.root is not None:
            return (self.root / relative).read_bytes()
        assert self.tar is not None
        handle = self.tar.extractfile(self.members[relative])
        if handle is None:
            raise InputError(f"{relative} is not a regular file in the archive", where=self.shown)
        return handle.read()

    def where(self, relative: str) -> str:
        return str(self.root / relative) if self.root is not None else f"{self.shown}:{relative}"


def open_data(source: Path) -> Data:
    """Find ``dataset.json`` in ``source`` (see the module doc); ``InputError`` when there is none."""
    if source.is_file() and source.name == "dataset.json":
        return Data(str(source.parent), root=source.parent)
    if source.is_dir():
        if (source / "dataset.json").is_file():
            return Data(str(source), root=source)
        inner = sorted(p.parent for p in source.glob("*/dataset.json"))
        if len(inner) == 1:
            return Data(str(inner[0]), root=inner[0])
        raise InputError("no dataset.json in this folder" + (" (several subfolders have one)" if inner else ""),
                         where=str(source), hint=PACK.data_help)
    if source.is_file() and tarfile.is_tarfile(source):
        return _open_tar(source)
    raise InputError("not a SpreadsheetBench folder, dataset.json or .tar.gz", where=str(source), hint=PACK.data_help)


def _open_tar(source: Path) -> Data:
    try:
        tar = tarfile.open(source)  # noqa: SIM115 - kept open while the tasks are read; read() closes it
        infos = [m for m in tar.getmembers() if m.isfile()]
    except (OSError, tarfile.TarError) as exc:
        raise InputError(f"cannot read the archive: {exc}", where=str(source)) from None
    named = {_member_name(m.name): m for m in infos}
    found = sorted((n for n in named if PurePosixPath(n).name == "dataset.json"), key=lambda n: (n.count("/"), n))
    if not found:
        tar.close()
        raise InputError("the archive holds no dataset.json", where=str(source), hint=PACK.data_help)
    prefix = str(PurePosixPath(found[0]).parent)
    prefix = "" if prefix == "." else prefix + "/"
    members = {n[len(prefix):]: m for n, m in named.items() if n.startswith(prefix)}
    return Data(str(source), tar=tar, members=members)


def _member_name(name: str) -> str:
    """An archive member's path without a leading ``./`` (``tar czf x.tar.gz .`` writes one)."""
    while name.startswith("./"):
        name = name[2:]
    return name


def read(source: Path, manifest: Manifest) -> SuiteDraft:
    data = open_data(source)
    try:
        return _read(data, manifest)
    finally:
        if data.tar is not None:
            data.tar.close()


def _read(data: Data, manifest: Manifest) -> SuiteDraft:
    openpyxl = require("openpyxl", PACK.name)
    shown = data.where("dataset.json")
    records = _records(data, shown)
    picked = pick(manifest, ((str(r["id"]), r, f"{shown}[{i}]") for i, r in enumerate(records)), shown)
    draft = SuiteDraft(name=PACK.name, suite=json.loads(json.dumps(SUITE)), tasks={})
    if data.root is not None:
        draft.asset_roots[ROOT] = str(data.root.resolve())
    cases = 0
    previews: dict[str, str] = {}  # by the sha256 of the workbook: copies are read once
    for split, rows in picked.items():
        draft.tasks[split] = [_task(data, row, draft, openpyxl, previews) for row in rows]
        cases += sum(len(t["cases"]) for t in draft.tasks[split])
    used = sum(len(rows) for rows in picked.values())
    draft.notes.append(f"{used} of {len(records)} tasks used, {cases} test cases")
    if data.root is None:
        size = sum(len(b) for b in draft.files.values())
        draft.notes.append(f"{len(draft.files)} workbooks extracted from the archive into the suite ({size / 1e6:.1f} MB)")
    return draft


def _records(data: Data, shown: str) -> list[dict[str, Any]]:
    try:
        records = json.loads(data.read("dataset.json").decode("utf-8"))
    except (OSError, KeyError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read dataset.json: {exc}", where=shown) from None
    if not isinstance(records, list):
        raise InputError("must be a JSON array of tasks", where=shown)
    for index, record in enumerate(records):
        at = f"{shown}[{index}]"
        if not isinstance(record, dict) or not isinstance(record.get("id"), (str, int)) or record.get("id") == "":
            raise InputError("a task needs an id", where=at)
        for key in ("instruction", "answer_position"):
            if not isinstance(record.get(key), str) or not record[key].strip():
                raise InputError(f"task {record['id']!r} has no {key}", where=at)
        for key in ("instruction_type", "spreadsheet_path", "answer_sheet"):
            if record.get(key) is not None and not isinstance(record[key], str):
                raise InputError(f"task {record['id']!r}: {key} must be a string", where=at)
    return records


def find_cases(names: list[str]) -> list[tuple[str, str]]:
    """(input, golden) file names of a task folder, by the three naming schemes (module doc)."""
    present = set(names)
    cases: list[tuple[int, str, str]] = []
    for input_end, golden_end in NUMBERED:
        for name in names:
            number = re.match(r"^(\d+)_", name)
            if number and name.endswith(input_end):
                golden = name[: -len(input_end)] + golden_end
                if golden in present:
                    cases.append((int(number.group(1)), name, golden))
        if cases:
            break
    if not cases and {"initial.xlsx", "golden.xlsx"} <= present:
        cases.append((1, "initial.xlsx", "golden.xlsx"))
    return [(i, g) for _, i, g in sorted(cases)]


def _task(data: Data, record: dict[str, Any], draft: SuiteDraft, openpyxl: Any,
          previews: dict[str, str]) -> dict[str, Any]:
    task_id = str(record["id"])
    folder = (record.get("spreadsheet_path") or f"spreadsheet/{task_id}").strip("/")
    if PurePosixPath(folder).is_absolute() or ".." in PurePosixPath(folder).parts:
        raise InputError(f"task {task_id!r}: spreadsheet_path {folder!r} must stay inside the dataset",
                         where=data.where("dataset.json"))
    pairs = find_cases(data.names_in(folder))
    if not pairs:
        raise InputError(f"task {task_id!r} has no test case: expected N_{task_id}_input.xlsx + "
                         f"N_{task_id}_answer.xlsx, N_{task_id}_init.xlsx + N_{task_id}_golden.xlsx, "
                         "or initial.xlsx + golden.xlsx", where=data.where(folder))
    files, cases, goldens, first_sha = {}, [], [], ""
    for number, (input_name, golden_name) in enumerate(pairs, 1):
        files[f"cases/{number}/input.xlsx"], input_sha = _reference(data, f"{folder}/{input_name}", draft)
        first_sha = first_sha or input_sha
        golden_ref, golden_sha = _reference(data, f"{folder}/{golden_name}", draft)
        goldens.append({"path": golden_ref, "sha256": golden_sha})
        cases.append({"input": f"cases/{number}/input.xlsx", "output": f"cases/{number}/output.xlsx"})
    first = f"{folder}/{pairs[0][0]}"
    expected: dict[str, Any] = {"answer_position": record["answer_position"], "golden": goldens}
    metadata: dict[str, Any] = {"instruction_type": record.get("instruction_type") or "",
                                "spreadsheet_path": folder, "cases": len(cases)}
    for key in ("answer_sheet", "data_position"):
        if record.get(key):
            (expected if key == "answer_sheet" else metadata)[key] = record[key]
    if first_sha not in previews:
        previews[first_sha] = preview(data.read(first), data.where(first), openpyxl)
    prompt = user_prompt(record, previews[first_sha])
    return {"id": task_id, "input": prompt, "expected": expected, "cases": cases, "files": files,
            "metadata": metadata}


def _reference(data: Data, relative: str, draft: SuiteDraft) -> tuple[str, str]:
    """How the suite names a workbook (an asset where it lies, or a file extracted into the suite)
    and its sha256."""
    if data.root is not None:
        ref = f"@{ROOT}/{relative}"
        if ref not in draft.assets:
            draft.assets[ref] = asset(data.root / relative)
        return ref, draft.assets[ref].sha256
    content = data.read(relative)
    draft.files[relative] = content
    return relative, hashlib.sha256(content).hexdigest()


def user_prompt(record: dict[str, Any], shown_preview: str) -> str:
    position = record["answer_position"]
    sheet = record.get("answer_sheet")
    if sheet and "!" not in position:
        position = f"{sheet}!{position}"
    parts = [f"# Instruction\n{record['instruction'].strip()}"]
    if record.get("instruction_type"):
        parts.append(f"# Instruction type\n{record['instruction_type']}")
    parts.append(f"# Answer position\n{position}")
    parts.append(f"# Spreadsheet preview (the input workbook: the first {PREVIEW_ROWS} rows of each sheet)\n"
                 f"{shown_preview}")
    return "\n\n".join(parts)


def preview(content: bytes, where: str, openpyxl: Any) -> str:
    """The first rows of every sheet of a workbook, as text (values as stored: formulas as text)."""
    try:
        book = openpyxl.load_workbook(io.BytesIO(content), read_only=True)
    except Exception as exc:  # a corrupt upstream file: name it
        raise InputError(f"cannot open the workbook: {type(exc).__name__}: {exc}", where=where) from None
    try:
        return "\n\n".join(_sheet_preview(sheet, openpyxl) for sheet in book.worksheets)
    finally:
        book.close()


def _sheet_preview(sheet: Any, openpyxl: Any) -> str:
    rows = list(sheet.iter_rows(max_row=PREVIEW_ROWS, max_col=PREVIEW_COLUMNS, values_only=True))
    size = f"{sheet.max_row} rows x {sheet.max_column} columns" if sheet.max_row else "size unknown"
    lines = [f"## Sheet {sheet.title!r} ({size})"]
    # read-only rows are padded to max_col: show up to the last column with a value
    width = max((max((i + 1 for i, v in enumerate(r) if v is not None), default=0) for r in rows), default=0)
    if not width:
        return lines[0] + "\n(empty)"
    letters = openpyxl.utils.get_column_letter
    lines.append("row | " + " | ".join(letters(i + 1) for i in range(width)))
    for number, row in enumerate(rows, 1):
        lines.append(f"{number} | " + " | ".join(_cell(v) for v in row[:width]))
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    text = value.isoformat() if hasattr(value, "isoformat") else str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= PREVIEW_CELL_CHARS else text[: PREVIEW_CELL_CHARS - 1] + "…"
