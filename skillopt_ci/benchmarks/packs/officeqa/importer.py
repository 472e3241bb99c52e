"""OfficeQA: questions over U.S. Treasury Bulletins, answered with glob/read/grep over the
question's own source documents.

``--from`` accepts the Hugging Face download of ``databricks/officeqa`` (gated) as it lands:

- a folder holding ``officeqa_full.csv`` and the parsed text corpus, found (first match) in
  ``$OFFICEQA_DOCS_DIR``, ``treasury_bulletins_parsed/transformed/``, ``transformed/``, ``docs/``
  or the folder itself (``treasury_bulletin_YYYY_MM.txt`` files);
- or the CSV file itself, the corpus then looked for in the same places beside it.

CSV columns: ``uid``, ``question``, ``answer`` (or ``ground_truth``), ``source_files``
(``treasury_bulletin_YYYY_MM.txt``, several separated by line breaks, ``\\r\\n`` included),
``source_docs`` (page URLs, the same way) and ``difficulty`` (or ``category``). Split membership
comes from the manifest (ids = ``uid``). Each task's source files are suite assets referenced
where they lie (``@docs/treasury_bulletin_….txt``, hashed) and copied into its workspace, where
the ``documents`` toolset reads them; the prompt lists them with the source hints. The reference
system's "Oracle Parsed Pages" (pages rendered from the parsed JSON corpus) are not included.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

from skillopt_ci.benchmarks.draft import SuiteDraft, asset
from skillopt_ci.benchmarks.manifest import Manifest, pick
from skillopt_ci.benchmarks.packs.officeqa import PACK
from skillopt_ci.core.errors import InputError

CSV_NAME = "officeqa_full.csv"
DOCS_VARIABLE = "OFFICEQA_DOCS_DIR"
DOCS_PLACES = ("treasury_bulletins_parsed/transformed", "transformed", "docs", ".")
MAX_ROUNDS = 24

PROMPT = """## Question
{{ input }}

## Candidate Files
{{ candidate_files }}

## Source Hints
{{ source_hints }}

