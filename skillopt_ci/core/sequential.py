"""The paired, sequential test behind training's validation gate (the ``train.acceptance`` rules
``sequential``, ``honest``, ``honest-sequential`` and ``screened``'s fallback). Pure functions
over per-task samples; no I/O.

Samples are kept per task (``{task_id: [score, ...]}``); a side's estimate of a task is the mean
of all its samples so far, and the statistic is the mean over tasks of the per-task delta
(candidate − incumbent), paired on the tasks both sides have measured.

A look *accepts* only when the mean delta exceeds ``min_gain`` and two tests agree at the look's
level ``alpha / max_rounds`` (Bonferroni over the looks, so the probability that *any* look of the
sequence accepts a candidate no better than the incumbent is at most ``alpha``):

- the one-sided Student-t lower confidence bound of the mean delta is above ``min_gain``;
- the exact paired sign-flip test (:func:`skillopt_ci.core.stats.signflip_test`, halved for one
  side) rejects "no difference" — the t bound alone is too generous when few tasks disagree.

A look *rejects* when the one-sided upper bound at the same level is not above ``min_gain`` (the
candidate clearly cannot win), when the mean delta itself is not above ``min_gain`` (behind or
level, it is not worth more samples), when no task disagrees any more (more samples would change
nothing), or at the last round. Rejecting early never raises the error rate, which is about
accepting. Otherwise the next round samples both sides once more on the
tasks whose per-task means still differ.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean, stdev

from skillopt_ci.core.stats import above, signflip_test, t_quantile

Samples = Mapping[str, Sequence[float]]
Sampler = Callable[[str, Sequence[str], int], Samples]  # (side, task ids, round) -> new samples


@dataclass(frozen=True)
class Look:
    """One look of the test: its verdict (``accept`` / ``reject`` / ``continue``) and why."""

    verdict: str
    delta: float | None
    lower: float | None
    upper: float | None
    n_tasks: int
    p_one_sided: float | None
    rule: str


def look_alpha(alpha: float, rounds: int) -> float:
    """The level of each look: Bonferroni over at most ``rounds`` looks."""
    return alpha / max(1, rounds)


def task_means(samples: Samples, task_ids: Sequence[str]) -> dict[str, float]:
    """Per task (of ``task_ids``, with at least one sample): the mean of its samples."""
    return {t: fmean(samples[t]) for t in task_ids if samples.get(t)}


def paired_deltas(candidate: Samples, incumbent: Samples, task_ids: Sequence[str]) -> list[float]:
    """Candidate − incumbent per task measured on both sides, in ``task_ids`` order."""
    cand, inc = task_means(candidate, task_ids), task_means(incumbent, task_ids)
    return [cand[t] - inc[t] for t in task_ids if t in cand and t in inc]


def disagreeing(candidate: Samples, incumbent: Samples, task_ids: Sequence[str]) -> list[str]:
    """Tasks (in ``task_ids`` order) whose latest per-task means differ: the only ones where more
    samples can move the decision."""
    cand, inc = task_means(candidate, task_ids), task_means(incumbent, task_ids)
    return [t for t in task_ids if t in cand and t in inc and above(abs(cand[t] - inc[t]), 0.0)]


def bounds(deltas: Sequence[float], level: float) -> tuple[float, float] | None:
    """One-sided t bounds (lower, upper) of the mean delta, each at ``1 - level``; ``None`` for
    fewer than two deltas."""
    n = len(deltas)
    if n < 2:
        return None
    m, sd = fmean(deltas), stdev(deltas)
    half = t_quantile(1.0 - level, n - 1) * sd / math.sqrt(n)
    return m - half, m + half


def look(candidate: Samples, incumbent: Samples, task_ids: Sequence[str], *, alpha: float, rounds: int,
         round_no: int, min_gain: float = 0.0) -> Look:
    """The decision after round ``round_no`` (1-based) of at most ``rounds``."""
    level = look_alpha(alpha, rounds)
    deltas = paired_deltas(candidate, incumbent, task_ids)
    b = bounds(deltas, level)
    if b is None:
        return Look("reject", fmean(deltas) if deltas else None, None, None, len(deltas), None,
                    "fewer than 2 tasks measured on both sides")
    delta, (lower, upper) = fmean(deltas), b
    p = signflip_test(deltas) / 2 if above(delta, 0.0) else 1.0
    gain = f"{min_gain:+.3f}"
    if above(delta, min_gain) and above(lower, min_gain) and p <= level:
        return Look("accept", delta, lower, upper, len(deltas), p, f"lower bound above {gain}")
    if not above(upper, min_gain):
        return Look("reject", delta, lower, upper, len(deltas), p, f"upper bound not above {gain}")
    if not above(delta, min_gain):
        return Look("reject", delta, lower, upper, len(deltas), p, f"mean delta not above {gain}")
    if not disagreeing(candidate, incumbent, task_ids):
        return Look("reject", delta, lower, upper, len(deltas), p, "no task left where the two disagree")
    if round_no >= rounds:
        why = "lower bound not above" if not above(lower, min_gain) else "exact test not significant vs"
        return Look("reject", delta, lower, upper, len(deltas), p, f"{why} {gain} after the last round")
    return Look("continue", delta, lower, upper, len(deltas), p, "undecided")


def look_noninferior(candidate: Samples, incumbent: Samples, task_ids: Sequence[str], *, alpha: float) -> Look:
    """Accept unless the candidate is significantly worse: rejected only when the one-sided upper
    bound of the mean delta (at ``1 - alpha``) is below 0 *and* the exact paired sign-flip test
    finds the loss significant at ``alpha``. For a candidate whose gain was already shown
    elsewhere (each edit confirmed in screening), so validation guards against harm and
    overfitting instead of having to show the gain again on tasks most of which it does not touch."""
    deltas = paired_deltas(candidate, incumbent, task_ids)
    b = bounds(deltas, alpha)
    if b is None:
        return Look("reject", fmean(deltas) if deltas else None, None, None, len(deltas), None,
                    "fewer than 2 tasks measured on both sides")
    delta, (lower, upper) = fmean(deltas), b
    p = signflip_test(deltas) / 2 if above(0.0, delta) else 1.0
    if above(0.0, upper) and p <= alpha:
        return Look("reject", delta, lower, upper, len(deltas), p, "significantly worse")
    return Look("accept", delta, lower, upper, len(deltas), p, "no significant loss")


def fresh_offset(step_id: str, role: str, round_no: int) -> int:
    """A sample offset for ``role``'s samples in ``round_no`` of ``step_id``: deterministic from
    the step (so a resumed step draws the same samples) and far from offset 0, which a version's
    own validation pass uses."""
    digest = hashlib.sha256(f"{step_id}:{role}:{round_no}".encode()).hexdigest()
    return 1000 + int(digest[:12], 16) % 10**9


def merge(samples: Samples, more: Samples) -> dict[str, list[float]]:
    """``samples`` with ``more`` appended per task (new lists; the inputs are not changed)."""
    out = {t: list(v) for t, v in samples.items()}
    for t, v in more.items():
        out.setdefault(t, []).extend(v)
    return out


def reason(look_: Look, *, rounds_used: int, mode: str, alpha: float) -> str:
    """The one-line reason of a decision: delta, interval, tasks, rounds and rule."""
    verdict = "accepted" if look_.verdict == "accept" else "rejected"
    if look_.delta is None:
        return f"{verdict}: no paired tasks ({look_.rule}; {mode}, alpha {alpha:g})"
    interval = "" if look_.lower is None else f" [{look_.lower:+.3f}, {look_.upper:+.3f}]"
    plural = "round" if rounds_used == 1 else "rounds"
    return (f"{verdict}: {look_.delta:+.3f}{interval} paired over {look_.n_tasks} tasks, {rounds_used} {plural} "
            f"({look_.rule}; {mode}, alpha {alpha:g})")


@dataclass(frozen=True)
class Validation:
    """A finished sequential validation: the deciding look, the rounds it took, both sides'
    samples at the end, and how many samples rounds after the first drew (both sides)."""

    look: Look
    rounds: int
    candidate: dict[str, list[float]]
    incumbent: dict[str, list[float]]
    extra_samples: int


def validate(sample: Sampler, candidate: Samples, incumbent: Samples, task_ids: Sequence[str], *, alpha: float,
             rounds: int, min_gain: float = 0.0) -> Validation:
    """Run the test from round 1 (``candidate``/``incumbent`` hold what is measured so far): at
    each undecided look both sides are sampled once more (``sample(side, tasks, round)``, side
    ``"candidate"`` or ``"incumbent"``) on the tasks where they disagree."""
    cand, inc = merge(candidate, {}), merge(incumbent, {})
    extra, round_no = 0, 1
    while True:
        current = look(cand, inc, task_ids, alpha=alpha, rounds=rounds, round_no=round_no, min_gain=min_gain)
        if current.verdict != "continue":
            return Validation(current, round_no, cand, inc, extra)
        tasks = disagreeing(cand, inc, task_ids)
        round_no += 1
        for side in ("candidate", "incumbent"):
            more = sample(side, tasks, round_no)
            extra += sum(len(v) for v in more.values())
            if side == "candidate":
                cand = merge(cand, more)
            else:
                inc = merge(inc, more)
