"""Statistics over per-task scores. Pure functions, no dependencies beyond the standard library.

Repeats of a task are averaged first (the task is the unit of sampling), then the mean and its
95% confidence interval are taken over tasks with a Student-t interval on the per-task means —
the clustered standard error recommended for evals whose questions are sampled from a larger
population. Intervals are clipped to [0, 1], the range every score lives in.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from fractions import Fraction
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


def wilson_ci(k: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """Wilson score interval (95 % by default) for a proportion of ``k`` in ``n``; ``None`` when
    ``n`` is 0. Unlike the normal interval it stays inside [0, 1] and is not empty at 0 or n."""
    if n <= 0:
        return None
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


# --- tolerance -------------------------------------------------------------------------------

TOLERANCE = 1e-9
"""Scores are averages of repeats and intervals are means of resamples, so a value that is exactly
0 (or exactly the margin) in real arithmetic can come out as -4.6e-18. Every comparison that
decides a verdict goes through :func:`below` / :func:`above`, which need a clear gap."""


def below(x: float, bound: float) -> bool:
    """``x < bound`` by more than rounding dust (:data:`TOLERANCE`)."""
    return x < bound - TOLERANCE


def above(x: float, bound: float) -> bool:
    """``x > bound`` by more than rounding dust (:data:`TOLERANCE`)."""
    return x > bound + TOLERANCE


# --- the exact paired test -------------------------------------------------------------------

GRAIN = 1e-9  # deltas off a small rational grid are compared on this one
MAX_DENOMINATOR = 1000  # averages of scores like 0.7 over a few repeats: k / 30 and the like
MAX_SUMS = 20_000  # beyond this many distinct sums the exact distribution gives way to sampling


def signflip_test(deltas: Sequence[float], samples: int = 2000, seed: int | str = 0) -> float:
    """Two-sided p-value of the paired sign-flip (randomization) test of ``mean(deltas) == 0``.

    Under "the two sides are exchangeable" every task's delta is as likely to be +d as -d, so the
    null distribution of the sum is that of ``sum(±|d_i|)`` over all 2^n sign patterns. It is
    computed *exactly* (integer counts over the distinct sums, grouped by magnitude) whenever the
    distinct sums stay below :data:`MAX_SUMS`, which covers every pass/fail suite at any size (with
    one repeat it *is* the exact sign test / McNemar test); otherwise ``samples`` seeded random sign
    patterns give the conservative Monte Carlo p-value ``(1 + hits) / (1 + samples)``. Either way
    the false-positive rate is at most the level, at every n. Independent of the order of ``deltas``.
    """
    ints = _on_grid(deltas)
    mags = sorted(abs(m) for m in ints if m)
    observed = abs(sum(ints))
    if not mags or observed == 0:
        return 1.0
    counts = _exact_sums(mags)
    if counts is not None:
        hits = sum(c for s, c in counts.items() if abs(s) >= observed)
        return min(1.0, hits / 2 ** len(mags))
    rng = random.Random(f"signflip:{seed}")
    total = sum(mags)
    chunks = [mags[i:i + 8] for i in range(0, len(mags), 8)]
    tables = [_subset_sums(chunk) for chunk in chunks]
    hits = 0
    for _ in range(samples):
        pattern = rng.getrandbits(len(mags))
        positive = sum(table[pattern >> (8 * i) & 255] for i, table in enumerate(tables))
        hits += abs(2 * positive - total) >= observed
    return (1 + hits) / (1 + samples)


def _subset_sums(values: Sequence[int]) -> list[int]:
    """``table[bits]`` = the sum of the values whose bit is set, each from a smaller entry."""
    table = [0] * (1 << len(values))
    for bits in range(1, len(table)):
        low = bits & -bits
        table[bits] = table[bits ^ low] + values[low.bit_length() - 1]
    return table


def _on_grid(deltas: Sequence[float]) -> list[int]:
    """``deltas`` as integers on a common grid, so that sums equal in real arithmetic are equal.

    Averages of a few repeats are small fractions (1/3 is not a multiple of any decimal grain):
    when every delta is within rounding of a fraction with a small denominator, the grid is their
    least common denominator; otherwise :data:`GRAIN`.
    """
    fractions = []
    for d in deltas:
        f = Fraction(d).limit_denominator(MAX_DENOMINATOR)
        if abs(float(f) - d) > TOLERANCE:
            return [round(d / GRAIN) for d in deltas]
        fractions.append(f)
    scale = math.lcm(*(f.denominator for f in fractions)) if fractions else 1
    if scale > 10**9:
        return [round(d / GRAIN) for d in deltas]
    return [int(f * scale) for f in fractions]


def _exact_sums(mags: Sequence[int]) -> dict[int, int] | None:
    """How many sign patterns give each sum, or ``None`` past :data:`MAX_SUMS` distinct sums."""
    grouped: dict[int, int] = {}
    for m in mags:
        grouped[m] = grouped.get(m, 0) + 1
    # Cheap bounds on the number of distinct sums: the sign patterns of the groups, or the span
    # of the sums on the grid of the magnitudes' gcd. Past both, do not even start.
    patterns = 1
    for c in grouped.values():
        patterns = min(patterns * (c + 1), MAX_SUMS + 1)
    if patterns > MAX_SUMS and 2 * sum(mags) // math.gcd(*grouped) + 1 > MAX_SUMS:
        return None
    counts = {0: 1}
    for m, c in sorted(grouped.items()):
        # c copies of ±m add m·(2k - c) with k ~ Binomial(c, 1/2): C(c, k) patterns each
        step = [(m * (2 * k - c), math.comb(c, k)) for k in range(c + 1)]
        nxt: dict[int, int] = {}
        for s, n in counts.items():
            for shift, ways in step:
                nxt[s + shift] = nxt.get(s + shift, 0) + n * ways
        if len(nxt) > MAX_SUMS:
            return None
        counts = nxt
    return counts


# --- power -----------------------------------------------------------------------------------

def worst_case_sd(repeats: int) -> float:
    """The largest spread of a per-task delta from rollout noise alone: each side's score an
    average of ``repeats`` pass/fail outcomes of probability 1/2 (variance 1/4 each)."""
    return math.sqrt(2 * 0.25 / max(1, repeats))


def detection_power(drop: float, n_tasks: int, repeats: int, sd: float | None = None,
                    alpha: float = 0.05, margin: float = 0.0) -> float:
    """The chance that a gate on ``n_tasks`` paired tasks flags a true ``drop`` of the mean score.

    The model: the rollout noise of a per-task delta has standard deviation ``sd`` (``None`` or 0:
    :func:`worst_case_sd`), and the drop is concentrated in some of the tasks, each losing as much
    as that noise allows, the usual shape of a regression. A task whose rollouts pass with
    probability p has variance p(1 - p) per rollout, so the observed noise, sd² = 2·p(1 - p) /
    ``repeats``, bounds a task's change by a = |2p - 1| = sqrt(1 - 2·repeats·sd²). A share drop / a
    of the tasks then loses a each, which widens the spread of the deltas to
    s = sqrt(sd² + drop·(a - drop)); the power is the paired t-test's with that spread,
    P(T_{n-1} < (drop - margin)·√n / s - t_{1-α/2}). ``alpha`` is two-sided (the gate's
    ``1 - confidence``).
    """
    if n_tasks < 2:
        return 0.0
    return _power(drop, n_tasks, repeats, sd, t_quantile(1 - alpha / 2, n_tasks - 1), margin)


def _power(drop: float, n_tasks: int, repeats: int, sd: float | None, t_alpha: float, margin: float) -> float:
    noise = sd if sd else worst_case_sd(repeats)
    drop = min(1.0, max(0.0, drop))
    reach = math.sqrt(max(0.0, 1.0 - 2 * max(1, repeats) * noise * noise))
    spread = math.sqrt(noise * noise + max(0.0, drop * (reach - drop)))
    return t_cdf((drop - margin) * math.sqrt(n_tasks) / spread - t_alpha, n_tasks - 1)


def detectable_drop(n_tasks: int, repeats: int, sd: float | None = None, alpha: float = 0.05,
                    power: float = 0.8, margin: float = 0.0) -> float | None:
    """The smallest true drop of the mean score (0.12 = 12 points) that a gate on ``n_tasks``
    paired tasks with ``repeats`` repeats per side flags with probability ``power``: its minimum
    detectable effect, under the model of :func:`detection_power`.

    ``sd`` is the standard deviation of the per-task deltas (repeats averaged) seen when nothing
    changed; ``None`` or 0 means unknown, and the binomial worst case :func:`worst_case_sd` stands
    in. ``alpha`` is two-sided (the gate's ``1 - confidence``); the gate fails only beyond
    ``margin``, which the drop includes. ``None`` with fewer than two tasks (no test can be made);
    1.0 when not even a drop of the whole score would be caught that often.
    ``bench/bench_gate_stats.py`` checks it against simulation.
    """
    if n_tasks < 2:
        return None
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise ValueError("alpha and power must be in (0, 1)")
    t_alpha = t_quantile(1 - alpha / 2, n_tasks - 1)
    lo, hi = margin, 1.0
    if _power(hi, n_tasks, repeats, sd, t_alpha, margin) < power:
        return 1.0
    for _ in range(30):  # the power grows with the drop: bisect to ~1e-9
        mid = (lo + hi) / 2
        if _power(mid, n_tasks, repeats, sd, t_alpha, margin) < power:
            lo = mid
        else:
            hi = mid
    return hi
