"""Test doubles that ship with skillopt-ci: local servers speaking the real wire protocols.

Names are loaded on first use, so ``python -m skillopt_ci.testing.server`` runs the server module
once, as a script, without importing it a second time through this package.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "Fault": "skillopt_ci.testing.protocols",
    "ScriptedReply": "skillopt_ci.testing.protocols",
    "ScriptedRequest": "skillopt_ci.testing.protocols",
    "ScriptedToolCall": "skillopt_ci.testing.protocols",
    "RecordedCall": "skillopt_ci.testing.server",
    "ScriptedModelServer": "skillopt_ci.testing.server",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(name)
