"""Statistics over per-task scores. Pure functions, no dependencies beyond the standard library.

Repeats of a task are averaged first (the task is the unit of sampling), then the mean and its
95% confidence interval are taken over tasks with a Student-t interval on the per-task means —
the clustered standard error recommended for evals whose questions are sampled from a larger
population. Intervals are clipped to [0, 1], the range every score lives in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist, fmean, stdev


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * _betainc(df / 2, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: int) -> float:
    """Quantile of Student's t with ``df`` degrees of freedom, exact to ~1e-10 (bisection on
    :func:`t_cdf`, bracketed by the normal quantile)."""
    if df < 1:
        raise ValueError("df must be >= 1")
    if not 0.0 < p < 1.0:
        raise ValueError("p must be in (0, 1)")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, max(1.0, NormalDist().inv_cdf(p))
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-10:
            break
    return (lo + hi) / 2


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """Two-sided t-interval for the mean of ``values``, clipped to [0, 1].

    ``None`` when there are fewer than two values (no interval can be formed).
    """
    n = len(values)
    if n < 2:
        return None
    m = fmean(values)
    half = t_quantile(0.5 + confidence / 2, n - 1) * stdev(values) / math.sqrt(n)
    return max(0.0, m - half), min(1.0, m + half)
