"""Model calls' retries over the one loop (:mod:`skillopt_ci.core.retry`): exponential backoff with
jitter, honouring the server's Retry-After, retrying a :class:`ProviderError` marked retryable.

Every wait is capped by the caller's ``max_wait`` (``models.<role>.max_retry_wait`` in
skillopt.yml): a server may ask for a long pause, but how long a CI job sits idle is ours to decide.
A server that asks for more than the cap (an exhausted quota: ``Retry-After: 86400``) is not
retried at all: waiting the cap out would only meet the same answer. The error propagates at once
and :func:`wait_refused` turns it into the run's failure, naming when to come back.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from typing import TypeVar

from skillopt_ci.core.errors import ProviderError, RuntimeFailure
from skillopt_ci.core.retry import RetryPolicy

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


def asks_too_long(error: ProviderError, max_wait: float) -> bool:
    """Whether the server asked for a longer wait than the cap allows."""
    return error.retryable and error.retry_after is not None and error.retry_after > max_wait


def wait_refused(error: ProviderError, what: str, setting: str, max_wait: float,
                 now: datetime | None = None) -> RuntimeFailure:
    """The run's failure when ``error`` asks for more than ``max_wait`` seconds (exit 3): what
    was asked, until when (UTC), and the ``setting`` that would wait it out."""
    asked = error.retry_after or 0.0
    when = (now or datetime.now(timezone.utc)) + timedelta(seconds=asked)
    state = "quota exhausted" if error.kind == "rate_limit" or error.status == 429 else "provider unavailable"
    status = f" (HTTP {error.status})" if error.status else ""
    return RuntimeFailure(
        f"{what}: {state}{status}: retry after {when:%H:%M} UTC (it asks to wait {_span(asked)}, "
        f"more than {setting}: {max_wait:g} s)",
        hint=f"run again after {when:%Y-%m-%d %H:%M} UTC, or raise {setting} to wait it out",
    )


def _span(seconds: float) -> str:
    minutes = round(seconds / 60)
    if seconds < 120:
        return f"{seconds:g} s"
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"


def model_policy(max_retries: int, base: float = BASE_DELAY_S,
                 max_wait: float = MAX_RETRY_AFTER_S) -> RetryPolicy:
    """A model call's retries: ``max_retries`` after the first attempt; the server's Retry-After
    when given, else ``base`` × 2^attempt with ±50% jitter (at most 30 s); never more than
    ``max_wait``, and a Retry-After beyond it is not retried (see :func:`asks_too_long`)."""
    return RetryPolicy(max_retries + 1, base, max_wait, MAX_BACKOFF_S, jitter=0.5, hint_floor=False,
                       refuse_long=True)


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
    """Run ``call``; on a retryable :class:`ProviderError` wait and try again, per
    :func:`model_policy`. The last error propagates, at once if its Retry-After exceeds ``max_wait``."""
    policy, rng, attempt = model_policy(max_retries, base_delay, max_wait), rng or random.Random(), 1
    while True:
        try:
            return await call()
        except ProviderError as error:
            delay = policy.after(attempt, error.retryable, error.retry_after, rng)
            if delay is None:
                raise
            if on_retry is not None:
                on_retry(error, delay)
            await sleep(delay)
            attempt += 1
