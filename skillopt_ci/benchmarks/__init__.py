"""The six benchmarks of the method, one pack each (``packs/<name>/``, :mod:`.pack`), registered
by one line in ``BENCHMARKS``, and beside them the machinery they share: split manifests, the
draft and the writer, ``bench import`` (:mod:`.importer`) and ``bench run`` (:mod:`.run`). A
plug-in adds a pack through the ``skillopt_ci.benchmarks`` entry-point group (``toy =
"my_pkg.toy:PACK"``; a one-module benchmark, ``NAME``/``TITLE``/``EXTRAS``/``DATA_HELP``/``read``,
still works). Nothing of a pack is imported until its benchmark, scorer or environment is used.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint
from types import ModuleType
from typing import Any

from skillopt_ci.benchmarks.pack import Pack
from skillopt_ci.core.registry import Registry

BENCHMARKS: dict[str, str] = {
    "searchqa": "skillopt_ci.benchmarks.packs.searchqa:PACK",
    "docvqa": "skillopt_ci.benchmarks.packs.docvqa:PACK",
    "alfworld": "skillopt_ci.benchmarks.packs.alfworld:PACK",
    "livemathematicianbench": "skillopt_ci.benchmarks.packs.livemathematicianbench:PACK",
    "spreadsheetbench": "skillopt_ci.benchmarks.packs.spreadsheetbench:PACK",
    "officeqa": "skillopt_ci.benchmarks.packs.officeqa:PACK",
}


REGISTRY = Registry("benchmark", "skillopt_ci.benchmarks", BENCHMARKS,
                    lambda found: None if isinstance(found, (Pack, ModuleType)) else "is not a module")


def benchmark_pack(name: str) -> Pack:
    """The pack of benchmark ``name``; an unknown name is an InputError listing the known."""
    found: Any = REGISTRY.load(name)
    return found if isinstance(found, Pack) else Pack.from_module(found)


def pack_entries(kind: str) -> tuple[dict[str, str], list[EntryPoint]]:
    """What the packs add to the registry of ``kind`` ("scorer", "environment"): the built-in
    packs' entries as built-ins, a plug-in pack's as plug-ins (a plug-in that fails to load adds
    nothing here; using its benchmark says why)."""
    field = {"scorer": "scorers", "environment": "environments"}[kind]
    builtin = {key: value for name in BENCHMARKS for key, value in getattr(benchmark_pack(name), field).items()}
    plugins = []
    for point in REGISTRY.plugins():
        try:
            pack = benchmark_pack(point.name)
        except Exception:  # noqa: BLE001 - reported when the benchmark itself is used
            continue
        plugins += [EntryPoint(key, value, REGISTRY.group) for key, value in getattr(pack, field).items()]
    return builtin, plugins
