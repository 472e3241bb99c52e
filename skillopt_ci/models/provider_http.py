"""What every backend does over HTTP through its SDK client: the one template of a call
(:class:`PostingBackend`: build the body, POST it with the raw body and the rate-limit counters
back, read the reply), and an SDK's exception, an HTTP status or an unreadable body as a
:class:`~skillopt_ci.core.errors.ProviderError` (:func:`to_provider_error`, :func:`status_error`,
:func:`malformed`). The openai and anthropic SDKs share the exception names, so one mapping
serves both; the batch clients map a line's status the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from skillopt_ci.core.errors import ProviderError
from skillopt_ci.core.text import cut
from skillopt_ci.models.base import Completion, Message, ToolCall, ToolSpec, Usage
from skillopt_ci.models.limiter import RateInfo, rate_info
from skillopt_ci.models.retry import RETRYABLE_STATUS, parse_retry_after
from skillopt_ci.models.structured import reply_text


def _response_class() -> Any:
    """The HTTP response class both SDKs return for ``cast_to`` (their HTTP library's), or bytes."""
    try:
        import httpx2

        return httpx2.Response
    except ImportError:  # another HTTP library: the body only, without the rate-limit headers
        return bytes


async def post_raw(client: Any, path: str, body: dict[str, Any]) -> tuple[bytes, RateInfo | None]:
    """POST through the SDK client (its auth, routing and errors), returning the raw body and the
    rate-limit counters of the response's headers."""
    raw = await client.post(path, cast_to=_response_class(), body=body)
    if isinstance(raw, bytes):
        return raw, None
    return raw.content, rate_info(raw.headers)


class PostingBackend:
    """The skeleton of one call (:meth:`complete`, a :class:`~skillopt_ci.models.base.Backend`'s
    one attempt) that every backend shares. A backend sets ``path`` (the route it posts to),
    ``_client`` (its SDK client) and ``_sdk`` (the SDK module, for its error classes) and gives
    the two hooks a batch line reuses too: ``request_body`` (the JSON it posts) and ``parse`` (the
    completion in a response body, or :func:`malformed`)."""

    provider: str
    path: str
    _client: Any
    _sdk: Any
    request_body: Callable[..., dict[str, Any]]
    parse: Callable[[bytes, float], Completion]

    async def complete(self, messages: list[Message], params: dict[str, Any], tools: Sequence[ToolSpec] = (),
                       reply: Any = None) -> Completion:
        body = self.request_body(messages, params, tools, reply)
        started = time.perf_counter()
        with sdk_errors(self._sdk):
            content, rate = await post_raw(self._client, self.path, body)
        return replace(self.read(content, time.perf_counter() - started, reply), rate=rate)

    def read(self, content: bytes, latency: float, reply: Any = None) -> Completion:
        """The completion in a response body (from the endpoint or a batch's output), with the
        asked-for reply as its text (:func:`~skillopt_ci.models.structured.reply_text`)."""
        done = self.parse(content, latency)
        if reply is None:
            return done
        text, calls = reply_text(done.text, done.tool_calls, reply, self.provider)
        return replace(done, text=text, tool_calls=calls)

    async def aclose(self) -> None:
        await self._client.close()


@contextmanager
def sdk_errors(sdk: Any) -> Iterator[None]:
    """An SDK call inside: its ``APIError`` comes out as the :class:`ProviderError` it stands for."""
    try:
        yield
    except sdk.APIError as exc:
        raise to_provider_error(sdk, exc) from None


def completion(data: dict[str, Any], latency: float, text: str, calls: Sequence[ToolCall], finish: str | None,
               tokens: tuple[str, str] = ("input_tokens", "output_tokens")) -> Completion:
    """What a response body said, with the token counts its ``usage`` holds under ``tokens``."""
    usage = data.get("usage") or {}
    return Completion(text=text, usage=Usage(usage.get(tokens[0]), usage.get(tokens[1])), finish_reason=finish,
                      latency_s=latency, tool_calls=tuple(calls))


def malformed(content: bytes) -> ProviderError:
    snippet = cut(content[:4096].decode("utf-8", "replace"), 120)
    return ProviderError("malformed", f"unreadable response body: {snippet!r}", retryable=True)


def to_provider_error(sdk: Any, exc: Exception) -> ProviderError:
    """Map an openai/anthropic SDK exception to a :class:`ProviderError` (both SDKs share names)."""
    if isinstance(exc, sdk.APITimeoutError):
        return ProviderError("timeout", "the request timed out", retryable=True)
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f": {type(cause).__name__}" if cause else ""
        return ProviderError("connection", f"could not reach the server{detail}", retryable=True)
    if isinstance(exc, sdk.APIStatusError):
        return status_error(exc.status_code, _error_message(exc), parse_retry_after(exc.response.headers))
    if isinstance(exc, sdk.APIResponseValidationError):
        return ProviderError("malformed", cut(exc, 200), retryable=True)
    return ProviderError("provider", cut(exc, 200))


def status_error(status: int, message: str, retry_after: float | None = None) -> ProviderError:
    """The error for an HTTP status (a response's, or a batch line's ``status_code``)."""
    if status == 429:
        return ProviderError("rate_limit", message, status=status, retryable=True, retry_after=retry_after)
    if status in (401, 403):
        return ProviderError("auth", f"{status} {message} (check the API key)", status=status)
    if status in RETRYABLE_STATUS or status >= 500:
        return ProviderError("server", f"{status} {message}", status=status, retryable=True, retry_after=retry_after)
    return ProviderError("bad_request", f"{status} {message}", status=status)


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return cut(inner["message"], 300)
    return cut(getattr(exc, "message", exc), 300)
