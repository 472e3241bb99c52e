"""Extensions by name: one mechanism for every kind of thing a suite or config names (scorers,
environments, providers, benchmarks).

A :class:`Registry` holds the built-ins as lazy ``"module:attr"`` strings (``"module"`` alone for
a registry of modules, such as the benchmarks), so nothing is imported until it is used, and
finds plug-ins in one entry-point group per kind: a third-party package adds a scorer with

.. code-block:: toml

    [project.entry-points."skillopt_ci.scorers"]
    fuzzy = "my_pkg.scoring:FuzzyScorer"

A registry may also take in what the benchmark packs add (``packs``: the lazy ``"module:attr"``
of a function ``(kind) -> (built-ins, plug-in entry points)``), read only for a name its own
table does not hold. Built-ins win over a plug-in of the same name. Every lookup failure reads the same way:
``unknown scorer 'fuzzy'; known: exact, contains, ...`` (an :class:`InputError`, exit 2), a
plug-in that fails to import names itself (exit 2: the plug-in's bug, not ours), and a built-in
that fails to import is a broken installation (exit 3).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from skillopt_ci.core.errors import InputError, RuntimeFailure


@dataclass
class Registry:
    """``kind`` names what it holds in messages ("scorer"); ``group`` is the entry-point group;
    ``check`` (optional) is ``None`` for a good object, else why it cannot be used."""

    kind: str
    group: str
    builtin: dict[str, str]
    check: Callable[[Any], str | None] | None = None
    packs: str | None = None

    def _packs(self) -> tuple[dict[str, str], list[EntryPoint]]:
        if self.packs is None:
            return {}, []
        module, _, attr = self.packs.partition(":")
        found: tuple[dict[str, str], list[EntryPoint]] = getattr(importlib.import_module(module), attr)(self.kind)
        return found

    def table(self) -> dict[str, str]:
        """The built-ins: this registry's own, then the built-in packs'."""
        return {**self.builtin, **self._packs()[0]}

    def plugins(self) -> list[EntryPoint]:
        builtin, from_packs = self._packs()
        return sorted((ep for ep in [*entry_points(group=self.group), *from_packs]
                       if ep.name not in self.builtin and ep.name not in builtin), key=lambda ep: ep.name)

    def names(self) -> list[str]:
        """Every name this installation knows: built-ins in their order, then plug-ins by name."""
        return [*self.table(), *(ep.name for ep in self.plugins())]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self.builtin or name in self.names())

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def unknown(self, name: str, where: str | None = None, what: str | None = None) -> InputError:
        return InputError(f"unknown {what or self.kind} {name!r}; known: {', '.join(self.names())}", where=where,
                          hint=f"install the package that provides it (entry-point group {self.group})")

    def load(self, name: str, where: str | None = None) -> Any:
        """The object registered as ``name`` (its module imported on first use)."""
        spec = self.builtin.get(name) or self._packs()[0].get(name)
        if spec is not None:
            module, _, attr = spec.partition(":")
            try:
                found = importlib.import_module(module)
                found = getattr(found, attr) if attr else found
            except (ImportError, AttributeError) as exc:  # a broken or partial installation
                raise RuntimeFailure(f"the built-in {self.kind} {name!r} could not be imported: {exc}", where=where,
                                     hint="reinstall skillopt-ci (pip install --force-reinstall skillopt-ci)") from None
        else:
            points = [ep for ep in self.plugins() if ep.name == name]
            if not points:
                raise self.unknown(name, where)
            try:
                found = points[0].load()
            except Exception as exc:  # a plug-in that fails to import is the plug-in's bug; say whose
                raise InputError(f"{self.kind} {name!r} ({points[0].value}) failed to load: "
                                 f"{type(exc).__name__}: {exc}", where=where) from None
        problem = self.check(found) if self.check else None
        if problem:
            raise InputError(f"{self.kind} {name!r} {problem}", where=where)
        return found

    def items(self) -> Iterator[tuple[str, Any]]:
        """Every registered object, loaded (for listings and tests; imports everything)."""
        for name in self.names():
            yield name, self.load(name)


def subclass_of(base: type) -> Callable[[Any], str | None]:
    """A ``check`` accepting subclasses of ``base`` only."""
    def check(found: Any) -> str | None:
        if isinstance(found, type) and issubclass(found, base):
            return None
        return f"is not a {base.__module__}.{base.__qualname__} subclass"
    return check
