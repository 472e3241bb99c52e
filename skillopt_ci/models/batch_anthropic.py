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
from skillopt_ci.models.batch_protocol import SpeaksBackend
from skillopt_ci.models.provider_http import status_error, to_provider_error

_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
           "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429, "api_error": 500,
           "overloaded_error": 529}


class AnthropicBatch(SpeaksBackend):
    provider = "anthropic"

    def __init__(self, backend: AnthropicBackend):
        self.backend = backend
        self._client: Any = backend._client
        self._sdk: Any = backend._sdk

    async def submit(self, lines: list[tuple[str, dict[str, Any]]]) -> str:
        try:
            batch = await self._client.messages.batches.create(
                requests=[{"custom_id": cid, "params": body} for cid, body in lines])
        except self._sdk.APIError as exc:
            raise to_provider_error(self._sdk, exc) from None
        return str(batch.id)

    async def ended(self, batch_id: str) -> bool:
        try:
            batch = await self._client.messages.batches.retrieve(batch_id)
        except self._sdk.APIError as exc:
            raise to_provider_error(self._sdk, exc) from None
        return bool(batch.processing_status == "ended")

    async def results(self, batch_id: str) -> dict[str, bytes | ProviderError]:
        found: dict[str, bytes | ProviderError] = {}
        try:
            async for entry in await self._client.messages.batches.results(batch_id):
                found[str(entry.custom_id)] = _outcome(entry.result)
        except self._sdk.APIError as exc:
            raise to_provider_error(self._sdk, exc) from None
        return found


def _outcome(result: Any) -> bytes | ProviderError:
    if result.type == "succeeded":
        return str(result.message.to_json(indent=None)).encode("utf-8")
    if result.type == "errored":
        inner = getattr(result.error, "error", None)
        kind = str(getattr(inner, "type", "api_error"))
        return status_error(_STATUS.get(kind, 500), cut(getattr(inner, "message", kind), 300))
    return ProviderError(str(result.type), f"the request was {result.type} before it ran", retryable=True)
