"""``skillopt-ci view``: a local web server over the run directories under one folder.

Routes (GET only):

- ``/`` — the viewer page (the same front end as the HTML report, in live mode);
- ``/api/runs`` — ``{"root", "runs": [{"id", "kind", "title", "in_progress", "modified"}]}``;
- ``/api/run?id=<id>`` — the bundle of one run (see :mod:`bundle`), rebuilt on every request so a
  run in progress shows its latest checkpoint.

A run id is a path relative to the root; one that leaves the root, or is not a run directory, is
a 404. The server binds 127.0.0.1 unless told otherwise, sends a Content-Security-Policy that
allows nothing but itself, and never writes a file.

DNS rebinding: a web page on another site can point its own host name at 127.0.0.1 and read the
viewer with the browser's same-origin blessing. So a request is answered only when its ``Host``
header names the server as bound: ``127.0.0.1:PORT`` or ``localhost:PORT`` (or, when bound to
another interface on purpose, that address or any IP literal, never a DNS name), with the bound
port; anything else gets 421 and no data.
"""

from __future__ import annotations

import ipaddress
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from skillopt_ci.core.redact import redact
from skillopt_ci.engine.rundir import run_kind
from skillopt_ci.httpserve import LoopbackHandler, LoopbackService
from skillopt_ci.viewer.bundle import build_bundle, find_runs, read_json, train_in_progress
from skillopt_ci.viewer.html import LIVE_CSP, render_live_page

_SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class _Handler(LoopbackHandler):
    do_GET = LoopbackHandler.receive

    def respond(self, method: str, body: bytes, headers: dict[str, str]) -> None:
        service: ViewerServer = self.server.service  # type: ignore[assignment]  # the viewer's own handler
        url = urlsplit(self.path)
        if not service.host_allowed(headers.get("host")):
            self.close_connection = True
            self._send(421, "text/plain; charset=utf-8", b"unexpected Host header: open the viewer at its own address\n")
            return
        try:
            if url.path == "/":
                self._send(200, "text/html; charset=utf-8", service.page().encode(), csp=True)
            elif url.path == "/api/runs":
                self._json(200, service.runs())
            elif url.path == "/api/run":
                run_id = (parse_qs(url.query).get("id") or [""])[0]
                run = service.resolve(run_id)
                if run is None:
                    self._json(404, {"error": f"no run {run_id!r}"})
                else:
                    self._json(200, build_bundle(run))
            else:
                self._json(404, {"error": "not found"})
        except Exception as exc:  # a broken run directory must not take the viewer down
            self._json(500, {"error": f"{type(exc).__name__}: {exc}"})

    def _json(self, status: int, data: Any) -> None:
        # Redacted like an HTML report's data: a run directory may come from another process.
        body = redact(json.dumps(data, ensure_ascii=False))
        self._send(status, "application/json; charset=utf-8", body.encode())

    def _send(self, status: int, content_type: str, body: bytes, csp: bool = False) -> None:
        headers = {"Content-Type": content_type, **_SECURITY_HEADERS}
        if csp:
            headers["Content-Security-Policy"] = LIVE_CSP
        self.send_bytes(status, headers, body)


class ViewerServer(LoopbackService):
    """Serves the runs under ``root``."""

    handler_class = _Handler

    def __init__(self, root: Path, *, host: str = "127.0.0.1", port: int = 0):
        super().__init__(host=host, port=port)
        self.root = root.resolve()
        self._page: str | None = None
        self._allowed_hosts: frozenset[str] = frozenset()
        self._any_ip = False
        self._listening_port = 0  # not _port: that is the port LoopbackService binds

    def _bound(self, url: str) -> None:
        parts = urlsplit(url)
        host, port = (parts.hostname or "").lower(), parts.port or 80
        loopback = host in ("localhost", "") or _is_loopback(host)
        names = {host, "localhost", "127.0.0.1"} if loopback else {host}
        self._listening_port = port
        self._allowed_hosts = frozenset(names)
        self._any_ip = not loopback  # bound to a LAN address or 0.0.0.0 on purpose: IP literals only

    def host_allowed(self, header: str | None) -> bool:
        """Whether a request's ``Host`` header names this server (see the module docstring)."""
        if not header:
            return False
        parts = urlsplit("//" + header.strip().lower())
        try:
            port = parts.port or 80
        except ValueError:
            return False
        host = parts.hostname or ""
        if port != self._listening_port:
            return False
        return host in self._allowed_hosts or (self._any_ip and _is_ip(host))

    def page(self) -> str:
        if self._page is None:
            self._page = render_live_page()
        return self._page

    def runs(self) -> dict[str, Any]:
        out = []
        for path, kind in find_runs(self.root):
            marker = path / ("gate.json" if kind == "gate" else "run.json")
            in_progress = not (path / ("gate.json" if kind == "gate" else "summary.json")).exists()
            if kind == "train":
                state = read_json(path / "state.json") or {}
                in_progress = train_in_progress(path, state.get("phase"))
            out.append({
                "id": path.relative_to(self.root).as_posix() or ".",
                "kind": kind,
                "title": f"{kind}: {path.name}",
                "in_progress": in_progress,
                "modified": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(marker.stat().st_mtime)),
            })
        return {"root": str(self.root), "runs": out}

    def resolve(self, run_id: str) -> Path | None:
        """The run directory for ``run_id``, or None when it is outside the root or not a run."""
        if not run_id or "\0" in run_id:
            return None
        candidate = (self.root / run_id).resolve()
        if candidate != self.root and self.root not in candidate.parents:
            return None
        return candidate if candidate.is_dir() and run_kind(candidate) else None


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _is_loopback(host: str) -> bool:
    return _is_ip(host) and ipaddress.ip_address(host).is_loopback
