"""Writing an imported benchmark as an ordinary suite folder, all at once or not at all.

The folder holds ``suite.yaml`` (with ``benchmark:`` metadata: the benchmark, the sha256 of the
manifest it was split by, the data it came from; and ``assets:``, the roots of the files
referenced where they lie), one ``<split>.jsonl`` per split in manifest order, ``assets.json``
(every referenced file with its sha256 and size) and the small files the importer made. It is
built in a temporary folder beside the target and renamed into place, so an interrupted import
leaves nothing half-written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from skillopt_ci.benchmarks.draft import SuiteDraft
from skillopt_ci.benchmarks.manifest import Manifest, published_folder
from skillopt_ci.core.errors import InputError, RuntimeFailure

HEADER = ("# Imported by `skillopt-ci bench import {name}`: the split membership comes from the manifest\n"
          "# named below, never from a shuffle. Re-import rather than edit the split files.\n")


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (prompt templates) as literal blocks, readable in suite.yaml."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value and not any(line != line.rstrip() for line in value.split("\n")) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def manifest_digest(manifest: Manifest) -> str:
    """sha256 over the manifest's ids per split, in order (the same for a byte copy anywhere)."""
    payload = {split: [item.id for item in items] for split, items in manifest.splits.items()}
    return hashlib.sha256(json.dumps(payload, separators=(",", ":")).encode()).hexdigest()


def suite_document(draft: SuiteDraft, *, benchmark: str, manifest: Manifest, source: str) -> dict[str, Any]:
    published = manifest.source.startswith("published manifest")
    meta = {"name": benchmark, "manifest": manifest.source if not published else published_folder(benchmark).name,
            "manifest_sha256": manifest_digest(manifest), "source": source}
    doc: dict[str, Any] = {"name": draft.name, **draft.suite, "benchmark": meta}
    if draft.asset_roots:
        doc["assets"] = dict(draft.asset_roots)
    return doc


def write_suite(draft: SuiteDraft, out: Path, *, benchmark: str, manifest: Manifest, source: str = "",
                force: bool = False) -> None:
    """Write ``draft`` as the suite folder ``out`` (see the module doc)."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise InputError("the output folder exists and is not empty", where=str(out),
                         hint="choose another --out, or pass --force to replace it")
    _check_names(draft)
    out.parent.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    try:
        _fill(temp, draft, suite_document(draft, benchmark=benchmark, manifest=manifest, source=source))
        _swap(temp, out)
    except OSError as exc:
        raise RuntimeFailure(f"cannot write the suite: {exc}", where=str(out)) from None
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def _check_names(draft: SuiteDraft) -> None:
    reserved = {"suite.yaml", "assets.json", *(f"{s}.jsonl" for s in draft.tasks)}
    for name in draft.files:
        parts = Path(name).parts
        if not parts or Path(name).is_absolute() or ".." in parts or name in reserved:
            raise InputError(f"importer bug: cannot write {name!r} into the suite folder")


def _fill(folder: Path, draft: SuiteDraft, document: dict[str, Any]) -> None:
    text = HEADER.format(name=document["benchmark"]["name"])
    text += yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    (folder / "suite.yaml").write_text(text, encoding="utf-8")
    for split, tasks in draft.tasks.items():
        if not tasks:
            continue  # a split the manifest leaves empty has no file (an empty split file is an error)
        lines = [json.dumps(task, ensure_ascii=False, sort_keys=False) for task in tasks]
        (folder / f"{split}.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    if draft.assets:
        files = {ref: {"sha256": a.sha256, "size": a.size} for ref, a in sorted(draft.assets.items())}
        index = {"version": 1, "roots": dict(draft.asset_roots), "files": files}
        (folder / "assets.json").write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")
    for name, content in draft.files.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


def _swap(temp: Path, out: Path) -> None:
    """Put ``temp`` where ``out`` is; an existing ``out`` is moved aside first and removed after."""
    old = None
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        out.rename(old)
    try:
        temp.rename(out)
    except OSError:
        if old is not None:
            old.rename(out)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
