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


def t_quantile(p: float, df: int) -> float:
    """Quantile of Student's t with ``df`` degrees of freedom (exact for df 1 and 2, a
    Cornish–Fisher expansion otherwise: error below 1e-3 for df ≥ 3 at p = 0.975)."""
    if df < 1:
        raise ValueError("df must be >= 1")
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    z = NormalDist().inv_cdf(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


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
