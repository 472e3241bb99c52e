"""Where and how to call one model: :class:`Endpoint`, what the registry resolves a
:class:`~skillopt_ci.inputs.config.ModelSpec` to (:func:`skillopt_ci.models.registry.resolve_endpoint`)
and every backend is built from. A record with no behaviour, so the backends can import it without
importing the registry that creates them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Endpoint:
    """Where and how to call one model. ``api_key`` is secret: never print or store it."""

    provider: str
    model: str
    api_key: str
    base_url: str | None = None
    api_version: str | None = None
    api: str = "chat"

    def __repr__(self) -> str:
        return f"Endpoint(provider={self.provider!r}, model={self.model!r}, base_url={self.base_url!r})"
