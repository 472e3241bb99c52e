"""The six benchmarks of the method: importers from the upstream data formats into ordinary
suites, split by the published manifests (:mod:`manifest`), and ``bench run``.

Every benchmark module defines ``NAME``, ``TITLE``, ``EXTRAS`` (the optional readers it imports),
``DATA_HELP`` (one line: where the data comes from and what ``--from`` names) and
``read(source, manifest) -> SuiteDraft``. Modules are imported only when their benchmark is used.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from skillopt_ci.core.errors import InputError

BENCHMARKS: dict[str, str] = {
    "searchqa": "skillopt_ci.benchmarks.searchqa",
    "docvqa": "skillopt_ci.benchmarks.docvqa",
    "alfworld": "skillopt_ci.benchmarks.alfworld",
    "livemathematicianbench": "skillopt_ci.benchmarks.livemathematicianbench",
    "spreadsheetbench": "skillopt_ci.benchmarks.spreadsheetbench",
    "officeqa": "skillopt_ci.benchmarks.officeqa",
}


def benchmark_names() -> list[str]:
    return list(BENCHMARKS)


def benchmark_module(name: str) -> ModuleType:
    """The importer module of benchmark ``name``; an unknown name is an InputError listing the six."""
    if name not in BENCHMARKS:
        raise InputError(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}")
    return importlib.import_module(BENCHMARKS[name])
