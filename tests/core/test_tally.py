"""The one tally of rollouts (core/records.py): results by task, per task its mean, pass rate,
errored repeats and flakiness, the errored results by kind; and what a rollout's model calls add up
to (models/base.py), as every environment reads it."""

from __future__ import annotations

from skillopt_ci.core.compare import compare_results
from skillopt_ci.core.records import TaskResult, Usage, by_task, error_kinds, task_scores
from skillopt_ci.models.base import Completion, call_totals


def result(task: str, repeat: int, score: float | None, passed: bool | None = None,
           error: dict[str, str] | None = None) -> TaskResult:
    return TaskResult(task, repeat, "prompt", None if error else "out", score,
                      passed if passed is not None else bool(score), error=error)


ERR = {"kind": "timeout", "message": "slow"}


def test_a_task_is_flaky_only_when_its_measured_repeats_disagree() -> None:
    results = [result("a", 0, 1.0), result("a", 1, 0.0),  # pass and fail: flaky
               result("b", 0, 1.0), result("b", 1, None, error=ERR),  # an error is no disagreement
               result("c", 0, 0.5, passed=False), result("c", 1, 0.0)]
    scores = task_scores(results, ["a", "b", "c", "d"])
    assert [(s.task_id, s.mean, s.pass_rate, s.n_valid, s.n_errors, s.flaky) for s in scores] == [
        ("a", 0.5, 0.5, 2, 0, True), ("b", 1.0, 1.0, 1, 1, False),
        ("c", 0.25, 0.0, 2, 0, False), ("d", None, None, 0, 0, False)]


def test_the_comparison_reads_flakiness_and_errors_from_the_tally() -> None:
    base = [result("a", 0, 1.0), result("a", 1, 0.0), result("b", 0, 1.0), result("b", 1, None, error=ERR)]
    head = [result("a", 0, 1.0), result("a", 1, 1.0), result("b", 0, None, error=ERR), result("b", 1, None, error=ERR)]
    comparison = compare_results(base, head, ["a", "b"])
    assert (comparison.flaky_base, comparison.flaky_head) == (("a",), ())
    assert (comparison.base_errors, comparison.head_errors) == (1, 2)


def test_errors_by_kind_keep_the_order_the_kinds_first_appear() -> None:
    results = [result("a", 0, None, error={"kind": "rate_limit", "message": ""}), result("b", 0, 1.0),
               result("c", 0, None, error={"message": "no kind"}), result("d", 0, None, error=ERR),
               result("e", 0, None, error={"kind": "rate_limit", "message": ""})]
    assert list(error_kinds(results).items()) == [("rate_limit", 2), ("error", 1), ("timeout", 1)]


def test_results_by_task_keep_the_order_they_come() -> None:
    results = [result("b", 1, 1.0), result("a", 0, 0.0), result("b", 0, 0.5)]
    assert {t: [r.repeat for r in rs] for t, rs in by_task(results).items()} == {"b": [1, 0], "a": [0]}
    assert list(by_task(results)) == ["b", "a"]


def test_a_rollouts_calls_add_up_and_an_unknown_cost_is_unknown() -> None:
    calls = [Completion("x", Usage(3, None), latency_s=0.25, cached=True, cost_usd=0.5),
             Completion("y", Usage(2, 4), latency_s=0.5, cached=False, cost_usd=0.25)]
    assert call_totals(calls) == {"usage": Usage(5, 4), "cost_usd": 0.75, "latency_s": 0.75, "cached": False}
    assert call_totals(calls[:1])["cached"] is True
    assert call_totals([*calls, Completion("z")])["cost_usd"] is None  # one call's price unknown
    none = call_totals([])
    assert none == {"usage": Usage(), "cost_usd": None, "latency_s": 0, "cached": False}
    # results.jsonl keeps what each environment wrote for a rollout without calls: 0, or 0.0 (tools)
    assert type(none["latency_s"]) is int and type(call_totals([], latency=0.0)["latency_s"]) is float
