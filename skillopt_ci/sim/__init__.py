"""Test doubles that ship with skillopt-ci: local servers speaking the real wire protocols.

Names are loaded on first use, so ``python -m skillopt_ci.sim.server`` runs the server module
once, as a script, without importing it a second time through this package.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "Fault": "skillopt_ci.sim.protocols",
    "ScriptedReply": "skillopt_ci.sim.protocols",
    "ScriptedRequest": "skillopt_ci.sim.protocols",
    "ScriptedToolCall": "skillopt_ci.sim.protocols",
    "RecordedCall": "skillopt_ci.sim.server",
    "ScriptedModelServer": "skillopt_ci.sim.server",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(name)
