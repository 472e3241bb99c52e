"""Environments by name: the built-ins, and plug-ins from the ``skillopt_ci.environments``
entry-point group (a team's own environment: ``[project.entry-points."skillopt_ci.environments"]
my-env = "my_pkg.env:MyEnvironment"``).

``build_environment(spec, suite_dir)`` takes the suite's ``environment:`` value (a name, or a
mapping with ``type`` and the environment's options) and returns a ready environment. Built-in
modules are imported only when their environment is used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.options import parse_options
from skillopt_ci.core.registry import Registry, subclass_of
from skillopt_ci.envs.base import BaseEnvironment

ENTRY_POINT_GROUP = "skillopt_ci.environments"
BUILTIN: dict[str, str] = {
    "chat": "skillopt_ci.envs.chat:ChatEnvironment",
    "tools": "skillopt_ci.envs.tools:ToolsEnvironment",
    "interactive": "skillopt_ci.envs.interactive:InteractiveEnvironment",
    "codex": "skillopt_ci.envs.codex:CodexEnvironment",
    "claude-code": "skillopt_ci.envs.claude_code:ClaudeCodeEnvironment",
    "catalogue": "skillopt_ci.envs.catalogue:CatalogueEnvironment",
}
# A benchmark's own environments (SpreadsheetBench's codegen) are in its pack, read only for a
# name not above.
ENVIRONMENTS = Registry("environment", ENTRY_POINT_GROUP, BUILTIN, subclass_of(BaseEnvironment),
                        "skillopt_ci.benchmarks:pack_entries")


def environment_names() -> list[str]:
    """Every environment this installation knows: built-ins first, then plug-ins."""
    return ENVIRONMENTS.names()


def environment_class(name: str, where: str | None = None) -> type[BaseEnvironment]:
    """The class of environment ``name``; ``InputError`` naming the known ones when there is none."""
    cls: type[BaseEnvironment] = ENVIRONMENTS.load(name, where)
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
