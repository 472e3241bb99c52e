"""The OpenAI Batch API (and Azure OpenAI's global batch deployments, through the Azure client).

Submitting uploads the lines as a JSONL file with purpose ``batch`` and creates a batch on the
Chat Completions endpoint with the 24-hour completion window. Each line's body is exactly what
the synchronous call posts. A finished batch's output file holds the answered lines, its error
file the others: a line with a ``status_code`` becomes the error that status gives a synchronous
call; an expired line (the window passed) is retryable.
"""

from __future__ import annotations

import json
from typing import Any

from skillopt_ci.core.errors import ProviderError
from skillopt_ci.core.text import cut
from skillopt_ci.models.batch_protocol import BatchClient
from skillopt_ci.models.openai_backend import OpenAIBackend
from skillopt_ci.models.provider_http import sdk_errors, status_error

ENDED = ("completed", "failed", "expired", "cancelled")


class OpenAIBatch(BatchClient):
    def __init__(self, backend: OpenAIBackend):
        super().__init__(backend)
        # Azure's batch lines and endpoint name the path below its deployment-less /openai root
        self.url = "/chat/completions" if backend.provider == "azure-openai" else "/v1/chat/completions"
        self._batches: dict[str, Any] = {}

    async def submit(self, lines: list[tuple[str, dict[str, Any]]]) -> str:
        data = "".join(json.dumps({"custom_id": cid, "method": "POST", "url": self.url, "body": body},
                                  ensure_ascii=False) + "\n" for cid, body in lines).encode("utf-8")
        with sdk_errors(self._sdk):
            uploaded = await self._client.files.create(file=("requests.jsonl", data, "application/jsonl"),
                                                       purpose="batch")
            batch = await self._client.batches.create(input_file_id=uploaded.id, endpoint=self.url,
                                                      completion_window="24h")
        return str(batch.id)

    async def ended(self, batch_id: str) -> bool:
        with sdk_errors(self._sdk):
            batch = await self._client.batches.retrieve(batch_id)
        self._batches[batch_id] = batch
        return batch.status in ENDED

    async def results(self, batch_id: str) -> dict[str, bytes | ProviderError]:
        batch = self._batches[batch_id]
        if batch.status == "failed":  # refused as a whole (validation): every line gets why
            errors = (batch.errors.data if batch.errors else None) or []
            message = "; ".join(str(e.message) for e in errors[:3]) or "the batch failed"
            return {"*": ProviderError("bad_request", f"batch {batch_id} failed: {message}")}
        found: dict[str, bytes | ProviderError] = {}
        for file_id in (batch.error_file_id, batch.output_file_id):  # an answer wins over an error
            if file_id:
                for line in (await self._content(file_id)).splitlines():
                    if line.strip():
                        cid, outcome = _line_outcome(json.loads(line))
                        found[cid] = outcome
        return found

    async def _content(self, file_id: str) -> bytes:
        with sdk_errors(self._sdk):
            return bytes((await self._client.files.content(file_id)).content)


def _line_outcome(line: dict[str, Any]) -> tuple[str, bytes | ProviderError]:
    """One line of an output or error file: the response body, or the error it stands for."""
    cid = str(line.get("custom_id"))
    response = line.get("response") or {}
    status = response.get("status_code")
    if status == 200 and not line.get("error"):
        return cid, json.dumps(response.get("body")).encode("utf-8")
    error = line.get("error") or {}
    if isinstance(status, int) and status != 200:
        body = response.get("body") or {}
        inner = body.get("error", body) if isinstance(body, dict) else {}
        message = cut(inner.get("message") if isinstance(inner, dict) else body, 300)
        return cid, status_error(status, message)
    code, message = str(error.get("code") or "batch"), cut(error.get("message") or "no answer", 300)
    if code == "batch_expired":
        return cid, ProviderError("expired", f"the batch window ended before this request ran: {message}",
                                  retryable=True)
    return cid, ProviderError("batch", f"{code}: {message}", retryable=code in ("batch_cancelled", "server_error"))
