"""Model providers by name: the registry (:mod:`skillopt_ci.core.registry`) every provider is
found in, built-in or plug-in. Each is a :class:`skillopt_ci.models.registry.Provider` record; the
built-ins are registered below exactly as a plug-in registers one in its own package:

.. code-block:: toml

    [project.entry-points."skillopt_ci.providers"]
    my-llm = "my_pkg.llm:PROVIDER"

The registry sits in the inputs layer because validating ``skillopt.yml`` needs the names (an
unknown one is an error at its line); a record's module is imported only when it is loaded (a
spec asks what its provider speaks, or the model pool calls it).
"""

from __future__ import annotations

from pkgutil import resolve_name
from typing import Any

from skillopt_ci.core.registry import Registry

ENTRY_POINT_GROUP = "skillopt_ci.providers"
RECORD = "skillopt_ci.models.registry:Provider"


def _is_provider(found: Any) -> str | None:
    # The record's class is loaded by now: the module that made the record imported it.
    return None if isinstance(found, resolve_name(RECORD)) else f"is not a {RECORD.replace(':', '.')}"


PROVIDERS = Registry("provider", ENTRY_POINT_GROUP, {
    "openai": "skillopt_ci.models.registry:OPENAI",
    "azure-openai": "skillopt_ci.models.registry:AZURE_OPENAI",
    "anthropic": "skillopt_ci.models.registry:ANTHROPIC",
    "openai-compatible": "skillopt_ci.models.registry:OPENAI_COMPATIBLE",
}, _is_provider)
