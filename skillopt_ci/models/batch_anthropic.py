"""Anthropic Message Batches: ``messages.batches.create`` with one request per line (its
``params`` exactly the synchronous call's body), ``retrieve`` until ``processing_status`` is
``ended``, then ``results``. An errored request becomes the error its type gives a synchronous
call (``invalid_request_error`` is not retried, ``api_error`` and ``overloaded_error`` are); a
canceled or expired one is retryable.
"""

from __future__ import annotations

from typing import Any

from skillopt_ci.core.errors import ProviderError
from skillopt_ci.core.text import cut
from skillopt_ci.models.anthropic_backend import AnthropicBackend
from skillopt_ci.models.batch_protocol import BatchClient
from skillopt_ci.models.provider_http import sdk_errors, status_error

_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
           "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429, "api_error": 500,
           "overloaded_error": 529}


class AnthropicBatch(BatchClient):
    backend: AnthropicBackend

    async def submit(self, lines: list[tuple[str, dict[str, Any]]]) -> str:
        with sdk_errors(self._sdk):
            batch = await self._client.messages.batches.create(
                requests=[{"custom_id": cid, "params": body} for cid, body in lines])
        return str(batch.id)

    async def ended(self, batch_id: str) -> bool:
        with sdk_errors(self._sdk):
            batch = await self._client.messages.batches.retrieve(batch_id)
        return bool(batch.processing_status == "ended")

    async def results(self, batch_id: str) -> dict[str, bytes | ProviderError]:
        found: dict[str, bytes | ProviderError] = {}
        with sdk_errors(self._sdk):
            async for entry in await self._client.messages.batches.results(batch_id):
                found[str(entry.custom_id)] = _outcome(entry.result)
        return found


def _outcome(result: Any) -> bytes | ProviderError:
    if result.type == "succeeded":
        return str(result.message.to_json(indent=None)).encode("utf-8")
    if result.type == "errored":
        inner = getattr(result.error, "error", None)
        kind = str(getattr(inner, "type", "api_error"))
        return status_error(_STATUS.get(kind, 500), cut(getattr(inner, "message", kind), 300))
    return ProviderError(str(result.type), f"the request was {result.type} before it ran", retryable=True)
