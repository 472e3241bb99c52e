"""The one retry loop: how many attempts, how long to wait before each retry, what a server's hint
(``Retry-After``) does to that wait, and when to give up.

:meth:`RetryPolicy.after` takes the loop's one decision after each failure: the wait before the
next attempt, or ``None`` when the error should propagate. The callers only sleep (GitHub's sync
calls in :mod:`skillopt_ci.github.retry`, the providers' async ones in :mod:`skillopt_ci.models.retry`)
and say which errors are worth another attempt. Pure: chance enters only through the ``rng`` given.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` in all (1: no retry). Before retry ``n`` (from 1) the backoff is
    ``backoff`` × 2^(n-1), at most ``max_backoff``, times a factor drawn within ±``jitter``. A
    server's hint raises the backoff to it (``hint_floor``) or replaces it. Every wait is at most
    ``max_wait``; with ``refuse_long`` a hint beyond it ends the retries at once (waiting the cap
    out would only meet the same answer)."""

    attempts: int = 3
    backoff: float = 2.0
    max_wait: float = 30.0
    max_backoff: float = math.inf
    jitter: float = 0.0
    hint_floor: bool = True
    refuse_long: bool = False

    def wait(self, attempt: int, hint: float | None, rng: random.Random | None = None) -> float:
        """Seconds to wait before attempt ``attempt + 1`` (``attempt`` counts from 1)."""
        if hint is not None and not self.hint_floor:
            return min(hint, self.max_wait)
        base = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
        if self.jitter:
            base *= (rng or random.Random()).uniform(1 - self.jitter, 1 + self.jitter)
        if hint is not None:
            base = max(base, hint)
        return max(0.0, min(base, self.max_wait))

    def after(self, attempt: int, again: bool, hint: float | None,
              rng: random.Random | None = None) -> float | None:
        """After failed attempt ``attempt`` (``again``: worth another; ``hint``: the server's wait,
        if it gave one): the seconds to wait before the next attempt, or ``None`` to give up."""
        refused = self.refuse_long and hint is not None and hint > self.max_wait
        if not again or refused or attempt >= max(self.attempts, 1):
            return None
        return self.wait(attempt, hint, rng)
