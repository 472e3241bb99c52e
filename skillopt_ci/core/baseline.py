"""The skill-off baseline (``--baseline none``): what the skill is worth at all.

The same tasks, sample indices and model are evaluated with no skill (see
:func:`skillopt_ci.core.skill.no_skill`); :func:`skill_worth` pairs the two per task and
:func:`worth_line` is the one line users read everywhere (eval, gate, train)::

    no skill: 0.412 [0.300, 0.520]; the skill adds +0.210 [+0.120, +0.300] (paired over 60 tasks)

Pure: records in, a record out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from skillopt_ci.core import codec
from skillopt_ci.core.compare import ComparePolicy, compare_results
from skillopt_ci.core.records import EvalSummary, TaskResult

BASELINES = ("none",)  # the values --baseline accepts


@dataclass(frozen=True)
class SkillWorth(codec.Record):
    """The no-skill score and what the skill adds over it, paired per task.

    ``mean``/``ci95`` are the no-skill run's own score; ``delta``/``delta_ci`` are the skill's
    mean minus the no-skill mean over ``n_paired`` tasks measured on both sides (``delta_ci`` is
    ``None`` when too few tasks were paired for an interval)."""

    mean: float | None
    ci95: tuple[float, float] | None
    delta: float | None
    delta_ci: tuple[float, float] | None
    n_paired: int
    confidence: float = 0.95
    run_dir: str = ""

    def line(self) -> str:
        return worth_line(self)

    def _json_out(self, data: dict[str, Any]) -> dict[str, Any]:
        return {**data, "line": self.line()}  # written for readers of the JSON; not read back


def skill_worth(skill: Sequence[TaskResult], none: Sequence[TaskResult], task_ids: Sequence[str],
                none_summary: EvalSummary, policy: ComparePolicy | None = None, run_dir: str = "") -> SkillWorth:
    """Pair the skill's results with the no-skill results on ``task_ids``."""
    policy = policy or ComparePolicy()
    comparison = compare_results(none, skill, task_ids, policy)
    return SkillWorth(mean=none_summary.mean, ci95=none_summary.ci95, delta=comparison.delta, delta_ci=comparison.ci,
                      n_paired=comparison.n_paired, confidence=policy.confidence, run_dir=run_dir)


def worth_line(worth: SkillWorth) -> str:
    """``no skill: 0.412 [0.300, 0.520]; the skill adds +0.210 [+0.120, +0.300] (paired over 60 tasks)``."""
    score = "—" if worth.mean is None else f"{worth.mean:.3f}"
    if worth.ci95 is not None:
        score += f" [{worth.ci95[0]:.3f}, {worth.ci95[1]:.3f}]"
    if worth.delta is None:
        return f"no skill: {score}; what the skill adds is unknown (no task was measured on both sides)"
    adds = f"{worth.delta:+.3f}"
    if worth.delta_ci is not None:
        adds += f" [{worth.delta_ci[0]:+.3f}, {worth.delta_ci[1]:+.3f}]"
    tasks = f"{worth.n_paired} task{'' if worth.n_paired == 1 else 's'}"
    return f"no skill: {score}; the skill adds {adds} (paired over {tasks})"
