"""Our own retry for GitHub writes and reads (the loop of :mod:`skillopt_ci.core.retry`), not
PyGithub's ``retry`` (which the Action turns off against a loopback server, and whose defaults do
not retry a POST).

Retried, a bounded number of times with exponential backoff: a 5xx answer, a dropped or refused
connection (``OSError``, which ``requests``' errors are), and GitHub's *secondary* rate limit
(a 403/429 saying so, or carrying ``Retry-After``, whose wait is honoured up to ``max_wait``).
Not retried: the primary rate limit (it resets within the hour, too late for a job), 401, 403
(a missing permission), 404, 422 — retrying those only delays the same answer.

A retried POST whose connection dropped after GitHub acted on it can act twice; the sticky
comment is found by its marker and check runs are keyed by name, so a duplicate is harmless.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from skillopt_ci.core.retry import RetryPolicy

T = TypeVar("T")

SECONDARY_PHRASES = ("secondary rate limit", "please retry your request again later",
                     "please wait a few minutes before you try again")


def _message(exc: Any) -> str:
    data = getattr(exc, "data", None)
    return str(data.get("message", "")) if isinstance(data, dict) else str(data or "")


def _retry_after(exc: Any) -> float | None:
    headers = getattr(exc, "headers", None) or {}
    for key, value in headers.items():
        if key.lower() == "retry-after":
            try:
                return max(float(value), 0.0)
            except (TypeError, ValueError):
                return None
    return None


def retriable(exc: BaseException) -> tuple[bool, float | None]:
    """(worth another attempt, the server's ``Retry-After`` in seconds if it gave one)."""
    from github import GithubException

    if isinstance(exc, GithubException):
        status = exc.status or 0
        if status >= 500:
            return True, _retry_after(exc)
        if status in (403, 429):
            message = _message(exc).lower()
            if message.startswith("api rate limit exceeded"):
                return False, None  # primary limit: resets too late for this job
            secondary = any(p in message for p in SECONDARY_PHRASES)
            hint = _retry_after(exc)
            return secondary or hint is not None or status == 429, hint
        return False, None
    return isinstance(exc, OSError), None


def call_with_retry(policy: RetryPolicy, fn: Callable[..., T], *args: Any,
                    sleep: Callable[[float], None] = time.sleep, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, retried per ``policy``; the last exception propagates."""
    attempt = 1
    while True:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            wait = policy.after(attempt, *retriable(exc))
            if wait is None:
                raise
            sleep(wait)
            attempt += 1
