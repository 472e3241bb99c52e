"""The six benchmarks of the method: importers from the upstream data formats into ordinary
suites, split by the published manifests (:mod:`manifest`), and ``bench run``.

Every benchmark module defines ``NAME``, ``TITLE``, ``EXTRAS`` (the optional readers it imports),
``DATA_HELP`` (one line: where the data comes from and what ``--from`` names) and
``read(source, manifest) -> SuiteDraft``. Modules are imported only when their benchmark is used;
a plug-in adds a benchmark module through the ``skillopt_ci.benchmarks`` entry-point group
(:mod:`skillopt_ci.core.registry`).
"""

from __future__ import annotations

from types import ModuleType

from skillopt_ci.core.registry import Registry

BENCHMARKS: dict[str, str] = {
    "searchqa": "skillopt_ci.benchmarks.searchqa",
    "docvqa": "skillopt_ci.benchmarks.docvqa",
    "alfworld": "skillopt_ci.benchmarks.alfworld",
    "livemathematicianbench": "skillopt_ci.benchmarks.livemathematicianbench",
    "spreadsheetbench": "skillopt_ci.benchmarks.spreadsheetbench",
    "officeqa": "skillopt_ci.benchmarks.officeqa",
}


REGISTRY = Registry("benchmark", "skillopt_ci.benchmarks", BENCHMARKS,
                    lambda found: None if isinstance(found, ModuleType) else "is not a module")


def benchmark_names() -> list[str]:
    return REGISTRY.names()


def benchmark_module(name: str) -> ModuleType:
    """The importer module of benchmark ``name``; an unknown name is an InputError listing the known."""
    module: ModuleType = REGISTRY.load(name)
    return module
