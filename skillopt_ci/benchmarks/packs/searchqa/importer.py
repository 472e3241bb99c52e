"""SearchQA (the MRQA-format Hugging Face dataset ``lucadiliello/searchqa``) as a chat suite.

``--from`` is the dataset download: a folder of parquet files (``data/train-*.parquet``,
``data/validation-*.parquet``), or JSON / JSON Lines rows, or one such file. Each row has ``key``
(the manifest id), ``question``, ``context`` (documents marked ``[DOC] [TLE] title [PAR] text``)
and ``answers`` (a list of golds). A task is one chat call: the context, cut to
:data:`CONTEXT_CHARS` characters at a ``[DOC]`` boundary (or, when not even the first document
fits, its first characters plus :data:`CUT_MARK`), then the question; the answer goes in
``<answer>…</answer>``. Scorer ``searchqa``: SQuAD exact match (hard), token F1 (soft).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skillopt_ci.benchmarks.draft import SuiteDraft, chat_suite
from skillopt_ci.benchmarks.hf_rows import RowScan, data_files
from skillopt_ci.benchmarks.manifest import Manifest, pick
from skillopt_ci.benchmarks.packs.searchqa import PACK
from skillopt_ci.core.errors import InputError

CONTEXT_CHARS = 6000
DOC = "[DOC]"
CUT_MARK = "\n[... context truncated ...]"
COLUMNS = ("key", "question", "context", "answers")
SUFFIXES = (".parquet", ".jsonl", ".json")
PROMPT = """## Context
{{ context }}

## Question
{{ input }}

Give your final answer inside <answer></answer>.
"""


def truncate_context(context: str, limit: int = CONTEXT_CHARS) -> str:
    """The longest run of whole documents from the start of ``context`` that fits in ``limit``
    characters (documents begin at ``[DOC]``); when the first document alone is longer, its first
    ``limit`` characters followed by :data:`CUT_MARK`."""
    if len(context) <= limit:
        return context
    starts = [i for i in _doc_starts(context) if i > 0] + [len(context)]
    cut = max((i for i in starts if i <= limit), default=0)
    if cut == 0:
        return context[:limit] + CUT_MARK
    return context[:cut].rstrip()


def _doc_starts(context: str) -> list[int]:
    starts, at = [], context.find(DOC)
    while at != -1:
        starts.append(at)
        at = context.find(DOC, at + 1)
    return starts


def task_record(row: dict[str, Any], where: str) -> dict[str, Any]:
    """One suite task from a SearchQA row; a row without golds or text is an InputError."""
    answers = row["answers"]
    if isinstance(answers, str):
        answers = [answers]
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) for a in answers):
        raise InputError(f"row {row['key']!r}: answers must be a non-empty list of strings, got {answers!r:.80}",
                         where=where)
    for column in ("question", "context"):
        if not isinstance(row[column], str):
            raise InputError(f"row {row['key']!r}: {column} must be text, got {type(row[column]).__name__}",
                             where=where)
    context = truncate_context(row["context"])
    return {
        "id": str(row["key"]),
        "input": row["question"].strip(),
        "context": context,
        "expected": answers,
        "metadata": {"context_chars": len(row["context"]), "truncated": context != row["context"]},
    }


def read(source: Path, manifest: Manifest) -> SuiteDraft:
    files = data_files(source, SUFFIXES)
    if not files:
        raise InputError("no .parquet, .jsonl or .json files here", where=str(source), hint=PACK.data_help)
    scan = RowScan(PACK.name, "key", COLUMNS, manifest.ids())
    rows = ((row_id, (row, where), where) for row_id, row, where in scan.rows(files))
    picked = pick(manifest, rows, str(source))
    tasks = {split: [task_record(row, where) for row, where in found] for split, found in picked.items()}
    cut = sum(t["metadata"]["truncated"] for split in tasks.values() for t in split)
    return SuiteDraft(
        name=PACK.name,
        suite=chat_suite("SearchQA: answer a Jeopardy! clue from search-engine snippets (one chat call).",
                         PROMPT, "searchqa"),
        tasks=tasks,
        notes=[f"{len(manifest.ids()):,} of {scan.total:,} rows used ({len(files)} file(s)); "
               f"{cut:,} context(s) cut to {CONTEXT_CHARS:,} characters at a document boundary"],
    )
