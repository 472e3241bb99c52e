"""The gate on trigger tasks: a description edit that makes the agent stop using the skill (or use
it where it should not) fails like a score regression, paired per task, with its own line."""

from __future__ import annotations

from skillopt_ci.core.records import Consult, TaskResult, summarize
from skillopt_ci.core.triggering import compare_triggering
from skillopt_ci.gate.report import render_gate
from skillopt_ci.gate.verdict import GateReport, SkillChange, decide
from skillopt_ci.inputs.config import GatePolicy

N_FOR, N_NOT = 20, 20  # requests the skill is for, near-misses it is not for
IDS = [f"for-{i}" for i in range(N_FOR)] + [f"not-{i}" for i in range(N_NOT)]


def side(used_for: int, used_not: int, work: float = 1.0) -> list[TaskResult]:
    """The first ``used_for`` requests the skill is for use it (every one's work scores ``work``: the
    agent managed without it), and the first ``used_not`` near-misses use it too (scored 0, as the
    trigger scorer does)."""
    results = []
    for i in range(N_FOR):
        used = i < used_for
        results.append(TaskResult(f"for-{i}", 0, score=work, passed=work == 1.0, should_trigger=True,
                                  consult=Consult(used)))
    for i in range(N_NOT):
        used = i < used_not
        results.append(TaskResult(f"not-{i}", 0, score=0.0 if used else 1.0, passed=not used, should_trigger=False,
                                  consult=Consult(used)))
    return results


def gate(base: list[TaskResult], head: list[TaskResult]):
    def summary(results):
        return summarize(results, IDS, skill={"name": "shout"}, suite={}, split="val", model={}, repeats=1,
                         wall_time_s=1)
    change = SkillChange("shout", "skills/shout/SKILL.md", "suite", "modified", "skills/shout/SKILL.md")
    return decide(change, base, head, IDS, GatePolicy(), summary(base), summary(head), tuple(IDS))


def test_a_description_that_loses_recall_fails_the_gate_with_its_own_line():
    verdict = gate(side(18, 1), side(11, 1))
    assert verdict.comparison.delta == 0.0  # the score did not move: the work got done without the skill
    assert verdict.failed and verdict.verdict == "regressed"
    assert ("7 requests the skill is for no longer use it (for-11, for-12, for-13 and 4 more), recall 18/20 (90%) "
            "→ 11/20 (55%) (sign test p = 0.008)") in verdict.reason
    body = render_gate(GateReport("main", "pr", "a" * 40, "b" * 40, "a" * 40, GatePolicy(), [verdict]))
    assert "shout** triggering: recall 18/20 (90%) → 11/20 (55%), 7 fewer requests the skill is for use it" in body
    assert "triggering regressed" in body  # the reason of a failed skill


def test_a_skill_that_now_fires_on_near_misses_fails_on_precision():
    verdict = gate(side(20, 0), side(20, 6))
    assert verdict.failed
    assert ("6 requests it is not for now use it (not-0, not-1, not-2 and 3 more), precision 20/20 (100%) → "
            "20/26 (77%) (sign test p = 0.016)") in verdict.reason


def test_a_change_with_no_significant_trigger_loss_leaves_the_score_verdict_alone():
    assert compare_triggering(side(18, 1), side(17, 1)).p_value == 0.5
    verdict = gate(side(18, 1), side(17, 1))
    assert "triggering" not in verdict.reason
    untouched = gate(side(18, 1), side(18, 1))
    assert not untouched.failed and untouched.verdict == "unchanged"
    assert compare_triggering([TaskResult("x", 0, score=1.0)], [TaskResult("x", 0, score=1.0)]) is None


def test_the_requests_named_in_the_comment_are_escaped():
    """Task ids come from the suite, which a fork's pull request may write: they reach the
    comment as text, not as links or mentions."""
    hostile = "[x](https://evil.example) @org/team"
    base = side(18, 1)
    head = [r if r.task_id != "for-12" else TaskResult(hostile, 0, score=1.0, passed=True, should_trigger=True,
                                                       consult=Consult(False)) for r in side(11, 1)]
    base = [r if r.task_id != "for-12" else TaskResult(hostile, 0, score=1.0, passed=True, should_trigger=True,
                                                       consult=Consult(True)) for r in base]
    verdict = gate(base, head)
    assert hostile[:29] + "\u2026" in verdict.reason  # named, and clipped
    body = render_gate(GateReport("main", "pr", "a" * 40, "b" * 40, "a" * 40, GatePolicy(), [verdict]))
    assert "triggering regressed" in body and "\\[x](https://evil.example)" in body  # no link: the bracket is escaped
    assert " [x](" not in body and " @or" not in body  # nor a mention
