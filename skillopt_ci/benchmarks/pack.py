"""A benchmark pack: one folder (``benchmarks/packs/<name>/``) holding a benchmark's importer, the
scorers and environments it adds, and its demo fixture, described by one :class:`Pack` in the
folder's ``__init__.py``.

The record holds lazy ``"module:attr"`` strings, so reading it imports nothing else of the pack:
the importer is imported by ``bench import``, a scorer or an environment when a suite names it
(the scorer and environment registries take every pack's entries in, :func:`pack_entries` in
:mod:`skillopt_ci.benchmarks`), the fixture by the demo and the tests.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # reading a pack's record loads neither
    from skillopt_ci.benchmarks.draft import SuiteDraft
    from skillopt_ci.benchmarks.manifest import Manifest

Reader = Callable[[Path, "Manifest"], "SuiteDraft"]


@dataclass(frozen=True)
class Pack:
    """``read`` is ``"module:attr"`` of ``read(source, manifest) -> SuiteDraft`` (or the function);
    ``scorers`` and ``environments`` map the names a suite uses to ``"module:Class"``; ``fixture``
    is the module of ``write_fixture(dest, manifest=None) -> Path`` and ``policy(request)``, the
    simulated target the demo answers the imported tasks with (``None``: no demo)."""

    name: str
    title: str
    data_help: str  # one line: where the data comes from and what --from names
    read: str | Reader
    extras: tuple[str, ...] = ()  # the optional readers the importer needs (benchmarks.extras)
    scorers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    environments: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    fixture: str | None = None

    def reader(self) -> Reader:
        found: Reader = _resolve(self.read) if isinstance(self.read, str) else self.read
        return found

    def fixture_module(self) -> ModuleType | None:
        return importlib.import_module(self.fixture) if self.fixture else None

    @classmethod
    def from_module(cls, module: ModuleType) -> Pack:
        """A benchmark written as one module (``NAME``, ``TITLE``, ``EXTRAS``, ``DATA_HELP``,
        ``read``, and optionally ``FIXTURE``, its fixture's module), or a module holding ``PACK``."""
        if isinstance(getattr(module, "PACK", None), Pack):
            pack: Pack = module.PACK
            return pack
        return cls(module.NAME, module.TITLE, module.DATA_HELP, module.read, tuple(module.EXTRAS),
                   fixture=getattr(module, "FIXTURE", None))


def _resolve(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)
