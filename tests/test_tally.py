"""The one tally of rollouts (core/records.py): per task its mean, pass rate, errored repeats and
flakiness, and the errored results by kind, as the summary, the comparison and the abort line read them."""

from __future__ import annotations

from skillopt_ci.core.compare import compare_results
from skillopt_ci.core.records import TaskResult, error_kinds, task_scores


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
