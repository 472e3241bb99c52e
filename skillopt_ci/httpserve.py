"""A threaded HTTP/1.1 server on loopback that stops cleanly, keep-alive connections included.

Subclass :class:`LoopbackHandler` (``do_GET = do_POST = LoopbackHandler.receive`` and a
``respond`` method; the service is ``self.server.service``) and :class:`LoopbackService`
(``handler_class = ThatHandler``), then ``with Service() as s: ... s.url ...``.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

__all__ = ["LoopbackHTTPServer", "LoopbackHandler", "LoopbackService"]

_S = TypeVar("_S", bound="LoopbackService")


class LoopbackHTTPServer(ThreadingHTTPServer):
    """A ``ThreadingHTTPServer`` that tracks its open connections so it can close them.

    ``stopping`` is set when the owning service starts to stop; handlers that wait may watch
    it (``self.server.stopping.wait(delay)``) to give up early.
    """

    daemon_threads = True
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-request (a cancelled call) is normal, not an error to print."""
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError, TimeoutError)):
            return
        super().handle_error(request, client_address)

    def __init__(
        self,
        address: tuple[str, int],
        handler_class: type[BaseHTTPRequestHandler],
        service: LoopbackService | None = None,
    ) -> None:
        self.service = service
        self.stopping = threading.Event()
        self._conn_lock = threading.Lock()
        self._conns: dict[socket.socket, threading.Thread] = {}
        super().__init__(address, handler_class)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self.process_request_thread, args=(request, client_address), daemon=True
        )
        with self._conn_lock:
            self._conns[request] = thread
        thread.start()

    def shutdown_request(self, request: Any) -> None:
        with self._conn_lock:
            self._conns.pop(request, None)
        super().shutdown_request(request)

    def close_connections(self, timeout: float = 5.0) -> None:
        """Shut down every open (keep-alive) connection; join each handler (``timeout`` s)."""
        with self._conn_lock:
            conns = list(self._conns.items())
        for sock, _ in conns:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for _, thread in conns:
            thread.join(timeout)


class LoopbackHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive, no Nagle delay, no logging, plus body reading and sending helpers.

    Verbs without a ``do_VERB`` get the standard 501; ``do_VERB = LoopbackHandler.receive``
    routes a verb to :meth:`respond`.
    """

    protocol_version = "HTTP/1.1"
    server_version = "skillopt-ci"
    sys_version = ""
    disable_nagle_algorithm = True
    server: LoopbackHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def receive(self) -> None:
        """Read the body and call :meth:`respond`; if it is shorter than announced, close the
        connection without answering."""
        body = self.read_body()
        if body is None:
            self.close_connection = True
            return
        self.respond(self.command, body, {k.lower(): v for k, v in self.headers.items()})

    def respond(self, method: str, body: bytes, headers: dict[str, str]) -> None:
        """Answer one request (``headers`` with lower-case names); subclasses override it."""
        raise NotImplementedError

    def read_body(self) -> bytes | None:
        """The request body (Content-Length or chunked); None if the client sent less than it
        announced, in which case the connection should be closed."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks: list[bytes] = []
            while True:
                line = self.rfile.readline()
                if not line:
                    return None
                size = int(line.split(b";")[0].strip() or b"0", 16)
                chunk = self.rfile.read(size + 2)[:size]
                if size == 0:
                    return b"".join(chunks)
                chunks.append(chunk)
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else b""
        return data if len(data) == length else None

    def send_bytes(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        """Send a whole response, adding Content-Length (except for 204). If the client has
        gone away the connection is marked for closing instead of raising."""
        try:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            if status != 204:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body and status != 204:
                self.wfile.write(body)
        except OSError:
            self.close_connection = True


class LoopbackService:
    """Serves ``handler_class`` on ``host:port`` (127.0.0.1 and an ephemeral port by default)
    in a daemon thread, between :meth:`start` and :meth:`stop` or as a context manager."""

    handler_class: type[BaseHTTPRequestHandler] = LoopbackHandler

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._host, self._port = host, port
        self._serve_lock = threading.Lock()
        self._httpd: LoopbackHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self: _S) -> _S:
        """Bind and serve in a daemon thread; does nothing if already running."""
        with self._serve_lock:
            if self._httpd is None:
                httpd = LoopbackHTTPServer((self._host, self._port), self.handler_class, self)
                host, port = str(httpd.server_address[0]), httpd.server_port
                self._bound(f"http://{host}:{port}")
                self._thread = threading.Thread(
                    target=httpd.serve_forever,
                    kwargs={"poll_interval": 0.05},
                    name=f"{type(self).__name__}:{port}",
                    daemon=True,
                )
                self._httpd = httpd
                self._thread.start()
        return self

    def _bound(self, url: str) -> None:
        """Called with the new :attr:`url` once bound, before any request is served."""

    def stop(self) -> None:
        """Stop serving, close open connections, join the threads and close the socket.
        Idempotent; the service can be started again."""
        with self._serve_lock:
            httpd, thread = self._httpd, self._thread
            self._httpd = self._thread = None
        if httpd is None or thread is None:
            return
        httpd.stopping.set()
        httpd.shutdown()
        httpd.close_connections()
        httpd.server_close()
        thread.join()

    def __enter__(self: _S) -> _S:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port; the service must be running."""
        return self._address()[1]

    @property
    def url(self) -> str:
        """``http://HOST:PORT``; the service must be running."""
        host, port = self._address()
        return f"http://{host}:{port}"

    def _address(self) -> tuple[str, int]:
        httpd = self._httpd
        if httpd is None:
            raise RuntimeError(f"{type(self).__name__} is not running; call start() first")
        host, port = httpd.server_address[:2]
        return str(host), int(port)
