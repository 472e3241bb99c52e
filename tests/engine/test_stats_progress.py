"""Statistics and progress output: pure pieces with known answers."""

from __future__ import annotations

import io

import pytest

from skillopt_ci.core.records import TaskResult, summarize, task_scores
from skillopt_ci.core.stats import (
    above,
    below,
    detectable_drop,
    detection_power,
    mean_ci,
    t_cdf,
    t_quantile,
    worst_case_sd,
)
from skillopt_ci.engine.progress import Progress
from skillopt_ci.models.base import Usage


@pytest.mark.parametrize(("df", "expected"), [(1, 12.7062), (2, 4.3027), (3, 3.1824), (5, 2.5706),
                                              (10, 2.2281), (30, 2.0423), (1000, 1.9623)])
def test_t_quantile_matches_tables(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-4)


def test_t_cdf_is_the_inverse():
    assert t_cdf(t_quantile(0.9, 7), 7) == pytest.approx(0.9, abs=1e-9)
    assert t_quantile(0.025, 4) == pytest.approx(-2.7764, abs=1e-4)


def test_mean_ci():
    assert mean_ci([0.5]) is None
    lo, hi = mean_ci([0.0, 1.0, 0.0, 1.0])
    # mean 0.5, sd 0.577, se 0.289, t(3) 3.182 → ±0.919, clipped to [0, 1]
    assert (lo, hi) == (0.0, 1.0)
    lo, hi = mean_ci([0.6, 0.7, 0.8, 0.7, 0.6, 0.8, 0.7, 0.7])
    assert lo == pytest.approx(0.7 - 2.3646 * 0.07559 / 8**0.5, abs=1e-3) and hi > 0.7


def r(task: str, rep: int, score: float | None, cached: bool = False, cost: float | None = 0.01) -> TaskResult:
    error = None if score is not None else {"kind": "server", "message": "503"}
    return TaskResult(task, rep, "p", None if score is None else "out", score,
                      None if score is None else score >= 1, usage=Usage(10, 2), cost_usd=cost, cached=cached, error=error)


def test_repeats_are_averaged_per_task_and_errors_are_missing_data():
    results = [r("a", 0, 1.0), r("a", 1, 0.0), r("b", 0, 1.0), r("b", 1, None), r("c", 0, None), r("c", 1, None)]
    scores = {s.task_id: s for s in task_scores(results, ["a", "b", "c"])}
    assert scores["a"].mean == 0.5 and scores["b"].mean == 1.0 and scores["c"].mean is None
    s = summarize(results, ["a", "b", "c"], skill={}, suite={}, split="val", model={}, repeats=2, wall_time_s=1)
    assert s.mean == 0.75  # (0.5 + 1.0) / 2: task c is not a zero
    assert s.n_tasks_scored == 2 and s.coverage == pytest.approx(2 / 3) and s.n_errors == 3


def test_cost_unknown_stays_unknown_and_cache_hits_are_not_spent():
    s = summarize([r("a", 0, 1.0, cached=True), r("b", 0, 1.0)], ["a", "b"], skill={}, suite={}, split="val",
                  model={}, repeats=1, wall_time_s=1)
    assert s.cost_usd == 0.02 and s.spent_usd == 0.01 and s.cache_hits == 1
    unknown = summarize([r("a", 0, 1.0, cost=None)], ["a"], skill={}, suite={}, split="val", model={}, repeats=1,
                        wall_time_s=1)
    assert unknown.cost_usd is None


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_on_a_terminal_redraws_in_place():
    stream = FakeTTY()
    ticks = iter(x * 0.2 for x in range(100))
    p = Progress(5, "eval x/val", stream=stream, clock=lambda: next(ticks))
    for i in range(5):
        p.advance(error=i == 2)
    p.close()
    text = stream.getvalue()
    assert text.count("\r") == 5 and "5/5 1 errors" in text and text.endswith("\n")


def test_progress_in_logs_prints_at_most_every_tenth():
    stream = io.StringIO()
    p = Progress(100, "eval x/val", stream=stream, clock=lambda: 0.0)
    for _ in range(100):
        p.advance()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 10 and lines[-1].startswith("eval x/val: 100/100 (100%)") and "\r" not in stream.getvalue()


def test_detectable_drop():
    # no spread known: the binomial worst case, sqrt(2 · 1/4 / repeats) per task
    assert detectable_drop(24, 1) == detectable_drop(24, 1, sd=0.0) == detectable_drop(24, 1, worst_case_sd(1))
    assert worst_case_sd(1) == pytest.approx(0.5**0.5) and worst_case_sd(4) == pytest.approx(0.125**0.5)
    assert detectable_drop(1, 3) is None and detectable_drop(0, 3, 0.3) is None
    # more tasks, more repeats or less noise: smaller drops are caught
    assert detectable_drop(240, 1, 0.5) < detectable_drop(60, 1, 0.5) < detectable_drop(24, 1, 0.5)
    assert detectable_drop(60, 3) < detectable_drop(60, 1)
    assert detectable_drop(60, 3, 0.2) < detectable_drop(60, 3, 0.4)
    assert detectable_drop(60, 3, 0.3, margin=0.05) > detectable_drop(60, 3, 0.3) + 0.045
    assert detectable_drop(2, 1) == 1.0  # not even the whole score is caught 80% of the time
    # it is where the power reaches the asked level
    mde = detectable_drop(60, 3, 0.327, alpha=0.05, power=0.8)
    assert detection_power(mde, 60, 3, 0.327) == pytest.approx(0.8, abs=1e-6)
    assert 0.13 < mde < 0.16  # the bench simulates ~80% power at about 14 points for this suite
    with pytest.raises(ValueError):
        detectable_drop(24, 1, power=1.0)


def test_one_tolerance_for_every_comparison():
    assert not below(-4.6e-18, 0.0) and not above(4.6e-18, 0.0)
    assert below(-1e-6, 0.0) and above(1e-6, 0.0)
    assert not below(0.7 - 0.8, -0.1)  # -0.10000000000000009 is the margin, not beyond it
