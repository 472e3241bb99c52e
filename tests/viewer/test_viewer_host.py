"""The viewer answers only requests addressed to it (DNS rebinding): raw HTTP with chosen Host headers."""

from __future__ import annotations

import json

import pytest

from helpers.http import raw_get
from skillopt_ci.viewer.server import ViewerServer


@pytest.fixture
def viewer(tmp_path):
    with ViewerServer(tmp_path) as server:
        yield server


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "attacker.test:{port}", "127.0.0.1:1",
                                  "localhost", "127.0.0.1", "localhost.evil.example:{port}", "", None])
def test_foreign_host_headers_are_refused(viewer, host):
    for path in ("/", "/api/runs", "/api/run?id=."):
        status, body = raw_get(viewer.port, None if host is None else host.format(port=viewer.port), path)
        assert status == 421, (host, path, status)
        assert str(viewer.root).encode() not in body and b"<html" not in body.lower()


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST:{port}"])
def test_its_own_address_is_answered(viewer, host):
    status, body = raw_get(viewer.port, host.format(port=viewer.port))
    assert status == 200 and json.loads(body)["runs"] == []


def test_bound_to_all_interfaces_accepts_ip_literals_but_no_names(tmp_path):
    with ViewerServer(tmp_path, host="0.0.0.0") as server:
        assert raw_get(server.port, f"127.0.0.1:{server.port}")[0] == 200
        assert raw_get(server.port, f"192.0.2.7:{server.port}")[0] == 200
        assert raw_get(server.port, f"evil.example:{server.port}")[0] == 421
