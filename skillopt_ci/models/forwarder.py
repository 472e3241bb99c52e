"""The local forwarding endpoint: agent processes hold a per-rollout credential, never a key.

A :class:`Forwarder` serves HTTP on 127.0.0.1 (an ephemeral port) and, when asked, also on a Unix
socket in a private folder (``socket_path``; a sandbox without network binds that folder in and
reaches it through :mod:`skillopt_ci.models.forward_relay`). A copy of the relay sits beside the socket (``relay_path``). ``issue(provider, api_key,
upstream)`` returns a :class:`Grant`: a random credential (256 bits) and the local ``base_url``
to give the agent in place of the provider's URL and key. A request carrying a live credential
(``Authorization: Bearer``, ``x-api-key`` or ``api-key``, as the SDKs and CLIs send it) has every
credential header replaced by the real key in the provider's own shape (``x-api-key`` for
Anthropic, ``api-key`` for Azure OpenAI, ``Authorization: Bearer`` otherwise) and goes to the
grant's upstream with the same path and query (Azure's ``api-version`` included); the response
comes back as it arrives (an SSE stream chunk by chunk, never buffered whole).

Refused without reaching the provider: no credential, an unknown or revoked one (401, in the
provider's error shape), a path outside the grant's upstream base path (404), and a call past the
grant's ``max_calls`` (429 with a message naming the cap, which the CLIs report; ``refused``
counts them: the per-rollout cap holds whatever the CLI's own limits do). An upstream that cannot
be reached is a 502. Per grant it counts the calls that reached the provider, those that
failed (a status of 400 or more, or a broken connection), and the tokens the responses report
(:mod:`skillopt_ci.models.forward_usage`). ``revoke(grant)`` makes the credential worthless at
once; ``stop()`` revokes every grant. Nothing is logged: a key or credential never leaves the
headers it travels in. The upstream is reached with the standard library (no proxy settings).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import secrets
import shutil
import socket
import socketserver
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from skillopt_ci.core.records import Usage
from skillopt_ci.httpserve import LoopbackHandler, LoopbackHTTPServer, LoopbackService
from skillopt_ci.models import forward_relay
from skillopt_ci.models.forward_usage import UsageMeter

CREDENTIAL_PREFIX = "skillopt-rollout-"
SOCKET_NAME = "forward.sock"
RELAY_NAME = "relay.py"
UPSTREAM_TIMEOUT_S = 900.0  # one model call (a long generation streams well within it)
CHUNK = 65_536
CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key")
# Not forwarded as sent: hop-by-hop headers, the ones rebuilt for the upstream, and the
# credential. Accept-Encoding is dropped so the usage can be read from the body.
DROPPED_REQUEST = frozenset({"connection", "keep-alive", "proxy-authorization", "proxy-connection", "te",
                             "trailer", "transfer-encoding", "upgrade", "host", "content-length",
                             "accept-encoding", "expect", *CREDENTIAL_HEADERS})
DROPPED_RESPONSE = frozenset({"connection", "keep-alive", "proxy-authenticate", "trailer", "transfer-encoding",
                              "upgrade", "content-length", "date", "server"})
ANTHROPIC_ERRORS = {401: "authentication_error", 429: "rate_limit_error", 502: "api_error"}
OPENAI_CODES = {401: "invalid_api_key", 429: "rate_limit_exceeded", 502: "bad_gateway"}
DEFAULT_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}


@dataclass
class Grant:
    """One rollout's credential and what its requests did. ``base_url`` is what the agent gets
    instead of the provider's URL (the upstream's path on the forwarder's origin)."""

    credential: str
    provider: str
    upstream: str
    base_url: str
    socket_base_url: str | None = None  # the same path behind the Unix socket's relay origin
    calls: int = 0
    errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    usage_reported: bool = False
    revoked: bool = False
    max_calls: int | None = None  # calls forwarded at most; the rest are refused (None: no cap)
    refused: int = 0  # calls refused at the cap
    _admitted: int = field(default=0, repr=False)
    _key: str = field(default="", repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __repr__(self) -> str:  # the credential is short-lived, the key secret: neither is shown
        return f"Grant(provider={self.provider!r}, upstream={self.upstream!r}, calls={self.calls})"

    @property
    def usage(self) -> Usage:
        """The tokens counted; ``Usage()`` (unknown) when no response reported any."""
        if not self.usage_reported:
            return Usage()
        return Usage(self.input_tokens, self.output_tokens)

    def path_for(self, origin: str) -> str:
        """``base_url`` moved to another origin (``http://127.0.0.1:<port>`` of a relay)."""
        return origin.rstrip("/") + urlsplit(self.upstream).path.rstrip("/")

    def admit(self) -> bool:
        """Take one call of the cap (False: the cap is reached, the call is refused and counted)."""
        with self._lock:
            if self.max_calls is not None and self._admitted >= self.max_calls:
                self.refused += 1
                return False
            self._admitted += 1
            return True

    def _counted(self, status: int, tokens: tuple[int | None, int | None]) -> None:
        with self._lock:
            self.calls += 1
            self.errors += status == 0 or status >= 400
            if tokens[0] is not None or tokens[1] is not None:
                self.usage_reported = True
                self.input_tokens += tokens[0] or 0
                self.output_tokens += tokens[1] or 0


class _Handler(LoopbackHandler):
    server_version = "skillopt-ci-forwarder"
    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = LoopbackHandler.receive

    def respond(self, method: str, body: bytes, headers: dict[str, str]) -> None:
        forwarder: Forwarder = self.server.service  # type: ignore[assignment]  # the Forwarder's own handler
        credential, carrier = _credential(headers)
        grant = forwarder.lookup(credential)
        if grant is None:
            self._refuse(401, carrier, "the credential is missing, unknown or revoked: skillopt-ci issues one "
                                       "per rollout and revokes it when the rollout ends")
            return
        target = urlsplit(grant.upstream)
        path = self.path if self.path.startswith("/") else "/" + self.path
        prefix = target.path.rstrip("/")
        if prefix and not (path == prefix or path.startswith(prefix + "/") or path.startswith(prefix + "?")):
            self._refuse(404, carrier, f"this credential is for {prefix}/… only")
            return
        if not grant.admit():
            self._refuse(429, carrier, f"this rollout has made its {grant.max_calls} model calls, the most its "
                                       "environment allows (max_model_calls, by default max_turns); "
                                       "no more are forwarded")
            return
        _forward(self, grant, method, path, body, headers)

    def _refuse(self, status: int, carrier: str, message: str) -> None:
        text = f"skillopt-ci forwarder: {message}"
        if carrier == "x-api-key":
            kind = ANTHROPIC_ERRORS.get(status, "not_found_error")
            payload: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": text}}
        else:
            code = OPENAI_CODES.get(status, "not_found")
            payload = {"error": {"message": text, "type": "invalid_request_error", "code": code}}
        self.send_bytes(status, {"Content-Type": "application/json"}, json.dumps(payload).encode())


def _credential(headers: dict[str, str]) -> tuple[str, str]:
    """The credential a request carries and the header it came in (``""``: none)."""
    for name in CREDENTIAL_HEADERS:
        value = headers.get(name, "").strip()
        if name == "authorization":
            scheme, _, value = value.partition(" ")
            value = value.strip() if scheme.lower() == "bearer" else ""
        if value:
            return value, name
    return "", ""


def _upstream_headers(grant: Grant, headers: dict[str, str], host: str) -> dict[str, str]:
    sent = {k: v for k, v in headers.items() if k not in DROPPED_REQUEST}
    sent["host"] = host
    sent["accept-encoding"] = "identity"
    if grant.provider == "anthropic":
        sent["x-api-key"] = grant._key
    elif grant.provider == "azure-openai":
        sent["api-key"] = grant._key
    else:
        sent["authorization"] = f"Bearer {grant._key}"
    return sent


def _forward(handler: _Handler, grant: Grant, method: str, path: str, body: bytes,
             headers: dict[str, str]) -> None:
    target = urlsplit(grant.upstream)
    kind = http.client.HTTPSConnection if target.scheme == "https" else http.client.HTTPConnection
    connection = kind(target.hostname or "", target.port, timeout=UPSTREAM_TIMEOUT_S)
    try:
        try:
            connection.request(method, path, body=body or None,
                               headers=_upstream_headers(grant, headers, target.netloc.rpartition("@")[2]))
            response = connection.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            grant._counted(0, (None, None))
            handler._refuse(502, "x-api-key" if grant.provider == "anthropic" else "",
                            f"the model endpoint could not be reached ({type(exc).__name__})")
            return
        meter = UsageMeter(response.getheader("content-type", ""))
        counted: list[int] = []

        def count(status: int) -> None:
            if not counted:  # once per call, whichever comes first: the end or a broken stream
                counted.append(status)
                grant._counted(status, meter.finish())

        if not _relay_response(handler, method, response, meter, lambda: count(response.status)):
            count(0)
    finally:
        connection.close()


def _relay_response(handler: _Handler, method: str, response: http.client.HTTPResponse,
                    meter: UsageMeter, count: Callable[[], None]) -> bool:
    """Send the upstream's response on as it arrives (False: cut short). ``count`` runs before
    the response's last byte goes out, so a client that has its answer sees it counted: a chunked
    stream is held back only by its terminator, a sized body by its last chunk."""
    length = response.getheader("content-length")
    bodiless = method == "HEAD" or response.status in (204, 304) or 100 <= response.status < 200
    chunked = not bodiless and (length is None or response.getheader("transfer-encoding") is not None)
    out = handler.wfile
    try:
        handler.send_response(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in DROPPED_RESPONSE:
                handler.send_header(name, value)
        if chunked:
            handler.send_header("Transfer-Encoding", "chunked")
        elif not bodiless:
            handler.send_header("Content-Length", str(length))
        handler.end_headers()
        out.flush()
        held = b""
        while not bodiless:
            chunk = response.read1(CHUNK)
            if not chunk:
                break
            meter.feed(chunk)
            if chunked:
                out.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            else:
                out.write(held)
                held = chunk
            out.flush()
        count()
        out.write(b"0\r\n\r\n" if chunked else held)
        out.flush()
    except (OSError, http.client.HTTPException):
        handler.close_connection = True  # either side hung up mid-stream
        return False
    if response.will_close:
        handler.close_connection = True
    return True


class _UnixHandler(_Handler):
    disable_nagle_algorithm = False  # TCP_NODELAY is a TCP option: not on a Unix socket


class _UnixHTTPServer(LoopbackHTTPServer):
    """The same threaded server on a Unix socket (``address`` is its path)."""

    address_family = socket.AF_UNIX
    allow_reuse_address = False

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)  # HTTPServer's version reads a host and a port
        self.server_name, self.server_port = "localhost", 0


class Forwarder(LoopbackService):
    """The forwarding endpoint; see the module docstring. ``unix_socket=True`` also serves on
    ``socket_path`` (a socket in a fresh folder only this user can enter)."""

    handler_class = _Handler

    def __init__(self, *, unix_socket: bool = False) -> None:
        super().__init__()
        self._grants: dict[str, Grant] = {}
        self._lock = threading.Lock()
        self._want_unix = unix_socket
        self._unix: _UnixHTTPServer | None = None
        self._unix_thread: threading.Thread | None = None
        self.socket_dir: Path | None = None

    @property
    def socket_path(self) -> Path | None:
        return self.socket_dir / SOCKET_NAME if self.socket_dir is not None else None

    @property
    def relay_path(self) -> Path | None:
        """A copy of :mod:`~skillopt_ci.models.forward_relay` beside the socket."""
        return self.socket_dir / RELAY_NAME if self.socket_dir is not None else None

    def start(self) -> Forwarder:
        super().start()
        with self._lock:
            if self._want_unix and self._unix is None:
                self.socket_dir = Path(tempfile.mkdtemp(prefix="skillopt-forward-"))
                # Enter-only, no listing, and a socket anyone who reaches it may connect to: a
                # sandboxed command may run as another uid, and the socket is worthless without
                # a live credential, as the TCP port is.
                os.chmod(self.socket_dir, 0o711)
                socket_path = self.socket_dir / SOCKET_NAME
                # A socket's path, where the TCP server's signature names a (host, port) pair.
                self._unix = _UnixHTTPServer(str(socket_path), _UnixHandler, self)  # type: ignore[arg-type]
                os.chmod(socket_path, 0o666)
                relay = self.socket_dir / RELAY_NAME
                shutil.copyfile(forward_relay.__file__, relay)  # so a sandbox needs only this folder bound
                os.chmod(relay, 0o644)
                self._unix_thread = threading.Thread(target=self._unix.serve_forever, kwargs={"poll_interval": 0.05},
                                                     name="Forwarder:unix", daemon=True)
                self._unix_thread.start()
        return self

    def stop(self) -> None:
        with self._lock:
            for grant in self._grants.values():
                grant.revoked = True
            self._grants.clear()
            unix, thread, folder = self._unix, self._unix_thread, self.socket_dir
            self._unix = self._unix_thread = self.socket_dir = None
        super().stop()
        if unix is not None and thread is not None:
            unix.stopping.set()
            unix.shutdown()
            unix.close_connections()
            unix.server_close()
            thread.join()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    def issue(self, provider: str, api_key: str, upstream: str | None, *, relay_origin: str | None = None,
              max_calls: int | None = None) -> Grant:
        """A new live credential for one rollout against ``upstream`` (the provider's base URL;
        ``None``: the provider's public one). ``relay_origin``: the origin a relay inside a
        sandbox listens on, for ``socket_base_url``; ``max_calls``: the most calls forwarded."""
        upstream = (upstream or DEFAULT_URLS.get(provider) or "").rstrip("/")
        if urlsplit(upstream).scheme not in ("http", "https") or not urlsplit(upstream).hostname:
            raise ValueError(f"the forwarder needs an http(s) base URL for {provider}, got {upstream!r}")
        grant = Grant(CREDENTIAL_PREFIX + secrets.token_urlsafe(32), provider, upstream, "", max_calls=max_calls,
                      _key=api_key)
        grant.base_url = grant.path_for(self.url)
        if relay_origin is not None:
            grant.socket_base_url = grant.path_for(relay_origin)
        with self._lock:
            self._grants[grant.credential] = grant
        return grant

    def revoke(self, grant: Grant) -> None:
        """Make ``grant``'s credential worthless from now on (requests already forwarded finish)."""
        with self._lock:
            grant.revoked = True
            self._grants.pop(grant.credential, None)

    def lookup(self, credential: str) -> Grant | None:
        if not credential:
            return None
        with self._lock:
            grant = self._grants.get(credential)
        return grant if grant is not None and not grant.revoked else None

    def __enter__(self) -> Forwarder:
        return self.start()


_SHARED: dict[str, Forwarder] = {}
_SHARED_LOCK = threading.Lock()


def shared_forwarder() -> Forwarder:
    """The process's one forwarder (TCP and Unix socket), started on first use; its threads are
    daemons and its socket folder is removed at exit."""
    with _SHARED_LOCK:
        forwarder = _SHARED.get("forwarder")
        if forwarder is None:
            forwarder = Forwarder(unix_socket=True).start()
            _SHARED["forwarder"] = forwarder
            import atexit

            atexit.register(_stop_shared)
        return forwarder


def _stop_shared() -> None:
    with _SHARED_LOCK:
        forwarder = _SHARED.pop("forwarder", None)
    if forwarder is not None:
        with contextlib.suppress(Exception):
            forwarder.stop()
