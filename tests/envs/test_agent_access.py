"""How an agent CLI is given its way to the model: behind the relay with no network (the socket
folder bound read-only, the relay's URL), or the forwarder's TCP port with the host's network
where nothing is isolated; a per-rollout call cap on the grant; revoked at close."""

from __future__ import annotations

import asyncio
import sys

import pytest

from skillopt_ci.envs.agent_access import RELAY_ORIGIN, host_network, open_access
from skillopt_ci.models.forwarder import Forwarder
from skillopt_ci.models.registry import Endpoint

KEY = "sk-agent-access-key-0123456789"


@pytest.fixture()
def forwarder():
    with Forwarder(unix_socket=True) as fwd:
        yield fwd


def endpoint() -> Endpoint:
    return Endpoint("openai", "gpt-test", KEY, "http://127.0.0.1:9/v1")


def test_without_network_the_cli_gets_the_relays_url_and_the_relay_in_front(forwarder):
    access = open_access(endpoint(), "http://127.0.0.1:9/v1", network=False, max_calls=5, forwarder=forwarder)
    assert access.endpoint.base_url == RELAY_ORIGIN + "/v1" and access.endpoint.api_key == access.grant.credential
    assert access.binds.read_only == (forwarder.socket_dir,) and access.binds.read_write == ()
    argv = access.wrap(["codex", "exec"])
    assert argv[:4] == [sys.executable, "-I", "-S", str(forwarder.relay_path)]
    assert argv[4:] == [str(forwarder.socket_path), RELAY_ORIGIN.rsplit(":", 1)[1], "--", "codex", "exec"]
    assert access.grant.max_calls == 5
    access.close()
    assert forwarder.lookup(access.grant.credential) is None


def test_with_the_hosts_network_the_cli_calls_the_forwarders_port_directly(forwarder):
    access = open_access(endpoint(), "http://127.0.0.1:9/v1", network=True, forwarder=forwarder)
    assert access.endpoint.base_url == forwarder.url + "/v1"
    assert access.wrap(["claude", "-p"]) == ["claude", "-p"] and access.binds.read_only == ()
    assert access.grant.max_calls is None
    access.close()


def test_only_a_machine_without_isolation_gives_the_cli_the_hosts_network(unisolated):
    assert asyncio.run(host_network()) is True
