"""Planning a training run within ``budgets.max_target_calls``, and the best-so-far curve.

Contract:
- The run keeps back what its end needs: the final test (the baseline and the best skill on the
  test split, times repeats) is held from every evaluation before the test phase. A stage that
  reaches what is left anyway (it took more than planned) is not recorded, and the run goes to
  its test (the trainer), so no validation needs to be kept as slack.
- Before a step (or an epoch's slow update) its calls are estimated: the rollout batch, the least
  screening worth starting (two batches' worth of re-runs: one edit's alone run and paired
  confirmation) and the most any validation of the run took (credit assignment included; at least
  one full validation). When that does not fit in what is left, the run goes to the test phase
  and says why (``target-call budget: ...``) instead of starting a step it cannot finish.
- Screening shrinks to fit (:meth:`CallPlan.screening_left`): it may spend what is left after the
  step's validation, and an edit it cannot afford to screen is dropped as not measured, which the
  optimizer's memory does not hold against it.
- Pure: every figure comes from the history and the counts passed in, so a resumed run plans
  as the uninterrupted one did.
- :func:`best_so_far` is the curve "what each budget bought": after every recorded step, the
  cumulative target calls, the incumbent and its validation mean. Runs recorded before calls were
  counted have 0 calls per stage; their curve keeps the steps and says nothing about calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from skillopt_ci.train.history import StepRecord
from skillopt_ci.train.records import CurvePoint
from skillopt_ci.train.state import TrainState


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
        return self.test

    def validation_calls(self, history: Sequence[StepRecord]) -> int:
        """The most a validation is expected to take: the most any of this run took, at least one."""
        return max(self.validation, most(history, "validation"))

    def step_calls(self, history: Sequence[StepRecord], slow_update: bool = False) -> int:
        """What the next step (``slow_update``: the epoch's slow update, two batches and a
        validation) needs at least to be worth starting."""
        screen = 2 * self.batch if self.screening and not slow_update else 0
        return (2 if slow_update else 1) * self.batch + screen + self.validation_calls(history)

    def screening_left(self, history: Sequence[StepRecord], spent: int, baseline_calls: int) -> float:
        """The rollouts a step's screening may still run after ``spent`` calls: what is left once the
        final test and the step's validation are kept, over the calls a rollout takes (the
        baseline's validation, ``baseline_calls``, ran one rollout per validation sample)."""
        per_rollout = max(1.0, baseline_calls / self.validation) if self.validation else 1.0
        return max(0, self.budget - spent - self.reserve - self.validation_calls(history)) / per_rollout

    def allowance(self, state: TrainState, spent: Callable[[], int]) -> Callable[[], float]:
        """What a step of ``state``'s run may still screen, in rollouts, as calls are ``spent``."""
        return lambda: self.screening_left(state.history, spent(), state.baseline_calls)

    def stop_next(self, state: TrainState, steps_per_epoch: int, slow_update: bool, spent: int) -> str | None:
        """Why the run's next step (or slow update) does not fit in the target calls left, or ``None``."""
        if state.phase == "steps" and state.step < steps_per_epoch:
            what, need = f"step e{state.epoch}-s{state.step:02d}", self.step_calls(state.history)
        elif state.phase == "epoch_end" and slow_update and state.incumbent != state.epoch_start:
            what, need = f"the slow update of epoch {state.epoch}", self.step_calls(state.history, True)
        else:
            return None
        return self.stop_before(what, need, spent)

    def overrun(self, state: TrainState, spent: int) -> str:
        """Why the run went to its test from inside a stage that took more than planned."""
        what = f"step e{state.epoch}-s{state.step:02d}" if state.phase == "steps" else f"the end of epoch {state.epoch}"
        return (f"target-call budget: {what} took more than planned and stopped at {spent} of {self.budget} "
                f"target calls, then went to the final test with the {self.reserve} calls kept for it")

    def stop_before(self, what: str, need: int, spent: int) -> str | None:
        """Why ``what`` (needing ``need`` calls) should not start with ``spent`` calls spent, or ``None``."""
        left = self.budget - spent - self.reserve
        if need <= left:
            return None
        return (f"target-call budget: stopped before {what}, which may need {need} calls; "
                f"{max(left, 0)} left of {self.budget} after {spent} spent and {self.reserve} kept for "
                f"the final test")


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
