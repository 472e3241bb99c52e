"""The fault proxy itself, with a plain HTTP client: each injection does what it says."""

from __future__ import annotations

import http.client
import json
import threading
import time

import pytest

from fakes.fault_proxy import FaultProxy, Injection
from skillopt_ci.sim import ScriptedModelServer

BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hello #t-1#"}]})


def post(proxy: FaultProxy, headers: dict[str, str] | None = None, timeout: float = 5.0):
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=timeout)
    try:
        conn.request("POST", "/v1/chat/completions", body=BODY,
                     headers={"Content-Type": "application/json", "Authorization": "Bearer sk-x", **(headers or {})})
        reply = conn.getresponse()
        return reply.status, dict(reply.getheaders()), reply.read()
    finally:
        conn.close()


@pytest.fixture
def proxy():
    with ScriptedModelServer() as server, FaultProxy(server.url) as proxy:
        yield proxy


def test_passes_requests_through_and_records_them(proxy):
    status, _, body = post(proxy)
    assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] == "hello #t-1#"
    assert [(r.kind, r.status, r.path) for r in proxy.records] == [("pass", 200, "/v1/chat/completions")]


def test_error_injections(proxy):
    proxy.inject(Injection.echo_auth(), Injection.html(), Injection.malformed(), Injection.retry_after(30),
                 *Injection.burst(2, 503))
    status, _, body = post(proxy, {"x-api-key": "ak-y"})
    assert status == 401 and "Bearer sk-x" in body.decode() and "ak-y" in body.decode()
    status, headers, body = post(proxy)
    assert status == 200 and headers["Content-Type"].startswith("text/html") and body.startswith(b"<!DOCTYPE html>")
    status, _, body = post(proxy)
    assert status == 200
    with pytest.raises(ValueError):
        json.loads(body)
    status, headers, _ = post(proxy)
    assert status == 429 and headers["Retry-After"] == "30"
    assert [post(proxy)[0] for _ in range(3)] == [503, 503, 200]
    assert proxy.kinds() == ["echo_auth", "html", "malformed", "retry_after", "status", "status", "pass"]
    assert proxy.pending == 0


def test_truncated_body_and_dropped_connection(proxy):
    proxy.inject(Injection.truncate(), Injection.drop())
    with pytest.raises(http.client.IncompleteRead):
        post(proxy)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        post(proxy)


def test_a_plan_picks_requests_by_content(proxy):
    proxy.plan = lambda request: Injection.status_error(500) if "#t-1#" in request.text else None
    assert post(proxy)[0] == 500


def test_a_stall_ends_when_the_client_gives_up_or_the_proxy_stops():
    with ScriptedModelServer() as server:
        proxy = FaultProxy(server.url).start()
        proxy.inject(Injection.stall(300), Injection.stall(300))
        with pytest.raises(TimeoutError):
            post(proxy, timeout=0.2)
        outcome: list[object] = []

        def stalled() -> None:
            try:
                outcome.append(post(proxy, timeout=60)[0])
            except (http.client.RemoteDisconnected, ConnectionError) as exc:
                outcome.append(type(exc).__name__)

        thread = threading.Thread(target=stalled)
        thread.start()
        while len(proxy.records) < 2 and thread.is_alive():  # until the second stall has begun
            time.sleep(0.01)
        proxy.stop()  # releases the stalled handler, which closes the connection unanswered
        thread.join(10)
        assert not thread.is_alive() and outcome and outcome[0] != 200


def test_upstream_must_be_plain_http():
    with pytest.raises(ValueError):
        FaultProxy("https://example.com")