Find the evidence in the candidate files with the glob, read and grep tools. When you have the answer, \
reply without a tool call and give the final answer inside <answer>...</answer>.
"""


def read(source: Path, manifest: Manifest) -> SuiteDraft:
    csv_file = _csv_file(source)
    docs, docs_shown = _docs_folder(csv_file.parent)
    rows = _rows(csv_file)
    picked = pick(manifest, ((r["uid"], r, r["where"]) for r in rows), str(csv_file))
    draft = SuiteDraft(name=PACK.name, suite=_suite(), tasks={}, asset_roots={"docs": docs_shown})
    for split, items in picked.items():
        draft.tasks[split] = [_task(row, docs, draft) for row in items]
    used = sum(len(items) for items in picked.values())
    draft.notes.append(f"{used} of {len(rows)} questions used; {len(draft.assets)} source documents "
                       f"referenced where they lie in {docs}")
    return draft


def _suite() -> dict[str, Any]:
    return {
        "description": "OfficeQA (databricks/officeqa, officeqa_full.csv): questions over U.S. Treasury "
                       "Bulletins, answered with glob/read/grep over each question's own source documents.",
        "prompt": PROMPT,
        "environment": {"type": "tools", "tools": ["documents"], "max_turns": MAX_ROUNDS, "answer_tag": "answer",
                        "time_limit_s": 1800},
        "scorer": {"type": "officeqa", "variant": "official", "tolerance": 0.0},
    }


def _csv_file(source: Path) -> Path:
    if source.is_file():
        return source
    found = source / CSV_NAME
    if not found.is_file():
        raise InputError(f"no {CSV_NAME} in this folder", where=str(source), hint=PACK.data_help)
    return found


def _docs_folder(beside: Path) -> tuple[Path, str]:
    """The corpus folder and how suite.yaml names it (the variable when it came from one)."""
    named = os.environ.get(DOCS_VARIABLE)
    if named:
        folder = Path(named).expanduser()
        if not folder.is_absolute():  # the suite reads it again when it runs, relative to its own folder
            raise InputError(f"{DOCS_VARIABLE} must be an absolute path, got {named!r}", where=DOCS_VARIABLE,
                             hint=f"export {DOCS_VARIABLE}=\"$(realpath {named})\": the suite names the variable "
                                  "and reads it again at every run, from wherever it runs")
        if not folder.is_dir():
            raise InputError(f"{DOCS_VARIABLE} names a folder that does not exist", where=named, hint=PACK.data_help)
        return folder.resolve(), f"${{{DOCS_VARIABLE}}}"
    for place in DOCS_PLACES:
        folder = beside / place
        if folder.is_dir() and any(folder.glob("treasury_bulletin_*.txt")):
            return folder.resolve(), str(folder.resolve())
    raise InputError("no parsed corpus (treasury_bulletin_YYYY_MM.txt files) found", where=str(beside),
                     hint=f"put it in {DOCS_PLACES[0]}/ beside {CSV_NAME}, or set {DOCS_VARIABLE}")


def _column(header: list[str], names: tuple[str, ...], csv_file: Path) -> str:
    for name in names:
        if name in header:
            return name
    raise InputError(f"no column {' or '.join(names)} (columns: {', '.join(header)})", where=str(csv_file),
                     hint=f"expected the columns of {CSV_NAME}: uid, question, answer, source_docs, "
                          "source_files, difficulty")


def _lines(cell: str | None) -> list[str]:
    return [part.strip() for part in (cell or "").splitlines() if part.strip()]


def _rows(csv_file: Path) -> list[dict[str, Any]]:
    """The CSV's rows as {uid, question, answer, files, docs, difficulty, where}."""
    try:
        with csv_file.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            header = list(reader.fieldnames or [])
            names = {key: _column(header, options, csv_file) for key, options in (
                ("uid", ("uid",)), ("question", ("question",)), ("answer", ("answer", "ground_truth")),
                ("files", ("source_files",)))}
            docs = next((n for n in ("source_docs",) if n in header), None)
            level = next((n for n in ("difficulty", "category") if n in header), None)
            rows = []
            for record in reader:
                where = f"{csv_file} line {reader.line_num}"
                rows.append({"uid": (record[names["uid"]] or "").strip(), "question": record[names["question"]] or "",
                             "answer": (record[names["answer"]] or "").strip(), "files": _lines(record[names["files"]]),
                             "docs": _lines(record.get(docs) if docs else None),
                             "difficulty": (record.get(level) or "").strip() if level else "", "where": where})
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"cannot read the CSV: {exc}", where=str(csv_file)) from None
    return rows


def _task(row: dict[str, Any], docs: Path, draft: SuiteDraft) -> dict[str, Any]:
    at = f"{row['where']} (uid {row['uid']})"
    if not row["question"].strip() or not row["answer"]:
        raise InputError("the question or the answer is empty", where=at)
    if not row["files"]:
        raise InputError("source_files is empty: the question names no document", where=at)
    refs = []
    for name in row["files"]:
        if "/" in name or "\\" in name or name in (".", ".."):
            raise InputError(f"source file {name!r} is not a bare file name", where=at)
        path = docs / name
        if not path.is_file():
            raise InputError(f"source file {name} not found in the corpus folder {docs}", where=at,
                             hint="download the whole parsed corpus (treasury_bulletins_parsed/transformed)")
        ref = f"@docs/{name}"
        if ref not in draft.assets:
            draft.assets[ref] = asset(path)
        refs.append(ref)
    return {
        "id": row["uid"],
        "input": row["question"].strip(),
        "expected": row["answer"],
        "candidate_files": "\n".join(f"- {name}" for name in row["files"]),
        "source_hints": "\n".join(f"- {hint}" for hint in row["docs"]) or "- none",
        "files": refs,
        "metadata": {"difficulty": row["difficulty"], "source_files": row["files"], "source_docs": row["docs"]},
    }
