"""Adaptive concurrency: how many model calls may be in flight, adapted to the provider.

A provider's rate limit is not known in advance and is shared with everything else using the key,
so a fixed concurrency is either too timid or a stream of 429s. :class:`AdaptiveLimit` starts at
the configured concurrency (its ceiling) and follows the provider:

- **Multiplicative decrease** on a rate-limit answer (429, Anthropic's 529): the limit halves
  (never below 1), once per wave — further 429s from calls that were already in flight when it
  halved do not halve it again — and no new call *to the same endpoint* starts before the
  server's ``retry-after`` (a pause the provider asked of one model and key holds no other; a
  wait beyond the cap pauses nothing: that call fails the run at once, see :mod:`retry`).
- **Additive increase** on success: +1 after a full limit's worth of successes in a row of calls
  started under the current limit, up to the ceiling.
- **The provider's own counters**, where it sends them (OpenAI ``x-ratelimit-remaining-requests``
  / ``-tokens`` and ``x-ratelimit-reset-*``; Anthropic ``anthropic-ratelimit-*-remaining`` /
  ``-reset``): when no request or no token is left in the window, new calls wait for its reset
  instead of spending a 429 on finding out.

The limiter only decides when a call may start; retries stay in :mod:`retry`.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
MAX_PAUSE_S = 60.0  # longest wait the provider's counters may impose on new calls


@dataclass(frozen=True)
class RateInfo:
    """What a response said about the rate limit window (``None``: not said)."""

    remaining_requests: int | None = None
    remaining_tokens: int | None = None
    reset_s: float | None = None  # seconds until the exhausted counter resets

    @property
    def exhausted(self) -> bool:
        return self.remaining_requests == 0 or self.remaining_tokens == 0


def parse_duration(text: str) -> float | None:
    """OpenAI's reset format: ``1s``, ``6m0s``, ``20ms``, ``1h2m3.5s``."""
    parts = _DURATION.findall(text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        try:
            return max(0.0, float(text))
        except ValueError:
            return None
    return sum(float(n) * _UNIT[u] for n, u in parts)


def _reset(value: str | None, now: float) -> float | None:
    if not value:
        return None
    seconds = parse_duration(value)
    if seconds is not None:
        return seconds
    try:  # Anthropic: an RFC 3339 time
        return max(0.0, datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() - now)
    except ValueError:
        return None


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def rate_info(headers: Mapping[str, str], now: float | None = None) -> RateInfo | None:
    """The rate-limit counters of a response's headers (lower-case names), or ``None``."""
    now = time.time() if now is None else now
    for prefix_r, prefix_t, reset_r, reset_t in (
        ("x-ratelimit-remaining-requests", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-requests",
         "x-ratelimit-reset-tokens"),
        ("anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-tokens-remaining",
         "anthropic-ratelimit-requests-reset", "anthropic-ratelimit-tokens-reset"),
    ):
        requests, tokens = _int(headers.get(prefix_r)), _int(headers.get(prefix_t))
        if requests is None and tokens is None:
            continue
        resets = [r for r in (_reset(headers.get(reset_r), now) if requests == 0 else None,
                              _reset(headers.get(reset_t), now) if tokens == 0 else None) if r is not None]
        return RateInfo(requests, tokens, max(resets) if resets else None)
    return None


class AdaptiveLimit:
    """An asyncio concurrency limit between 1 and ``ceiling`` that adapts (see the module doc).
    ``adaptive=False`` makes it a plain fixed limit. :meth:`release` is synchronous, so a call
    cancelled mid-flight always gives its slot back. ``clock`` is injectable for tests."""

    def __init__(self, ceiling: int, *, adaptive: bool = True, clock: Callable[[], float] = time.monotonic):
        self.ceiling = max(1, ceiling)
        self.limit = float(self.ceiling)
        self.adaptive = adaptive
        self.in_flight = 0
        self.decreases = 0
        self.lowest = self.ceiling
        self.clock = clock
        self._not_before: dict[str, float] = {}  # by endpoint: a provider pauses only its own calls
        self._wave = 0  # bumped at each decrease; a call started before it cannot decrease again
        self._successes = 0
        self._waiters: list[asyncio.Future[None]] = []

    async def acquire(self, key: str = "") -> int:
        """Wait for a slot (and for any pause of endpoint ``key``); returns the wave the call
        started in (pass it to :meth:`release`)."""
        while True:
            wait = self._not_before.get(key, 0.0) - self.clock()
            if wait <= 0 and self.in_flight < int(self.limit):
                self.in_flight += 1
                return self._wave
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait({waiter}, timeout=wait if wait > 0 else None)
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def release(self, wave: int, *, limited: bool = False, retry_after: float | None = None,
                rate: RateInfo | None = None, max_pause: float = MAX_PAUSE_S, key: str = "") -> None:
        """End a call to endpoint ``key``: ``limited`` when the provider answered with a rate
        limit. A wait the provider asks for holds new calls to ``key`` at most ``max_pause``
        seconds (the role's ``max_retry_wait``, as for its retries); a longer one holds none."""
        self.in_flight -= 1
        if self.adaptive:
            self._adapt(wave, limited, retry_after, rate, max_pause, key)
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _pause(self, key: str, seconds: float, max_pause: float) -> None:
        if seconds <= max_pause:
            until = self.clock() + min(seconds, MAX_PAUSE_S)
            self._not_before[key] = max(self._not_before.get(key, 0.0), until)

    def _adapt(self, wave: int, limited: bool, retry_after: float | None, rate: RateInfo | None,
               max_pause: float, key: str) -> None:
        if limited:
            self._successes = 0
            if wave == self._wave:  # the first rate limit of this wave
                self.limit = max(1.0, float(int(self.limit) // 2))
                self.lowest = min(self.lowest, int(self.limit))
                self._wave += 1
                self.decreases += 1
            if retry_after:
                self._pause(key, retry_after, max_pause)
            return
        if rate is not None and rate.exhausted and rate.reset_s:
            self._pause(key, min(rate.reset_s, max_pause), max_pause)
        if wave != self._wave:  # started under the limit before the last decrease: says nothing of this one
            return
        self._successes += 1
        if self._successes >= int(self.limit) and self.limit < self.ceiling:
            self.limit += 1
            self._successes = 0
