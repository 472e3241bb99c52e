"""A toy benchmark for the infrastructure tests: a JSON list of {qid, q, a} rows, one text file
per row referenced where it lies (an asset)."""

from __future__ import annotations

import json
from pathlib import Path

from skillopt_ci.benchmarks.draft import SuiteDraft, asset
from skillopt_ci.benchmarks.manifest import Manifest, pick
from skillopt_ci.core.errors import InputError

NAME = "toy"
TITLE = "Toy"
EXTRAS: tuple[str, ...] = ()
DATA_HELP = "--from a folder with rows.json and docs/"


def read(source: Path, manifest: Manifest) -> SuiteDraft:
    rows_file = source / "rows.json"
    if not rows_file.is_file():
        raise InputError("no rows.json", where=str(source), hint=DATA_HELP)
    rows = json.loads(rows_file.read_text())
    picked = pick(manifest, ((r["qid"], r, f"{rows_file} row {i}") for i, r in enumerate(rows)), str(rows_file))
    draft = SuiteDraft(name=NAME, suite={"prompt": "{{ input }}", "scorer": {"type": "exact"}}, tasks={},
                       asset_roots={"docs": str((source / "docs").resolve())})
    for split, items in picked.items():
        tasks = []
        for r in items:
            ref = f"@docs/{r['qid']}.txt"
            draft.assets[ref] = asset(source / "docs" / f"{r['qid']}.txt")
            tasks.append({"id": r["qid"], "input": r["q"], "expected": r["a"], "files": [ref]})
        draft.tasks[split] = tasks
    draft.notes.append(f"{sum(map(len, picked.values()))} of {len(rows)} rows used")
    return draft


def write_data(folder: Path, ids: list[str], extra: list[dict] | None = None) -> Path:
    (folder / "docs").mkdir(parents=True, exist_ok=True)
    rows = [{"qid": i, "q": f"question {i}", "a": f"answer {i}"} for i in ids] + (extra or [])
    (folder / "rows.json").write_text(json.dumps(rows))
    for i in ids:
        (folder / "docs" / f"{i}.txt").write_text(f"document of {i}\n")
    return folder


def write_manifest(folder: Path, splits: dict[str, list[str]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "split_manifest.json").write_text(json.dumps({"benchmark": "Toy"}))
    for split, ids in splits.items():
        (folder / split).mkdir(exist_ok=True)
        (folder / split / "items.json").write_text(json.dumps([{"id": i} for i in ids]))
    return folder
