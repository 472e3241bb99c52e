"""One place for retries: exponential backoff with jitter, honouring the server's Retry-After.

Every wait is capped by the caller's ``max_wait`` (``models.<role>.max_retry_wait`` in
skillopt.yml): a server may ask for a long pause, but how long a CI job sits idle is ours to decide.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import TypeVar

from skillopt_ci.core.errors import ProviderError

T = TypeVar("T")

BASE_DELAY_S = 0.5
MAX_BACKOFF_S = 30.0
MAX_RETRY_AFTER_S = 300.0  # the default max_retry_wait
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def backoff_delay(
    attempt: int,
    error: ProviderError,
    rng: random.Random,
    base: float = BASE_DELAY_S,
    max_wait: float = MAX_RETRY_AFTER_S,
) -> float:
    """Delay before retry number ``attempt`` (0-based): the server's Retry-After when given,
    else ``base`` × 2^attempt with ±50% jitter (at most 30 s); never more than ``max_wait``."""
    if error.retry_after is not None:
        return min(error.retry_after, max_wait)
    return min(min(MAX_BACKOFF_S, base * 2**attempt) * rng.uniform(0.5, 1.5), max_wait)


async def with_retries(
    call: Callable[[], Awaitable[T]],
    max_retries: int,
    *,
    on_retry: Callable[[ProviderError, float], None] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    rng: random.Random | None = None,
    base_delay: float = BASE_DELAY_S,
    max_wait: float = MAX_RETRY_AFTER_S,
) -> T:
    """Run ``call``; on a retryable :class:`ProviderError` wait and try again, up to
    ``max_retries`` more times. The last error propagates."""
    rng = rng or random.Random()
    attempt = 0
    while True:
        try:
            return await call()
        except ProviderError as error:
            if not error.retryable or attempt >= max_retries:
                raise
            delay = backoff_delay(attempt, error, rng, base_delay, max_wait)
            if on_retry is not None:
                on_retry(error, delay)
            await sleep(delay)
            attempt += 1
