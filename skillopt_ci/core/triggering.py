"""Did a change make the agent use the skill less well? Trigger tasks compared paired per task.

A trigger task (``should_trigger``) is *right* on a side when the agent consulted the skill
exactly when it should; with repeats, a side's rate is the share of its finished rollouts that
were right. Per task present on both sides, the head is worse (a loss) or better (a win) when
its rate differs from the base's. Under "the change did nothing to triggering" each such task is
a coin flip, so the exact one-sided sign test of the losses against the wins
(:func:`~skillopt_ci.core.signtest.sign_test`) is the regression test, at the gate's level
(``1 - confidence``). A significant one fails the gate as a score regression does, whatever the
score did, and says what was lost and where: "triggering regressed: 5 requests the skill is for no
longer use it (v03, v07, v11 and 2 more), recall 17/20 (85%) → 12/20 (60%) (sign test p = 0.031)".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean

from skillopt_ci.core.records import TaskResult, TriggerCounts
from skillopt_ci.core.signtest import sign_test
from skillopt_ci.core.text import fraction


@dataclass(frozen=True)
class TriggerChange:
    """The paired comparison of the trigger tasks (see the module docstring)."""

    n_paired: int
    worse: int  # tasks whose head triggered less rightly than the base
    better: int
    p_value: float
    missed: int  # of the worse: requests the skill is for that no longer use it
    false: int  # of the worse: requests it is not for that now use it
    base: TriggerCounts | None
    head: TriggerCounts | None
    missed_ids: tuple[str, ...] = ()  # the tasks of ``missed``, in id order
    false_ids: tuple[str, ...] = ()

    def regressed(self, alpha: float) -> bool:
        return self.worse > self.better and self.p_value < alpha

    def reason(self) -> str:
        parts = []
        if self.missed:
            parts.append(f"{self.missed} request{'' if self.missed == 1 else 's'} the skill is for no longer use it"
                         f" ({_some(self.missed_ids)})"
                         + (", " + rate_change("recall", self.base, self.head) if self.base else ""))
        if self.false:
            parts.append(f"{self.false} request{'' if self.false == 1 else 's'} it is not for now use it"
                         f" ({_some(self.false_ids)})"
                         + (", " + rate_change("precision", self.base, self.head) if self.base else ""))
        return f"triggering regressed: {'; '.join(parts)} (sign test p = {self.p_value:.3f})"


def _some(ids: Sequence[str], shown: int = 3) -> str:
    """"v01, v02, v03 and 2 more": which tasks, without letting a long list crowd out the rest."""
    names = [i if len(i) <= 30 else i[:29] + "\u2026" for i in ids[:shown]]
    return ", ".join(names) + (f" and {len(ids) - shown} more" if len(ids) > shown else "")


def rate_change(name: str, base: TriggerCounts | None, head: TriggerCounts | None) -> str:
    """"recall 18/20 (90%) → 11/20 (55%)" (the head's alone when there is no base)."""
    after = fraction(*head.rates()[name]) if head else "—"
    return f"{name} {fraction(*base.rates()[name])} → {after}" if base else f"{name} {after}"


def _right_rates(results: Sequence[TaskResult]) -> dict[str, tuple[bool, float]]:
    """Per trigger task: (should it trigger, share of its finished rollouts that were right)."""
    seen: dict[str, list[bool]] = defaultdict(list)
    wanted: dict[str, bool] = {}
    for r in results:
        if r.should_trigger is None or r.consult is None or not r.ok:
            continue
        wanted[r.task_id] = r.should_trigger
        seen[r.task_id].append(r.consult.consulted == r.should_trigger)
    return {t: (wanted[t], fmean(v)) for t, v in seen.items()}


def trigger_means(results: Sequence[TaskResult], task_ids: Sequence[str]) -> dict[str, float]:
    """Per trigger task of ``task_ids`` with a finished rollout: the share of its rollouts that
    used the skill exactly when they should (what a description edit is screened on)."""
    rates = _right_rates(results)
    return {t: rates[t][1] for t in task_ids if t in rates}


def compare_triggering(base: Sequence[TaskResult], head: Sequence[TaskResult]) -> TriggerChange | None:
    """The comparison, or ``None`` when no trigger task was measured on both sides."""
    before, after = _right_rates(base), _right_rates(head)
    paired = sorted(set(before) & set(after))
    if not paired:
        return None
    worse = [t for t in paired if after[t][1] < before[t][1]]
    better = sum(1 for t in paired if after[t][1] > before[t][1])
    return TriggerChange(
        n_paired=len(paired), worse=len(worse), better=better, p_value=sign_test(len(worse), better),
        missed=sum(1 for t in worse if after[t][0]), false=sum(1 for t in worse if not after[t][0]),
        base=TriggerCounts.of(base), head=TriggerCounts.of(head),
        missed_ids=tuple(t for t in worse if after[t][0]), false_ids=tuple(t for t in worse if not after[t][0]))
