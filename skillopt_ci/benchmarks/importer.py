"""``bench import``: upstream data + a split manifest -> a checked suite folder.

The importer reads, the writer writes atomically, then the written suite is loaded like any other
(``inputs.suite.load_suite``) so an import that would not validate is reported at once and removed.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from skillopt_ci.benchmarks import benchmark_pack
from skillopt_ci.benchmarks.extras import require
from skillopt_ci.benchmarks.manifest import load_manifest
from skillopt_ci.benchmarks.writer import write_suite
from skillopt_ci.core.errors import InputError
from skillopt_ci.inputs.suite import load_suite


@dataclass(frozen=True)
class ImportReport:
    benchmark: str
    title: str
    out: Path
    counts: dict[str, int]
    assets: int
    notes: list[str] = field(default_factory=list)


def import_benchmark(name: str, source: Path, out: Path, *, manifest_dir: Path | None = None,
                     force: bool = False) -> ImportReport:
    """Import benchmark ``name`` from ``source`` into the suite folder ``out``."""
    pack = benchmark_pack(name)
    manifest = load_manifest(name, manifest_dir)
    if not source.exists():
        raise InputError("the data path does not exist", where=str(source), hint=pack.data_help)
    for extra in pack.extras:
        require(extra, name)
    draft = pack.reader()(source, manifest)
    existed = out.exists()
    write_suite(draft, out, benchmark=name, manifest=manifest, source=str(source), force=force)
    try:
        load_suite(out, str(out))
    except InputError:
        if not existed:
            shutil.rmtree(out, ignore_errors=True)
        raise
    counts = {split: len(tasks) for split, tasks in draft.tasks.items()}
    if not counts.get("train") or not counts.get("val"):
        draft.notes.append("the manifest has no train or no val ids: the suite serves eval and bench run; "
                           "train needs both splits")
    return ImportReport(name, pack.title, out, counts, len(draft.assets), list(draft.notes))
