"""The shared loopback HTTP server: lifecycle, keep-alive shutdown, body reading."""

from __future__ import annotations

import http.client
import socket
import time

import pytest

from skillopt_ci.httpserve import LoopbackHandler, LoopbackHTTPServer, LoopbackService


class _Echo(LoopbackHandler):
    server_version = "Echo/1.0"
    do_GET = do_POST = do_DELETE = LoopbackHandler.receive

    def respond(self, method: str, body: bytes, headers: dict[str, str]) -> None:
        if method == "GET":
            self.send_bytes(200, {"Content-Type": "text/plain"}, b"hello")
        elif method == "DELETE":
            self.send_bytes(204, {}, b"")
        else:
            self.send_bytes(200, {"Content-Type": "application/octet-stream"}, body)

    def do_PUT(self) -> None:  # a verb handled directly, reading the body itself
        body = self.read_body()
        assert body is not None
        self.send_bytes(201, {}, body[::-1])


class Echo(LoopbackService):
    handler_class = _Echo


def _connect(service: LoopbackService) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", service.port, timeout=5)


def test_url_and_port_before_start_raise() -> None:
    service = Echo()
    with pytest.raises(RuntimeError, match="Echo is not running"):
        service.url  # noqa: B018
    with pytest.raises(RuntimeError):
        service.port  # noqa: B018


def test_start_and_stop_are_idempotent() -> None:
    service = Echo()
    service.stop()  # never started: nothing to do
    assert service.start() is service
    url = service.url
    assert service.start() is service
    assert service.url == url
    assert url == f"http://127.0.0.1:{service.port}"
    service.stop()
    service.stop()
    with pytest.raises(RuntimeError):
        service.url  # noqa: B018
    service.start()  # and it can serve again
    try:
        conn = _connect(service)
        conn.request("GET", "/")
        assert conn.getresponse().read() == b"hello"
        conn.close()
    finally:
        service.stop()


def test_context_manager_serves_then_releases() -> None:
    with Echo() as service:
        assert isinstance(service, Echo)
        conn = _connect(service)
        conn.request("GET", "/")
        response = conn.getresponse()
        assert (response.status, response.read()) == (200, b"hello")
        assert response.getheader("Server", "").startswith("Echo/1.0")
        assert response.getheader("Content-Length") == "5"
        conn.close()
    with pytest.raises(RuntimeError):
        service.url  # noqa: B018


def test_stop_with_an_open_keep_alive_connection_is_prompt_and_frees_the_port() -> None:
    service = Echo().start()
    port = service.port
    conn = _connect(service)
    conn.request("GET", "/")
    assert conn.getresponse().read() == b"hello"  # the connection stays open (HTTP/1.1)
    began = time.monotonic()
    service.stop()
    assert time.monotonic() - began < 2.0
    assert conn.sock is not None
    assert conn.sock.recv(1) == b""  # the server closed its end of the idle connection
    conn.close()
    with Echo(port=port) as again:
        assert again.port == port
        conn = _connect(again)
        conn.request("GET", "/")
        assert conn.getresponse().read() == b"hello"
        conn.close()


def test_close_connections_joins_the_handler_threads() -> None:
    service = Echo().start()
    conn = _connect(service)
    conn.request("GET", "/")
    conn.getresponse().read()
    httpd = service._httpd
    assert isinstance(httpd, LoopbackHTTPServer)
    threads = list(httpd._conns.values())
    assert threads and all(t.is_alive() for t in threads)
    service.stop()
    assert not any(t.is_alive() for t in threads)
    assert httpd.stopping.is_set()
    conn.close()


def test_reads_content_length_and_chunked_bodies() -> None:
    with Echo() as service:
        conn = _connect(service)
        conn.request("POST", "/", body=b"plain body")
        assert conn.getresponse().read() == b"plain body"
        conn.request("POST", "/", body=iter([b"chunk one, ", b"", b"chunk two"]))
        assert conn.getresponse().read() == b"chunk one, chunk two"
        conn.request("POST", "/")  # no body at all
        assert conn.getresponse().read() == b""
        conn.close()


def test_raw_chunked_request_with_extensions_on_one_keep_alive_connection() -> None:
    with Echo() as service, socket.create_connection(("127.0.0.1", service.port), 5) as sock:
        sock.sendall(
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5;name=value\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
            b"DELETE / HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        received = b""
        while b"204" not in received or not received.endswith(b"\r\n\r\n"):
            data = sock.recv(4096)
            if not data:
                break
            received += data
    first, _, second = received.partition(b"HTTP/1.1 204")
    assert first.startswith(b"HTTP/1.1 200")
    assert first.endswith(b"\r\n\r\nhello world")
    assert b"Content-Length" not in second


def test_a_truncated_body_closes_the_connection() -> None:
    with Echo() as service, socket.create_connection(("127.0.0.1", service.port), 5) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nshort")
        sock.shutdown(socket.SHUT_WR)
        assert sock.recv(4096) == b""


def test_verbs_without_a_handler_get_501_and_direct_handlers_still_work() -> None:
    with Echo() as service:
        conn = _connect(service)
        conn.request("PUT", "/", body=b"abc")
        response = conn.getresponse()
        assert (response.status, response.read()) == (201, b"cba")
        conn.request("PATCH", "/", body=b"{}")
        response = conn.getresponse()
        response.read()
        assert response.status == 501
        conn.close()
