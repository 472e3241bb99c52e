"""The batch APIs of the scripted model server: OpenAI files and batches (also under Azure's
``/openai/`` root) and Anthropic Message Batches.

Each line of a batch is answered when the batch is created, through the same scripted answering
the synchronous endpoints use (policy, injected faults, fault plan; each line is a recorded call),
so a fault becomes a line of the error file (OpenAI) or an ``errored`` result (Anthropic). A batch
stays in progress for :attr:`BatchStore.delay` seconds after its creation (read at each status
check, so a test may hold a batch and release it later). :attr:`BatchStore.uploads`,
:attr:`~BatchStore.creates` and :attr:`~BatchStore.retrieves` count what clients asked for.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.parser import BytesParser
from email.policy import default as email_policy
from typing import Any
from urllib.parse import parse_qs, urlsplit

from skillopt_ci.sim.protocols import WireResponse, error_response, json_response

Answer = Callable[[str, bytes, dict[str, str], "str | None"], WireResponse]

_OPENAI = re.compile(r"^/(v1|openai)/(files|batches)(?:/([^/]+))?(?:/(content|cancel))?$")
_ANTHROPIC = re.compile(r"^/v1/messages/batches(?:/([^/]+))?(?:/(results|cancel))?$")


@dataclass
class _Batch:
    id: str
    kind: str  # "openai" or "anthropic"
    created: float
    lines: list[tuple[str, WireResponse]]
    endpoint: str = ""
    input_file_id: str = ""
    ended: bool = False
    cancelled: bool = False
    failed: str | None = None  # why validation refused the whole batch (OpenAI "failed")
    files: dict[str, str] = field(default_factory=dict)  # "output"/"error" -> file id


class BatchStore:
    """Files and batches of one scripted server; thread-safe."""

    def __init__(self, answer: Answer, base_url: Callable[[], str]):
        self._answer = answer
        self._base_url = base_url
        self._lock = threading.Lock()
        self.delay = 0.0
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, _Batch] = {}
        self.uploads = self.creates = self.retrieves = 0

    def respond(self, method: str, target: str, raw: bytes, headers: dict[str, str]) -> WireResponse | None:
        """The response to a batch route, or ``None`` when ``target`` is not one."""
        url = urlsplit(target)
        if (match := _ANTHROPIC.match(url.path)) is not None:
            return self._anthropic(method, match.group(1), match.group(2), raw, headers)
        if (match := _OPENAI.match(url.path)) is None:
            return None
        root, kind, ident, action = match.groups()
        protocol = "azure" if root == "openai" else "openai"
        if protocol == "azure" and "api-version" not in parse_qs(url.query):
            return error_response(protocol, 400, "Missing required query parameter: api-version")
        if kind == "files":
            return self._files(method, ident, action, raw, headers, protocol)
        return self._openai_batches(method, ident, action, raw, headers, protocol)

    # --- OpenAI -----------------------------------------------------------------------------

    def _files(self, method: str, ident: str | None, action: str | None, raw: bytes, headers: dict[str, str],
               protocol: str) -> WireResponse:
        if method == "POST" and ident is None:
            form = _multipart(raw, headers.get("content-type", ""))
            if form.get("purpose", (None, b""))[1] != b"batch" or "file" not in form:
                return error_response(protocol, 400, "A 'file' with purpose 'batch' is required.")
            file_id = f"file-{uuid.uuid4().hex[:24]}"
            with self._lock:
                self.files[file_id] = form["file"][1]
                self.uploads += 1
            return json_response(protocol, 200, _file_object(file_id, form["file"][0] or "upload.jsonl",
                                                             len(form["file"][1]), "batch"))
        with self._lock:
            data = self.files.get(ident or "")
        if data is None:
            return error_response(protocol, 404, f"No such File object: {ident}")
        if method == "GET" and action == "content":
            return WireResponse(200, data, {"Content-Type": "application/octet-stream"})
        return json_response(protocol, 200, _file_object(ident or "", "file.jsonl", len(data), "batch"))

    def _openai_batches(self, method: str, ident: str | None, action: str | None, raw: bytes,
                        headers: dict[str, str], protocol: str) -> WireResponse:
        if method == "POST" and ident is None:
            return self._openai_create(raw, headers, protocol)
        with self._lock:
            batch = self.batches.get(ident or "")
            if batch is not None and method == "POST" and action == "cancel":
                batch.cancelled = True
            if batch is not None and method == "GET":
                self.retrieves += 1
        if batch is None:
            return error_response(protocol, 404, f"No batch found with id '{ident}'.")
        return json_response(protocol, 200, self._openai_object(batch))

    def _openai_create(self, raw: bytes, headers: dict[str, str], protocol: str) -> WireResponse:
        body = json.loads(raw or b"{}")
        endpoint = body.get("endpoint")
        wanted = "/chat/completions" if protocol == "azure" else "/v1/chat/completions"
        if endpoint != wanted or body.get("completion_window") != "24h":
            return error_response(protocol, 400, f"ScriptedModelServer batches need endpoint {wanted} and "
                                                 "completion_window 24h.")
        with self._lock:
            data = self.files.get(str(body.get("input_file_id")))
        if data is None:
            return error_response(protocol, 400, f"No such File object: {body.get('input_file_id')}")
        batch = _Batch(f"batch_{uuid.uuid4().hex[:24]}", "openai", time.monotonic(), [], endpoint,
                       str(body["input_file_id"]))
        seen: set[str] = set()
        for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            item = json.loads(line)
            cid = str(item.get("custom_id"))
            if item.get("url") != endpoint or item.get("method") != "POST" or cid in seen:
                batch.failed = f"line {number}: url must be {endpoint}, method POST, custom_id unique"
                break
            seen.add(cid)
            model = item.get("body", {}).get("model") if protocol == "azure" else None
            batch.lines.append((cid, self._answer(protocol, json.dumps(item.get("body")).encode(), headers, model)))
        with self._lock:
            self.batches[batch.id] = batch
            self.creates += 1
        return json_response(protocol, 200, self._openai_object(batch))

    def _openai_object(self, batch: _Batch) -> dict[str, Any]:
        self._finish(batch)
        ok = sum(1 for _, r in batch.lines if r.status == 200 and r.body is not None)
        status = ("failed" if batch.failed else "cancelled" if batch.cancelled and batch.ended
                  else "completed" if batch.ended else "in_progress")
        created = int(time.time())
        return {
            "id": batch.id, "object": "batch", "endpoint": batch.endpoint, "input_file_id": batch.input_file_id,
            "completion_window": "24h", "status": status, "created_at": created,
            "errors": {"object": "list", "data": [{"code": "invalid_request", "message": batch.failed}]}
            if batch.failed else None,
            "output_file_id": batch.files.get("output"), "error_file_id": batch.files.get("error"),
            "completed_at": created if status == "completed" else None,
            "request_counts": {"total": len(batch.lines), "completed": ok if batch.ended else 0,
                               "failed": len(batch.lines) - ok if batch.ended else 0},
            "metadata": None,
        }

    def _finish(self, batch: _Batch) -> None:
        """End the batch once its delay has passed: write its output and error files."""
        with self._lock:
            if batch.ended or batch.failed or (time.monotonic() - batch.created < self.delay and not batch.cancelled):
                return
            batch.ended = True
            kept = [] if batch.cancelled else batch.lines
            output = [_openai_line(cid, r) for cid, r in kept if r.status == 200 and r.body is not None]
            errors = [_openai_line(cid, r) for cid, r in kept if not (r.status == 200 and r.body is not None)]
            for name, lines in (("output", output), ("error", errors)):
                if lines:
                    file_id = f"file-{uuid.uuid4().hex[:24]}"
                    self.files[file_id] = "".join(json.dumps(x) + "\n" for x in lines).encode()
                    batch.files[name] = file_id

    # --- Anthropic --------------------------------------------------------------------------

    def _anthropic(self, method: str, ident: str | None, action: str | None, raw: bytes,
                   headers: dict[str, str]) -> WireResponse:
        if method == "POST" and ident is None:
            requests = json.loads(raw or b"{}").get("requests")
            if not isinstance(requests, list) or not requests:
                return error_response("anthropic", 400, "requests: a non-empty list is required")
            created = _Batch(f"msgbatch_{uuid.uuid4().hex[:24]}", "anthropic", time.monotonic(), [])
            for item in requests:
                body = json.dumps(item.get("params")).encode()
                created.lines.append((str(item.get("custom_id")), self._answer("anthropic", body, headers, None)))
            with self._lock:
                self.batches[created.id] = created
                self.creates += 1
            return json_response("anthropic", 200, self._anthropic_object(created))
        with self._lock:
            batch = self.batches.get(ident or "")
            if batch is not None and action == "cancel":
                batch.cancelled = True
            if batch is not None and method == "GET" and action is None:
                self.retrieves += 1
        if batch is None:
            return error_response("anthropic", 404, f"message batch {ident} not found")
        if action == "results":
            if not self._ended(batch):
                return error_response("anthropic", 400, "the batch is still being processed")
            lines = "".join(json.dumps(_anthropic_line(cid, r, batch.cancelled)) + "\n" for cid, r in batch.lines)
            return WireResponse(200, lines.encode(), {"Content-Type": "application/binary"})
        return json_response("anthropic", 200, self._anthropic_object(batch))

    def _ended(self, batch: _Batch) -> bool:
        with self._lock:
            if not batch.ended and (batch.cancelled or time.monotonic() - batch.created >= self.delay):
                batch.ended = True
            return batch.ended

    def _anthropic_object(self, batch: _Batch) -> dict[str, Any]:
        ended = self._ended(batch)
        ok = sum(1 for _, r in batch.lines if r.status == 200 and r.body is not None)
        now = datetime.now(timezone.utc).isoformat()
        counts = {"processing": 0 if ended else len(batch.lines), "succeeded": ok if ended and not batch.cancelled else 0,
                  "errored": len(batch.lines) - ok if ended and not batch.cancelled else 0,
                  "canceled": len(batch.lines) if ended and batch.cancelled else 0, "expired": 0}
        return {"id": batch.id, "type": "message_batch", "processing_status": "ended" if ended else "in_progress",
                "request_counts": counts, "created_at": now, "expires_at": now, "ended_at": now if ended else None,
                "archived_at": None, "cancel_initiated_at": None,
                "results_url": f"{self._base_url()}/v1/messages/batches/{batch.id}/results" if ended else None}


def _multipart(raw: bytes, content_type: str) -> dict[str, tuple[str | None, bytes]]:
    """Fields of a multipart/form-data body: name -> (file name, bytes)."""
    message = BytesParser(policy=email_policy).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if isinstance(name, str):
            payload = part.get_payload(decode=True)  # bytes, or None for an empty part
            fields[name] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
    return fields


def _file_object(file_id: str, name: str, size: int, purpose: str) -> dict[str, Any]:
    return {"id": file_id, "object": "file", "bytes": size, "created_at": int(time.time()), "filename": name,
            "purpose": purpose, "status": "processed"}


def _openai_line(cid: str, response: WireResponse) -> dict[str, Any]:
    line: dict[str, Any] = {"id": f"batch_req_{uuid.uuid4().hex[:24]}", "custom_id": cid, "response": None,
                            "error": None}
    if response.body is None:
        line["error"] = {"code": "server_error", "message": "The server dropped this request."}
    else:
        line["response"] = {"status_code": response.status, "request_id": f"req_{uuid.uuid4().hex[:24]}",
                            "body": _json_or_text(response.body)}
    return line


def _anthropic_line(cid: str, response: WireResponse, cancelled: bool) -> dict[str, Any]:
    if cancelled:
        return {"custom_id": cid, "result": {"type": "canceled"}}
    if response.body is not None and response.status == 200:
        return {"custom_id": cid, "result": {"type": "succeeded", "message": _json_or_text(response.body)}}
    error = _json_or_text(response.body or b"")
    if not isinstance(error, dict) or "error" not in error:
        error = {"type": "error", "error": {"type": "api_error", "message": "The server dropped this request."}}
    return {"custom_id": cid, "result": {"type": "errored", "error": error}}


def _json_or_text(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")
