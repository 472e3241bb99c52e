"""``eval --batch`` answered wholly from the response cache sent nothing through a batch, so its
table does not say "(batch price)"; against an endpoint without the batch API, the error says batch."""

from __future__ import annotations

import http.server
import threading

from helpers.batch import FAST, KEYS, batch_project, summary
from helpers.cli import run_cli
from helpers.project import write_project


def test_a_batch_run_answered_wholly_from_the_cache_does_not_claim_the_batch_price(tmp_path, server):
    project = batch_project(tmp_path / "proj", server)
    first = run_cli("eval", "ticket-triage", "--out", str(tmp_path / "a"), "--batch", "--quiet", cwd=project, env=KEYS)
    assert first.code == 0 and "(batch price)" in first.out, first.err
    again = run_cli("eval", "ticket-triage", "--out", str(tmp_path / "b"), "--batch", "--quiet", cwd=project, env=KEYS)
    assert again.code == 0, again.err
    assert server.batches.creates == 1 and summary(tmp_path / "b")["cache_hits"] == 12  # the premise
    assert "(batch price)" not in again.out
    assert "pricing" not in summary(tmp_path / "b")


class NoBatchAPI(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint without the files and batches routes: 404 for everything."""

    def _not_found(self) -> None:
        # Read the request first: a 404 sent while the client still uploads its batch file resets
        # the connection under load, which the client reports as a connection error, not a 404.
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"detail": "Not Found"}'
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _not_found

    def log_message(self, *args) -> None:
        pass


def test_batch_against_an_endpoint_without_the_batch_api_says_batch(tmp_path):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NoBatchAPI)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        project = write_project(tmp_path / "p", base, {"provider": "openai", "base_url": base}, batch=FAST)
        res = run_cli("eval", "ticket-triage", "--batch", "--cache", "off", "--quiet", cwd=project, env=KEYS)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert res.code == 3, res.err
    first = res.err.splitlines()[0]
    assert "through the batch API: " in first
    assert "does this endpoint offer the batch API? run without --batch" in first
