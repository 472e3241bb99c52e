"""Budgets that hold with calls in flight: every call reserves its estimated cost before it is sent.

Contract:
- :class:`SpendGuard` keeps the reservations of one :class:`~skillopt_ci.models.pool.ModelPool`.
  While limits are set (:meth:`SpendGuard.limited`), a call that misses the cache first
  :meth:`~SpendGuard.reserve`\\ s its :class:`CallEstimate`: prompt tokens estimated from the text
  it sends (:func:`skillopt_ci.core.skill.estimate_tokens`), the answer at the request's
  ``max_tokens`` (else :data:`ASSUMED_ANSWER_TOKENS`). What was spent plus what is reserved plus
  this call must stay within the limit. A call that fits only once calls in flight have landed
  waits for them; one that would pass the limit even then is not sent: :class:`BudgetReached`.
- When the call returns (or fails), its reservation is released and its true cost is counted
  by the pool; the guard never holds a reservation of a finished call. So N concurrent callers
  cannot each send past the line: the spend stays within the limit but for the error of the
  estimates of the calls in flight.
- The estimate learns from the answers: the first call of a role under a budget is sent alone,
  and once calls of a role have landed, its prompt estimates are scaled by the ratio of the
  provider's prompt tokens to the estimated ones (never below 1: an estimator that counts more
  than the provider stops a run early, never late); an answer the request does not cap is
  expected as long as the longest one billed so far. So where the estimator undercounts by a
  steady ratio, the spend passes the budget by at most the first call's error (and by the
  growth of an uncapped answer over the longest seen: set ``max_tokens`` for a hard bound).
- Cached answers reserve nothing and cost nothing. Without limits the guard does no work.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from skillopt_ci.core.errors import RuntimeFailure
from skillopt_ci.core.messages import Message, ToolSpec
from skillopt_ci.core.skill import estimate_tokens

ASSUMED_ANSWER_TOKENS = 512  # a call's answer, when its params cap none (as the cost preflight assumes)
IMAGE_TOKENS = 1_000  # an image part, whatever its size (providers bill a few hundred to ~1,500)
MESSAGE_TOKENS = 4  # a message's role and separators


@dataclass(frozen=True)
class Limits:
    """What this process may spend: dollars and tokens (input + output); ``None``: no limit."""

    max_dollars: float | None = None
    max_tokens: int | None = None

    @property
    def active(self) -> bool:
        return self.max_dollars is not None or self.max_tokens is not None


@dataclass(frozen=True)
class CallEstimate:
    """What a call is expected to cost before it is sent (``usd`` ``None``: price unknown)."""

    input_tokens: int
    output_tokens: int
    usd: float | None
    answer_assumed: bool = False  # the answer at ASSUMED_ANSWER_TOKENS: the request capped none

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class Spent:
    """What was spent so far (true costs of answered calls), as the guard reads it."""

    usd: float
    tokens: int


class BudgetReached(RuntimeFailure):
    """A call was not sent: its reservation would pass a budget. A budget stop (exit 3), not an
    errored rollout; ``kind`` is ``dollar`` or ``token``."""

    def __init__(self, kind: str, estimate: CallEstimate, reserved: CallEstimate, in_flight: int):
        self.kind = kind
        self.estimate = estimate
        self.reserved = reserved
        self.in_flight = in_flight
        super().__init__(f"{kind} budget reached: {self.refusal()}")

    def refusal(self) -> str:
        """Why the call was refused: its estimate, and what calls in flight held reserved."""
        if self.kind == "dollar":
            text = f"a call estimated at {usd(self.estimate.usd or 0.0)} would pass it"
            held = usd(self.reserved.usd or 0.0)
        else:
            text = f"a call estimated at {self.estimate.tokens:,} tokens would pass it"
            held = f"{self.reserved.tokens:,} tokens"
        if self.in_flight:
            text += f" with {held} reserved by {self.in_flight} call(s) in flight"
        return text


def usd(amount: float) -> str:
    """Dollars as a stop line shows them: four decimals, six below a cent (a cheap model's calls)."""
    return f"${amount:.4f}" if abs(amount) >= 0.01 or amount == 0 else f"${amount:.6f}"


@functools.lru_cache(maxsize=256)
def _text_tokens(text: str) -> int:
    return estimate_tokens(text)  # a skill is re-sent with every call: count each text once


def estimate_call(messages: Sequence[Message], tools: Sequence[ToolSpec], answer_tokens: int | None,
                  price: tuple[float, float] | None) -> CallEstimate:
    """The estimated cost of sending ``messages`` (and offering ``tools``) and receiving an answer of
    ``answer_tokens`` (``None``: :data:`ASSUMED_ANSWER_TOKENS`) at ``price`` (USD per 1M tokens)."""
    prompt = 0
    for message in messages:
        prompt += MESSAGE_TOKENS + _text_tokens(message.text) + IMAGE_TOKENS * len(message.images)
        prompt += sum(_text_tokens(c.name + c.arguments) for c in message.tool_calls)
    prompt += sum(_text_tokens(f"{t.name} {t.description} {t.parameters}") for t in tools)
    answer = answer_tokens or ASSUMED_ANSWER_TOKENS
    usd = None if price is None else (prompt * price[0] + answer * price[1]) / 1_000_000
    return CallEstimate(prompt, answer, usd, answer_assumed=not answer_tokens)


@dataclass(frozen=True)
class Reservation:
    role: str
    estimate: CallEstimate
    raw_input_tokens: int  # the prompt estimate before calibration


@dataclass
class _Calibration:
    """What a role's landed calls were billed against their prompt estimates."""

    estimated: int = 0
    billed: int = 0
    landed: int = 0
    in_flight: int = 0
    longest_answer: int | None = None  # the most output tokens a landed call was billed

    @property
    def factor(self) -> float:
        return max(1.0, self.billed / self.estimated) if self.estimated else 1.0


class SpendGuard:
    """Reservations of the calls in flight against the current :class:`Limits`.

    ``spent`` reads what was truly spent so far (the pool's ledger, calls made by agent CLIs
    included). Single-threaded: every caller runs on the one event loop, so reserve and release
    need no lock (nothing awaits between the check and the reservation)."""

    def __init__(self, spent: Callable[[], Spent]):
        self._spent = spent
        self.limits = Limits()
        self._usd = 0.0
        self._tokens = 0
        self.in_flight = 0
        self._calibration: dict[str, _Calibration] = {}
        self._landed: asyncio.Event | None = None  # set when a call in flight lands

    @property
    def reserved(self) -> CallEstimate:
        return CallEstimate(0, self._tokens, self._usd)

    @contextlib.contextmanager
    def limited(self, limits: Limits) -> Iterator[None]:
        """Hold calls to ``limits`` (in this process's terms) inside the block; the previous
        limits come back after it."""
        previous, self.limits = self.limits, limits
        try:
            yield
        finally:
            self.limits = previous

    async def reserve(self, role: str, raw: CallEstimate, price: tuple[float, float] | None, *,
                      first_alone: bool = True) -> Reservation | None:
        """Reserve the estimate ``raw`` of a ``role`` call (scaled by what that role's calls were
        billed so far); ``None`` when nothing is limited. A call that fits only once calls in
        flight have landed waits for them (it may still fit: estimates are upper bounds); one that
        would pass the budget even so raises :class:`BudgetReached`. ``first_alone`` sends a
        role's first call alone (off for provider batches, whose answers take long to land)."""
        calibration = self._calibration.setdefault(role, _Calibration())
        while self.limits.active:
            estimate = _scaled(raw, calibration, price)
            over = self._over(estimate, self.reserved)
            if over is not None and (self.in_flight == 0 or self._over(estimate, CallEstimate(0, 0, 0.0)) is not None):
                raise BudgetReached(over, estimate, self.reserved, self.in_flight)
            # the first call of a role goes alone: the estimates of the next ones learn from its bill
            if over is None and (calibration.landed or not calibration.in_flight or not first_alone):
                self._usd += estimate.usd or 0.0
                self._tokens += estimate.tokens
                self.in_flight += 1
                calibration.in_flight += 1
                return Reservation(role, estimate, raw.input_tokens)
            if self._landed is None:
                self._landed = asyncio.Event()
            await self._landed.wait()  # a call in flight lands: its true cost replaces its reservation
        return None

    def _over(self, estimate: CallEstimate, reserved: CallEstimate) -> str | None:
        """Which budget sending ``estimate`` beside ``reserved`` would pass (``dollar``/``token``)."""
        limits, spent = self.limits, self._spent()
        if limits.max_tokens is not None and spent.tokens + reserved.tokens + estimate.tokens > limits.max_tokens:
            return "token"
        if limits.max_dollars is not None and estimate.usd is not None and (
                spent.usd + (reserved.usd or 0.0) + estimate.usd > limits.max_dollars or spent.usd >= limits.max_dollars):
            return "dollar"
        return None

    def release(self, reservation: Reservation | None, billed_input_tokens: int | None = None,
                billed_output_tokens: int | None = None) -> None:
        """Drop a finished call's reservation (its true cost is counted by the pool); with the
        tokens the provider billed, the role's later estimates learn from them."""
        if reservation is None:
            return
        calibration = self._calibration.setdefault(reservation.role, _Calibration())
        calibration.landed += 1
        calibration.in_flight -= 1
        if billed_input_tokens is not None and reservation.raw_input_tokens > 0:
            calibration.estimated += reservation.raw_input_tokens
            calibration.billed += billed_input_tokens
        if billed_output_tokens is not None:
            calibration.longest_answer = max(calibration.longest_answer or 0, billed_output_tokens)
        self._usd = max(0.0, self._usd - (reservation.estimate.usd or 0.0))
        self._tokens = max(0, self._tokens - reservation.estimate.tokens)
        self.in_flight -= 1
        if self._landed is not None:
            self._landed.set()  # wake the calls waiting for room; each checks again
            self._landed = None


def _scaled(raw: CallEstimate, calibration: _Calibration, price: tuple[float, float] | None) -> CallEstimate:
    """``raw`` as the role's landed calls correct it: the prompt by the billed-to-estimated ratio,
    an assumed answer (no cap asked) as long as the longest answer billed so far."""
    factor = calibration.factor
    answer = raw.output_tokens
    if raw.answer_assumed and calibration.longest_answer is not None:
        answer = calibration.longest_answer
    if factor == 1.0 and answer == raw.output_tokens:
        return raw
    prompt = int(raw.input_tokens * factor + 0.999)
    usd = None if price is None else (prompt * price[0] + answer * price[1]) / 1_000_000
    return CallEstimate(prompt, answer, usd, raw.answer_assumed)
