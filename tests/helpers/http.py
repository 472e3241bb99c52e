"""Raw HTTP requests, for what the SDK clients would never send."""

from __future__ import annotations

import http.client
import json
import socket

from skillopt_ci.sim import (
    ScriptedModelServer,
)


def raw_get(port: int, host: str | None, path: str = "/api/runs") -> tuple[int, bytes]:
    """One GET with exactly the Host header given (none when ``host`` is None)."""
    lines = [f"GET {path} HTTP/1.1", "Connection: close"] + ([f"Host: {host}"] if host is not None else [])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def raw_post(
    srv: ScriptedModelServer, path: str, body: bytes, headers: dict[str, str] | None = None
) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", int(srv.url.rsplit(":", 1)[1]), timeout=5)
    try:
        conn.request("POST", path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()
