"""Environments by name: the built-ins, and plug-ins from the ``skillopt_ci.environments``
entry-point group (a team's own environment: ``[project.entry-points."skillopt_ci.environments"]
my-env = "my_pkg.env:MyEnvironment"``).

``build_environment(spec, suite_dir)`` takes the suite's ``environment:`` value (a name, or a
mapping with ``type`` and the environment's options) and returns a ready environment. Built-in
modules are imported only when their environment is used.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import InputError, RuntimeFailure
from skillopt_ci.core.options import parse_options
from skillopt_ci.envs.base import BaseEnvironment

ENTRY_POINT_GROUP = "skillopt_ci.environments"
BUILTIN: dict[str, str] = {
    "chat": "skillopt_ci.envs.chat:ChatEnvironment",
    "tools": "skillopt_ci.envs.tools:ToolsEnvironment",
    "interactive": "skillopt_ci.envs.interactive:InteractiveEnvironment",
    "codex": "skillopt_ci.envs.codex:CodexEnvironment",
    "claude-code": "skillopt_ci.envs.claude_code:ClaudeCodeEnvironment",
    "codegen": "skillopt_ci.envs.codegen:CodegenEnvironment",
}


def environment_names() -> list[str]:
    """Every environment this installation knows: built-ins first, then plug-ins."""
    plugins = sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name not in BUILTIN)
    return [*BUILTIN, *plugins]


def environment_class(name: str, where: str | None = None) -> type[BaseEnvironment]:
    """The class of environment ``name``; ``InputError`` naming the known ones when there is none."""
    if name in BUILTIN:
        module, _, attr = BUILTIN[name].partition(":")
        try:
            cls = getattr(importlib.import_module(module), attr)
        except ImportError as exc:  # a broken or partial installation, not the suite's fault
            raise RuntimeFailure(f"the built-in environment {name!r} could not be imported: {exc}", where=where,
                                 hint="reinstall skillopt-ci (pip install --force-reinstall skillopt-ci)") from None
    else:
        found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
        if not found:
            raise InputError(f"unknown environment {name!r}; known: {', '.join(environment_names())}", where=where,
                             hint=f"install the package that provides it (entry-point group {ENTRY_POINT_GROUP})")
        try:
            cls = found[0].load()
        except Exception as exc:  # a plug-in that fails to import is the plug-in's bug; say whose
            raise InputError(f"environment {name!r} ({found[0].value}) failed to load: {type(exc).__name__}: {exc}",
                             where=where) from None
    if not (isinstance(cls, type) and issubclass(cls, BaseEnvironment)):
        raise InputError(f"environment {name!r} is not a skillopt_ci.envs.base.BaseEnvironment subclass", where=where)
    return cls


def build_environment(spec: str | dict[str, Any] | None, suite_dir: Path | str, *,
                      where: str | None = None) -> BaseEnvironment:
    """Build the environment a suite declares (``None`` is ``chat``)."""
    if spec is None:
        spec = "chat"
    options = {"type": spec} if isinstance(spec, str) else dict(spec)
    kind = options.pop("type", None)
    if not isinstance(kind, str):
        raise InputError("environment has no type", where=where, hint=f"use one of: {', '.join(environment_names())}")
    cls = environment_class(kind, where)
    return cls(parse_options(cls.Options, options, f"environment {kind}", where=where), Path(suite_dir))
