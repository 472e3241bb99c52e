"""A fault-injecting HTTP proxy on 127.0.0.1, in front of a model server (usually the
:class:`~skillopt_ci.sim.server.ScriptedModelServer`).

Each request either passes through to ``upstream`` unchanged or meets one :class:`Injection`:
a 401 whose body echoes the request's credentials, an HTML page with status 200, malformed
JSON, a body cut short, a dropped connection, a 429 with ``Retry-After``, a stall, or a 5xx.
Injections come first from a queue (:meth:`FaultProxy.inject`, consumed in arrival order), then
from ``plan(request)`` (which may look at the body, e.g. for a task id); otherwise the request
passes. Every request is recorded (:attr:`FaultProxy.records`).

The proxy knows no provider protocol: the error bodies it makes are OpenAI-shaped, which both
SDKs accept as an error payload. It is a test double and uses the standard library only.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import cast
from urllib.parse import urlsplit

from skillopt_ci.httpserve import LoopbackHandler, LoopbackService

__all__ = ["FaultProxy", "Injection", "ProxiedRequest", "ProxyRecord"]

KINDS = ("pass", "echo_auth", "html", "malformed", "truncate", "drop", "retry_after", "stall", "status")
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "proxy-connection",
               "te", "trailer", "upgrade"}
_HTML_PAGE = (b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head>"
              b"<body><h1>Sign in to continue</h1><form action=\"/login\"></form></body></html>\n")
_MALFORMED_JSON = b'{"id": "chatcmpl-proxy", "object": "chat.completion", "choices": [{"message": {"content": '


@dataclass(frozen=True)
class Injection:
    """What to do to one request. Build it with the classmethods; ``kind`` is one of :data:`KINDS`."""

    kind: str
    status: int = 0
    seconds: float = 0.0

    @classmethod
    def passthrough(cls) -> Injection:
        return cls("pass")

    @classmethod
    def echo_auth(cls, status: int = 401) -> Injection:
        """An error whose message quotes the request's ``Authorization`` and ``x-api-key``
        headers, as some gateways do."""
        return cls("echo_auth", status)

    @classmethod
    def html(cls) -> Injection:
        """200 with a ``text/html`` login page (a proxy or captive portal in the way)."""
        return cls("html", 200)

    @classmethod
    def malformed(cls) -> Injection:
        """200 ``application/json`` whose body is not valid JSON."""
        return cls("malformed", 200)

    @classmethod
    def truncate(cls) -> Injection:
        """The upstream reply with its full ``Content-Length`` but only half the body, then close."""
        return cls("truncate")

    @classmethod
    def drop(cls) -> Injection:
        """Close the connection without answering."""
        return cls("drop")

    @classmethod
    def retry_after(cls, seconds: float = 30.0) -> Injection:
        """429 with ``Retry-After: seconds`` (whole seconds, as most providers send it)."""
        return cls("retry_after", 429, seconds)

    @classmethod
    def stall(cls, seconds: float = 30.0) -> Injection:
        """Say nothing for ``seconds`` (or until the proxy stops), then pass the request on."""
        return cls("stall", seconds=seconds)

    @classmethod
    def status_error(cls, status: int = 500) -> Injection:
        """An immediate error with ``status`` (5xx, 400, 403…) in the OpenAI error shape."""
        return cls("status", status)

    @classmethod
    def burst(cls, n: int, status: int = 503) -> list[Injection]:
        """``n`` consecutive errors with ``status``: queue them with ``inject(*burst(...))``."""
        return [cls.status_error(status) for _ in range(n)]


@dataclass(frozen=True)
class ProxiedRequest:
    """One request as the proxy received it (header names lower-case)."""

    index: int
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


@dataclass(frozen=True)
class ProxyRecord:
    """What happened to one request, recorded when it arrives: the injection applied, and the
    status sent (-1 until the answer starts, 0 when the connection was closed without one)."""

    index: int
    path: str
    kind: str
    status: int


Plan = Callable[[ProxiedRequest], "Injection | None"]


class _Handler(LoopbackHandler):
    server_version = "FaultProxy/1.0"
    do_GET = do_POST = LoopbackHandler.receive

    def respond(self, method: str, body: bytes, headers: dict[str, str]) -> None:
        proxy = cast("FaultProxy", self.server.service)
        request, injection = proxy._admit(method, self.path, headers, body)
        self._apply(proxy, request, injection, lambda status: proxy._answered(request.index, status))

    def _apply(self, proxy: FaultProxy, request: ProxiedRequest, injection: Injection,
               answered: Callable[[int], None]) -> None:
        kind = injection.kind
        if kind == "stall":
            kind = "drop" if self.server.stopping.wait(injection.seconds) else "pass"
        if kind == "drop":
            answered(0)
            self.close_connection = True
        elif kind == "echo_auth":
            echoed = "; ".join(f"{name}: {request.headers[name]}" for name in ("authorization", "x-api-key")
                               if name in request.headers)
            self._error(answered, injection.status, f"Incorrect API key provided ({echoed}).", "invalid_api_key")
        elif kind in ("html", "malformed"):
            answered(200)
            if kind == "html":
                self.send_bytes(200, {"Content-Type": "text/html; charset=utf-8"}, _HTML_PAGE)
            else:
                self.send_bytes(200, {"Content-Type": "application/json"}, _MALFORMED_JSON)
        elif kind == "retry_after":
            self._error(answered, 429, "Rate limit reached for requests.", "rate_limit_exceeded",
                        {"Retry-After": f"{injection.seconds:g}"})
        elif kind == "status":
            self._error(answered, injection.status, f"Injected {injection.status}.", "server_error")
        else:
            status, reply_headers, reply = proxy._forward(request)
            answered(status)
            if kind == "truncate":
                self._send_truncated(status, reply_headers, reply)
            else:
                self.send_bytes(status, reply_headers, reply)

    def _error(self, answered: Callable[[int], None], status: int, message: str, code: str,
               extra: dict[str, str] | None = None) -> None:
        payload = {"error": {"message": message, "type": "invalid_request_error" if status < 500 else "server_error",
                             "param": None, "code": code}}
        answered(status)
        self.send_bytes(status, {"Content-Type": "application/json", **(extra or {})}, json.dumps(payload).encode())

    def _send_truncated(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.close_connection = True
        try:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
        except OSError:
            pass


class FaultProxy(LoopbackService):
    """Forward to ``upstream`` (``http://host:port``; paths are kept as they are), injecting faults.

    Point a client at ``proxy.url + "/v1"`` where it would use ``upstream + "/v1"``. ``plan`` may be
    reassigned at any time and is called from handler threads (it must be thread-safe).
    """

    handler_class = _Handler

    def __init__(self, upstream: str, plan: Plan | None = None, *, host: str = "127.0.0.1", port: int = 0):
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"upstream must be http://host:port, not {upstream!r}")
        self._upstream = (parts.hostname, parts.port or 80)
        self.plan = plan
        self._lock = threading.Lock()
        self._queue: deque[Injection] = deque()
        self._records: dict[int, ProxyRecord] = {}
        self._next_index = 0
        super().__init__(host=host, port=port)

    def inject(self, *injections: Injection) -> None:
        """Queue injections; each following request consumes one, in arrival order."""
        for item in injections:
            if not isinstance(item, Injection) or item.kind not in KINDS:
                raise TypeError(f"inject() takes Injection objects, not {item!r}")
        with self._lock:
            self._queue.extend(injections)

    @property
    def pending(self) -> int:
        """Queued injections not yet consumed."""
        with self._lock:
            return len(self._queue)

    @property
    def records(self) -> list[ProxyRecord]:
        with self._lock:
            return [self._records[i] for i in sorted(self._records)]

    def kinds(self) -> list[str]:
        """The injection kind applied to each request so far, in arrival order."""
        return [r.kind for r in self.records]

    def _admit(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[ProxiedRequest, Injection]:
        with self._lock:
            request = ProxiedRequest(self._next_index, method, path, headers, body)
            self._next_index += 1
            injection = self._queue.popleft() if self._queue else None
            plan = self.plan
        if injection is None and plan is not None:
            injection = plan(request)
        injection = injection or Injection.passthrough()
        with self._lock:
            self._records[request.index] = ProxyRecord(request.index, urlsplit(path).path, injection.kind, -1)
        return request, injection

    def _answered(self, index: int, status: int) -> None:
        with self._lock:
            self._records[index] = replace(self._records[index], status=status)

    def _forward(self, request: ProxiedRequest) -> tuple[int, dict[str, str], bytes]:
        """Send ``request`` upstream; a 502 when the upstream cannot be reached."""
        headers = {k: v for k, v in request.headers.items() if k not in _HOP_BY_HOP}
        conn = http.client.HTTPConnection(*self._upstream, timeout=60)
        try:
            conn.request(request.method, request.path, body=request.body or None, headers=headers)
            reply = conn.getresponse()
            body = reply.read()
            reply_headers = {k: v for k, v in reply.getheaders() if k.lower() not in _HOP_BY_HOP}
            return reply.status, reply_headers, body
        except (OSError, http.client.HTTPException) as exc:
            payload = {"error": {"message": f"upstream unreachable: {type(exc).__name__}", "type": "server_error"}}
            return 502, {"Content-Type": "application/json"}, json.dumps(payload).encode()
        finally:
            conn.close()
