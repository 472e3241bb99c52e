"""Workspace sandbox: a fresh folder per rollout, confined file tools, limited subprocesses.

Public surface: ``Workspace``, ``Binds`` (extra paths a command may see), ``policy``
(``mark_untrusted``, ``require_isolation``, ``unisolated_note``), ``SandboxLimits``, ``ProcessResult``, ``SandboxError``,
``isolation()``, ``clean_environment()`` and ``run_in()`` (a command in an existing folder). What is and is not isolated: docs/sandbox.md.
This package imports only ``core`` (a layer beside ``models``).
"""

from skillopt_ci.sandbox.binds import NO_BINDS, Binds
from skillopt_ci.sandbox.isolation import clean_environment, isolation
from skillopt_ci.sandbox.paths import SandboxError
from skillopt_ci.sandbox.result import ProcessResult, SandboxLimits
from skillopt_ci.sandbox.workspace import Workspace, run_in

__all__ = [
    "NO_BINDS",
    "Binds",
    "ProcessResult",
    "SandboxError",
    "SandboxLimits",
    "Workspace",
    "clean_environment",
    "isolation",
    "run_in",
]
