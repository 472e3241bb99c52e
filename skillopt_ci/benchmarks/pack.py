"""A benchmark pack: one folder (``benchmarks/packs/<name>/``) holding a benchmark's importer, the
scorers and environments it adds, and its demo fixture, named by lazy ``"module:attr"`` strings in
one :class:`Pack` (the folder's ``__init__.py``), so reading the record imports nothing else: the
importer is imported by ``bench import``, a scorer or an environment when a suite names it (the
registries take the packs' entries in, :func:`skillopt_ci.benchmarks.pack_entries`), the fixture
by the demo and the tests.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING

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
        if isinstance(self.read, str):
            module, _, attr = self.read.partition(":")
            found: Reader = getattr(importlib.import_module(module), attr)
            return found
        return self.read

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
