"""How an agent CLI reaches its model without holding the key: one grant of the forwarder per rollout.

``open_access(endpoint, upstream, network)`` issues a per-rollout credential of the process's
forwarder (:func:`skillopt_ci.models.forwarder.shared_forwarder`) for ``upstream`` (the base URL
the CLI would have used, e.g. Codex's Azure ``…/openai``) and returns an :class:`AgentAccess`:
``endpoint`` is the target's endpoint with the credential for ``api_key`` and the forwarder's
URL for ``base_url``, which is all the CLI is given; ``close()`` revokes the credential (call it
when the CLI has ended: a credential that leaked out of the rollout is worthless from then on).

``network`` says how the CLI runs: ``True`` (no network namespace) reaches the forwarder's TCP
port on the host's 127.0.0.1; ``False`` (the sandbox cuts the network off) reaches it through the
relay (:mod:`skillopt_ci.models.forward_relay`), which ``wrap(argv)`` starts in front of the CLI
inside the sandbox on the sandbox's own ``127.0.0.1:RELAY_PORT`` and which connects to the
forwarder's Unix socket (``socket_dir``, holding the socket and the relay's copy, must be
visible inside the sandbox: a read-only bind is enough, since connecting to a socket is not a
write to its file system). ``grant`` counts the
calls and tokens that went through, for the rollout's spend.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from skillopt_ci.models.forwarder import Forwarder, Grant, shared_forwarder
from skillopt_ci.sandbox.binds import Binds
from skillopt_ci.sandbox.isolation import isolation

RELAY_PORT = 47_110  # inside the sandbox's own network namespace, where nothing else listens
RELAY_ORIGIN = f"http://127.0.0.1:{RELAY_PORT}"


@dataclass
class AgentAccess:
    """One rollout's way to the model; see the module docstring."""

    endpoint: Any
    grant: Grant
    network: bool
    forwarder: Forwarder

    @property
    def socket_dir(self) -> Path | None:
        return self.forwarder.socket_dir

    @property
    def binds(self) -> Binds:
        """What the sandbox must show the CLI besides its own files: the socket folder, read-only."""
        if self.network or self.socket_dir is None:
            return Binds()
        return Binds.of(read_only=[self.socket_dir])

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` as the sandbox should run it: unchanged with the network, else behind the relay."""
        if self.network:
            return argv
        # -I -S: the relay needs the standard library only, not this install's site-packages
        return [sys.executable, "-I", "-S", str(self.forwarder.relay_path), str(self.forwarder.socket_path),
                str(RELAY_PORT), "--", *argv]

    def close(self) -> None:
        self.forwarder.revoke(self.grant)


async def host_network() -> bool:
    """Whether an agent CLI runs with the host's network: only where commands are not isolated
    (the opt-in without bubblewrap, where there is no network namespace to cut). Under bubblewrap
    it has none and reaches the forwarder through the relay."""
    return await asyncio.to_thread(isolation) != "bwrap"


def open_access(endpoint: Any, upstream: str | None, *, network: bool, max_calls: int | None = None,
                forwarder: Forwarder | None = None) -> AgentAccess:
    """A live credential for one rollout (forwarding at most ``max_calls`` calls); see the module docstring."""
    forwarder = forwarder or shared_forwarder()
    grant = forwarder.issue(endpoint.provider, endpoint.api_key, upstream, relay_origin=RELAY_ORIGIN,
                            max_calls=max_calls)
    base_url = grant.base_url if network else grant.socket_base_url
    return AgentAccess(replace(endpoint, api_key=grant.credential, base_url=base_url), grant, network, forwarder)
