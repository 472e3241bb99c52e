"""Planning a training run within ``budgets.max_target_calls``, and the best-so-far curve.

Contract:
- The run keeps back what its end needs: the final test (the baseline and the best skill on the
  test split, times repeats) is held from every evaluation before the test phase, and one more
  validation is kept as slack for a step that costs more than planned.
- Before a step (or an epoch's slow update) its calls are estimated from the run's own history:
  the rollout batch, the most any earlier step's screening took (a batch's worth before any was
  seen) and the most any validation took (credit assignment included; at least one full
  validation). When the estimate does not fit in what is left, the run goes to the test phase and
  says why (``target-call budget: ...``) instead of starting a step it cannot finish.
- Pure: every figure comes from the history and the counts passed in, so a resumed run plans
  as the uninterrupted one did.
- :func:`best_so_far` is the curve "what each budget bought": after every recorded step, the
  cumulative target calls, the incumbent and its validation mean. Runs recorded before calls were
  counted have 0 calls per stage; their curve keeps the steps and says nothing about calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from skillopt_ci.train.history import StepRecord
from skillopt_ci.train.records import CurvePoint


@dataclass(frozen=True)
class CallPlan:
    """The figures a budgeted run plans with (all in target calls)."""

    budget: int
    test: int  # the final test: baseline and best, every test task, every repeat
    validation: int  # one full validation of a candidate
    batch: int  # one step's rollout (train tasks run once)
    screening: bool  # steps are screened before validation

    @property
    def reserve(self) -> int:
        return self.test + self.validation

    def step_calls(self, history: Sequence[StepRecord], slow_update: bool = False) -> int:
        """The most the next step (``slow_update``: the epoch's slow update, two batches and a
        validation) is expected to take, from what steps of this run took so far."""
        if slow_update:
            return 2 * self.batch + max(self.validation, most(history, "validation"))
        screen = max(self.batch, most(history, "screening")) if self.screening else 0
        return self.batch + screen + max(self.validation, most(history, "validation"))

    def stop_before(self, what: str, need: int, spent: int) -> str | None:
        """Why ``what`` (needing ``need`` calls) should not start with ``spent`` calls spent, or ``None``."""
        left = self.budget - spent - self.reserve
        if need <= left:
            return None
        return (f"target-call budget: stopped before {what}, which may need {need} calls; "
                f"{max(left, 0)} left of {self.budget} after {spent} spent and {self.reserve} kept for "
                f"the final test and one validation")


    def audits(self, spent: int, pairs: int, most: int) -> int:
        """How many epoch-end audits (each at most ``pairs`` re-run calls and a validation of both
        sides) fit in what is left after ``spent``, at most ``most``."""
        return max(0, min(most, (self.budget - spent - self.reserve) // (pairs + 2 * self.validation)))


def most(history: Sequence[StepRecord], stage: str) -> int:
    """The most target calls ``stage`` took in any recorded step (0 when none recorded it)."""
    return max((spend.target_calls for r in history if r.outcome for name, spend in r.outcome.spend.items()
                if name == stage), default=0)


def best_so_far(history: Sequence[StepRecord], baseline_val: float | None,
                baseline_calls: int = 0) -> tuple[CurvePoint, ...]:
    """The best-so-far curve from the step records' spend, starting at the baseline (its
    validation mean ``baseline_val``, which took ``baseline_calls``)."""
    calls = baseline_calls
    points = [CurvePoint("baseline", calls, 0, baseline_val)]
    for record in history:
        if record.outcome is None:
            continue
        calls += sum(s.target_calls for s in record.outcome.spend.values())
        points.append(CurvePoint(record.step, calls, record.outcome.incumbent_version_after,
                                 record.outcome.incumbent_val))
    return tuple(points)
