"""Test doubles that ship with skillopt-ci: local servers speaking the real wire protocols."""

from skillopt_ci.testing.server import (
    Fault,
    RecordedCall,
    ScriptedModelServer,
    ScriptedReply,
    ScriptedRequest,
)

__all__ = ["Fault", "RecordedCall", "ScriptedModelServer", "ScriptedReply", "ScriptedRequest"]
