"""Screening a training step's candidate before validation spends anything on it.

The edits of a step were proposed for the rollout's failures on the training minibatch. Before
validation, the candidate is re-run on those failures and on a few of the minibatch's successes
(to catch breakage), with fresh sample indices derived from the step (so a failure the incumbent
only had by bad luck is not the candidate's to fix). A failure is *fixed* when its score rises
above the rollout's, a success *broken* when its score falls below it. A candidate passes when it
fixes at least one failure and breaks no more successes than it fixes; otherwise the step is
rejected without validation (``train.screening``).

``train.acceptance: screened`` (the default) screens every edit on its own and confirms each fix
against the incumbent, so a useless edit cannot pass on noise and a harmful edit cannot ride in
with a good one:

1. *Alone*: each edit is applied alone to the incumbent and run once on the failures of the
   reflections that proposed it. It *fixes* a failure when it scores above the rollout there. An
   edit that fixes nothing is dropped.
2. *Confirmation*: each fixed task is re-run in rounds, the edit and the incumbent side by side at
   the same fresh sample index; a round is a *win* when the edit scores above the incumbent. Per
   task this is a sequential probability ratio test of "the edit wins here with probability 0.8"
   against "0.2": each win multiplies the likelihood ratio by 4 and each non-win divides it by 4,
   so a task is decided at a net of +2 wins (confirmed) or -2, within :data:`CONFIRM_ROUNDS`
   rounds. Tasks are tested :data:`CONFIRM_WIDTH` at a time, in order; the edit is kept as soon as
   one of its fixed tasks is confirmed, dropped when none can be. The pairing matters: a failure that was noise (the incumbent usually gets it right) is
   "fixed" by any edit, but the incumbent wins it back as often, so it is not confirmed (about 1
   time in 100 where both sides are right 9 times in 10), while a real fix (0.9 against 0.1) is
   confirmed about 86 times in 100 per task. A confirmed edit then re-runs three rollout
   successes; one that breaks more of them than it confirmed fixes is dropped.

The candidate is rebuilt from the kept edits (applied in order). An edit proposed only by success
reflections has no failure to fix, and an edit that cannot be applied alone (its anchor comes from
another edit) cannot be run alone: nothing can confirm either, so both are dropped. A step whose
rollout had no failures is not screened (its edits come from success reflections); its candidate
goes to validation, where, unconfirmed, it must beat the incumbent.

Everything here is deterministic given the step, so a resumed step re-reads its screening runs
from disk and decides the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from skillopt_ci.core.credit import means
from skillopt_ci.core.edits import Edit, EditCaps, apply_edits, is_deletion
from skillopt_ci.core.sequential import fresh_offset
from skillopt_ci.train.evaluate import StageEvaluator
from skillopt_ci.train.history import ScreenedEdit, ScreenNote
from skillopt_ci.train.propose import Proposed

SUCCESSES = 3  # minibatch successes re-run to catch breakage
SAMPLE_BASE = 1000  # screening sample indices start here, clear of the rollouts' (one per epoch)
CONFIRM_NET = 2  # net improvements that decide the confirmation test (likelihood ratio 4**2 = 16)
CONFIRM_ROUNDS = 4  # rounds of the paired test per task before it counts as not confirmed
CONFIRM_WIDTH = 2  # fixed tasks tested side by side at a time (more: fewer rounds, more calls)

Runner = Callable[..., dict[str, float]]  # (skill text, task ids, label[, sample offset]) -> score per task


@dataclass(frozen=True)
class Count:
    fixed: int
    failures: int
    broken: int
    successes: int

    @property
    def passes(self) -> bool:
        """Fixes something (when there is something to fix) and breaks no more than it fixes."""
        return (self.fixed > 0 or self.failures == 0) and self.broken <= self.fixed

    def why(self) -> str:
        fixed = f"fixed {self.fixed} of {self.failures} training failures"
        if self.broken > self.fixed or (self.broken and self.passes):
            return f"{fixed}, broke {self.broken} of {self.successes} successes"
        return fixed


def count(before: Mapping[str, float], after: Mapping[str, float], failures: Sequence[str],
          successes: Sequence[str]) -> Count:
    """How many ``failures`` scored higher ``after`` than ``before``, how many ``successes``
    lower. A task without a valid measurement on both sides counts as neither."""
    both = [t for t in (*failures, *successes) if t in before and t in after]
    fixed = sum(1 for t in failures if t in both and after[t] > before[t])
    broken = sum(1 for t in successes if t in both and after[t] < before[t])
    return Count(fixed, len(failures), broken, len(successes))


@dataclass(frozen=True)
class Screening:
    """The screened candidate: its text and edits (fewer than proposed if some were dropped)."""

    text: str
    applied: tuple[Edit, ...]
    note: ScreenNote

    @property
    def passed(self) -> bool:
        return self.note.passed

    @property
    def dropped(self) -> list[ScreenedEdit]:
        return self.note.dropped


@dataclass
class Screener:
    evaluator: StageEvaluator
    caps: EditCaps
    candidate: bool  # ``train.screening``
    alone: bool  # the acceptance rule screens each edit alone (``screened``)

    @property
    def active(self) -> bool:
        return self.candidate or self.alone

    def screen(self, step_id: str, step_number: int, incumbent_text: str, proposed: Proposed) -> Screening:
        """Screen ``proposed``'s candidate (step ``step_number`` of the run picks the samples)."""
        failures, successes = proposed.rollout.failures, proposed.successes[:SUCCESSES]
        offset = SAMPLE_BASE + step_number
        applied = tuple(proposed.applied)
        text = proposed.candidate_text or incumbent_text

        def run(candidate: str, tasks: Sequence[str], label: str, at: int = offset) -> dict[str, float]:
            wanted = set(tasks)
            chosen = tuple(t for t in self.evaluator.suite.tasks("train") if t.id in wanted)
            outcome = self.evaluator.evaluate(candidate, "train", f"steps/{step_id}/screen/{label}",
                                              sample_offset=at, tasks=chosen, label=f"{step_id} screen {label}")
            return means(outcome.results, list(tasks))

        if not failures:
            return Screening(text, applied, ScreenNote(failures, successes, offset, None, None, (), True,
                                                       "not screened: the rollout had no failures"))
        before = dict(proposed.scores)
        if self.alone:
            return self._controlled(step_id, offset, incumbent_text, proposed, applied, before, run)
        result = count(before, run(text, (*failures, *successes), "candidate"), failures, successes)
        verdict = "screening" if result.passes else "screened out"
        return Screening(text, applied, ScreenNote(failures, successes, offset, result.fixed, result.broken, (),
                                                   result.passes, f"{verdict}: {result.why()}"))

    def _controlled(self, step_id: str, offset: int, incumbent_text: str, proposed: Proposed,
                    applied: tuple[Edit, ...], before: Mapping[str, float], run: Runner) -> Screening:
        """Each edit alone, then its confirmation against the incumbent (see the module docstring)."""
        failures, successes = proposed.rollout.failures, proposed.successes[:SUCCESSES]

        def note(edits: Sequence[ScreenedEdit], passed: bool, reason: str) -> ScreenNote:
            kept = [e for e in edits if e.kept]
            return ScreenNote(failures, successes, offset, sum(e.fixed for e in kept), sum(e.broken for e in kept),
                              tuple(edits), passed, reason)

        edits = [self._confirm_alone(step_id, incumbent_text, i, e, proposed, before, run)
                 for i, e in enumerate(applied)]
        kept = tuple(e.edit for e in edits if e.kept)
        if not kept:
            return Screening(incumbent_text, (), note(edits, False, f"screened out: none of {len(applied)} edits "
                                                                    "alone confirmed a fix"))
        text, outcomes = apply_edits(incumbent_text, kept, self.caps)
        kept = tuple(o.edit for o in outcomes if o.applied)
        return Screening(text, kept, note(edits, True, f"screening: {len(kept)} of {len(applied)} edits "
                                                       "confirmed alone"))

    def _confirm(self, step_id: str, index: int, text: str, incumbent_text: str, fixed: Sequence[str],
                 run: Runner) -> tuple[int, int, int]:
        """The per-task paired test on the tasks an edit fixed, :data:`CONFIRM_WIDTH` tasks at a time
        (in order), each for at most :data:`CONFIRM_ROUNDS` rounds, stopping at the first confirmed
        task: (tasks confirmed, paired wins, paired non-wins)."""
        net = dict.fromkeys(fixed, 0)  # per fixed task: paired wins minus non-wins so far
        rounds = dict.fromkeys(fixed, 0)
        good = bad = 0
        for look in range(1, len(fixed) * CONFIRM_ROUNDS + 1):
            open_ = [t for t in fixed if abs(net[t]) < CONFIRM_NET and rounds[t] < CONFIRM_ROUNDS][:CONFIRM_WIDTH]
            if not open_ or any(v >= CONFIRM_NET for v in net.values()):
                break
            at = fresh_offset(step_id, f"confirm-{index}", look)
            again = run(text, open_, f"edit-{index}-confirm-{look}", at)
            control = run(incumbent_text, open_, f"edit-{index}-control-{look}", at)
            for t in open_:
                rounds[t] += 1
                if t in again and t in control:
                    win = again[t] > control[t]
                    net[t] += 1 if win else -1
                    good, bad = good + win, bad + (not win)
        return sum(1 for v in net.values() if v >= CONFIRM_NET), good, bad

    def _confirm_alone(self, step_id: str, incumbent_text: str, index: int, edit: Edit, proposed: Proposed,
                       before: Mapping[str, float], run: Runner) -> ScreenedEdit:
        successes = proposed.successes[:SUCCESSES]
        sources = proposed.sources(edit)
        text, outcomes = apply_edits(incumbent_text, [edit], self.caps)
        if not all(o.applied for o in outcomes):
            return ScreenedEdit(edit, sources, 0, 0, False, "screened out: cannot be applied alone")
        judged = "kept for validation: a deletion is judged there (it need only not lose)"
        if not sources:
            return ScreenedEdit(edit, sources, 0, 0, True, judged) if is_deletion(edit) else \
                ScreenedEdit(edit, sources, 0, 0, False, "screened out: proposed for no failure, so nothing can confirm it")
        after = run(text, sources, f"edit-{index}")
        fixed = [t for t in sources if t in after and t in before and after[t] > before[t]]
        if not fixed and is_deletion(edit):
            return ScreenedEdit(edit, sources, 0, 0, True, f"{judged}; alone it fixed none of {len(sources)} "
                                                          "training failures")
        if not fixed:
            return ScreenedEdit(edit, sources, 0, 0, False, f"screened out alone: fixed none of {len(sources)} "
                                                           "training failures")
        confirmed, good, bad = self._confirm(step_id, index, text, incumbent_text, fixed, run)
        broken = 0
        if confirmed and successes:  # breakage, checked once the edit has shown it fixes something
            again = run(text, successes, f"edit-{index}-successes", fresh_offset(step_id, f"successes-{index}", 1))
            broken = sum(1 for t in successes if t in again and t in before and again[t] < before[t])
        done = (f"fixed {len(fixed)} of {len(sources)} training failures, confirmed {confirmed} "
                f"(beat the incumbent in {good} of {good + bad} paired re-runs)")
        if broken:
            done += f", broke {broken} of {len(successes)} successes"
        kept = confirmed > 0 and broken <= confirmed
        return ScreenedEdit(edit, sources, len(fixed), broken, kept,
                            f"{'kept' if kept else 'screened out'}: alone it {done}", (good, bad))
