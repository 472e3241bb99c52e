"""A provider's rate limit, played by the scripted server: token buckets of requests and tokens
per minute, refilled continuously, with OpenAI's headers on every answer.

A request that finds a bucket short gets a 429 with ``retry-after`` (the time until it would
fit) and is not answered; one that fits takes from both buckets and is answered with
``x-ratelimit-limit-*``, ``x-ratelimit-remaining-*`` and ``x-ratelimit-reset-*`` (the time until
the bucket is full again, in OpenAI's ``1.5s`` form). A request costs its prompt's
whitespace-separated tokens plus its ``max_tokens`` (or 16), as a provider counts the tokens it
reserves. Thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class RateLimit:
    """``burst_s``: how many seconds' worth of budget the buckets hold (a provider's is a whole
    minute; a short test needs less, or the first minute is never limited)."""

    requests_per_minute: float
    tokens_per_minute: float | None = None
    burst_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    limited: int = 0  # 429s sent
    _requests: float = field(init=False)
    _tokens: float = field(init=False)
    _at: float = field(init=False)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._requests = self._cap(self.requests_per_minute)
        self._tokens = self._cap(self.tokens_per_minute or 0.0)
        self._at = self.clock()

    def _cap(self, per_minute: float) -> float:
        return max(1.0, per_minute * self.burst_s / 60)

    def _refill(self, now: float) -> None:
        elapsed = now - self._at
        self._at = now
        rpm = self.requests_per_minute
        self._requests = min(self._cap(rpm), self._requests + elapsed * rpm / 60)
        if self.tokens_per_minute:
            tpm = self.tokens_per_minute
            self._tokens = min(self._cap(tpm), self._tokens + elapsed * tpm / 60)

    def take(self, tokens: int) -> tuple[bool, dict[str, str]]:
        """Whether a request of ``tokens`` may be answered now, and the headers to send."""
        with self._lock:
            now = self.clock()
            self._refill(now)
            short = [(1 - self._requests) * 60 / self.requests_per_minute] if self._requests < 1 else []
            if self.tokens_per_minute and self._tokens < tokens:
                short.append((tokens - self._tokens) * 60 / self.tokens_per_minute)
            if short:
                self.limited += 1
                wait = max(short)
                return False, {"retry-after": f"{wait:.3f}", "retry-after-ms": str(round(wait * 1000)),
                               **self._headers()}
            self._requests -= 1
            if self.tokens_per_minute:
                self._tokens -= tokens
            return True, self._headers()

    def _headers(self) -> dict[str, str]:
        headers = {"x-ratelimit-limit-requests": str(int(self.requests_per_minute)),
                   "x-ratelimit-remaining-requests": str(int(self._requests)),
                   "x-ratelimit-reset-requests": _duration((self._cap(self.requests_per_minute) - self._requests)
                                                           * 60 / self.requests_per_minute)}
        if self.tokens_per_minute:
            headers |= {"x-ratelimit-limit-tokens": str(int(self.tokens_per_minute)),
                        "x-ratelimit-remaining-tokens": str(int(self._tokens)),
                        "x-ratelimit-reset-tokens": _duration((self._cap(self.tokens_per_minute) - self._tokens)
                                                              * 60 / self.tokens_per_minute)}
        return headers


def _duration(seconds: float) -> str:
    return f"{max(0.0, seconds):.3f}s"
