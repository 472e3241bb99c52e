"""Tests on *discordant pairs*: an edit and the incumbent run on the same task at the same fresh
sample index, where exactly one side scores higher. Pure functions; no I/O.

Under "the edit has no effect" the two sides of a pair are exchangeable, so the edit wins a
discordant pair with probability exactly 1/2 whatever the task's pass rate ``p`` is (both sides
pass with ``p``: the pair is discordant with ``2p(1-p)``, and each side is the winner with half of
that). Counting wins among discordant pairs is therefore calibrated at every base rate, where
"wins out of rounds" is not (a round is a win only ``p(1-p)`` of the time, which depends on ``p``).

- :func:`sign_test`: the exact one-sided binomial p-value of ``wins`` out of ``wins + losses``.
- :class:`Sprt`: Wald's sequential probability ratio test of "the edit wins a discordant pair with
  probability ``theta``" against 1/2. Each win multiplies the likelihood ratio by ``2*theta``,
  each loss by ``2*(1-theta)``; the test *confirms* when the ratio reaches ``tests/alpha`` (Bonferroni
  over the ``tests`` edits of a step), *rejects* at ``reject_at`` or below, and stops unconfirmed
  after ``max_pairs`` pairs.
- :func:`operating`: its exact probability of confirming when each pair is won with probability
  ``q``, by dynamic programming over (wins, losses); :func:`error_rates` gives the false-confirm
  rate (``q = 1/2``) and the power at ``theta``.

Pairs of one round arrive together; the test reads them in a fixed order and stops at the first
that decides it, so its verdict is a function of the ordered sequence of pairs and the DP is
exact for it. Stopping earlier for any other reason (a round cap, nothing left to run) only
lowers the false-confirm rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

CONFIRM = "confirm"
REJECT = "reject"
CONTINUE = "continue"
_EPS = 1e-9  # slack on the log likelihood ratio, so a boundary reached exactly counts as reached


def sign_test(wins: int, losses: int) -> float:
    """The exact one-sided p-value of at least ``wins`` wins out of ``wins + losses`` discordant
    pairs when each is a coin flip: ``P(X >= wins)``, ``X ~ Binomial(wins + losses, 1/2)``.
    1.0 when there are no pairs. Raises ``ValueError`` for negative counts."""
    if wins < 0 or losses < 0:
        raise ValueError(f"counts must not be negative (wins {wins}, losses {losses})")
    n = wins + losses
    return sum(math.comb(n, i) for i in range(wins, n + 1)) / 2**n


@dataclass(frozen=True)
class Sprt:
    """The sequential test's parameters (see the module docstring)."""

    theta: float = 0.9
    alpha: float = 0.05
    tests: int = 1
    reject_at: float = 0.1
    max_pairs: int = 20

    def __post_init__(self) -> None:
        if not 0.5 < self.theta < 1.0:
            raise ValueError(f"theta must be between 1/2 and 1 (got {self.theta})")
        if not 0.0 < self.alpha < 1.0 or self.tests < 1 or not 0.0 < self.reject_at < 1.0 or self.max_pairs < 1:
            raise ValueError("alpha and reject_at must be in (0, 1), tests and max_pairs at least 1")

    @property
    def confirm_at(self) -> float:
        """The likelihood ratio that confirms: ``tests / alpha``."""
        return self.tests / self.alpha

    def log_ratio(self, wins: int, losses: int) -> float:
        return wins * math.log(2 * self.theta) + losses * math.log(2 * (1 - self.theta))

    def ratio(self, wins: int, losses: int) -> float:
        return math.exp(self.log_ratio(wins, losses))

    def verdict(self, wins: int, losses: int) -> str:
        """``confirm``, ``reject`` or ``continue`` after ``wins`` and ``losses``; ``reject`` once
        ``max_pairs`` pairs are used without confirming."""
        llr = self.log_ratio(wins, losses)
        if llr >= math.log(self.confirm_at) - _EPS:
            return CONFIRM
        if llr <= math.log(self.reject_at) + _EPS or wins + losses >= self.max_pairs:
            return REJECT
        return CONTINUE

    def wins_needed(self, losses: int = 0) -> int:
        """The fewest wins that confirm after ``losses`` losses (ignoring the pair cap)."""
        wins = 0
        while self.log_ratio(wins, losses) < math.log(self.confirm_at) - _EPS:
            wins += 1
        return wins


def operating(test: Sprt, q: float) -> tuple[float, float]:
    """``(P(confirm), expected pairs used)`` when each discordant pair is won with probability ``q``
    independently: exact, by dynamic programming over the open states (wins, losses)."""
    states = {(0, 0): 1.0}
    confirm = expected = 0.0
    while states:
        nxt: dict[tuple[int, int], float] = {}
        for (w, lost), mass in states.items():
            expected += mass
            for (w2, l2), p in (((w + 1, lost), q), ((w, lost + 1), 1 - q)):
                verdict = test.verdict(w2, l2)
                if verdict == CONFIRM:
                    confirm += mass * p
                elif verdict == CONTINUE:
                    nxt[(w2, l2)] = nxt.get((w2, l2), 0.0) + mass * p
        states = nxt
    return confirm, expected


def error_rates(test: Sprt) -> tuple[float, float]:
    """``(false-confirm rate, power)``: the probability of confirming an edit that wins a discordant
    pair with probability 1/2 (no effect) and with ``test.theta``."""
    return operating(test, 0.5)[0], operating(test, test.theta)[0]
