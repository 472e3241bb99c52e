"""Screening a training step's candidate before validation spends anything on it.

The edits of a step were proposed for the rollout's failures on the training minibatch. Before
validation, the candidate is re-run on those failures and on a few of the minibatch's successes
(to catch breakage), with fresh sample indices derived from the step (so a failure the incumbent
only had by bad luck is not the candidate's to fix). A failure is *fixed* when its score rises
above the rollout's, a success *broken* when its score falls below it. A candidate passes when it
fixes at least one failure and breaks no more successes than it fixes; otherwise the step is
rejected without validation.

With ``screen_edits_alone``, a candidate of several edits first has each edit screened alone on
the failures it was proposed for (plus the same successes), when that costs at most
:data:`ALONE_COST_FACTOR` times the candidate's own screen; an edit that fixes none of its failures,
or breaks more successes than it fixes, is dropped, and the candidate is rebuilt from the others
(applied in order), so a harmful edit cannot ride in with a good one. An edit that cannot be
applied alone (its anchor comes from another edit) is kept. An edit proposed only by success
reflections has no failures to fix and is dropped only for breakage.

Everything here is deterministic given the step, so a resumed step re-reads its screening runs
from disk and decides the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from skillopt_ci.core.edits import Edit, EditCaps, apply_edits
from skillopt_ci.core.records import task_scores
from skillopt_ci.train.evaluate import StageEvaluator
from skillopt_ci.train.history import ScreenedEdit, ScreenNote
from skillopt_ci.train.propose import Proposed

SUCCESSES = 3  # minibatch successes re-run to catch breakage
ALONE_COST_FACTOR = 4  # screening edits alone may cost this many times the candidate's screen
# (the default edit budget starts at 4 edits, each proposed for the whole failure group)
SAMPLE_BASE = 1000  # screening sample indices start here, clear of the rollouts' (one per epoch)


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
    alone: bool  # ``train.screen_edits_alone``

    @property
    def active(self) -> bool:
        return self.candidate or self.alone

    def screen(self, step_id: str, step_number: int, incumbent_text: str, proposed: Proposed) -> Screening:
        """Screen ``proposed``'s candidate (step ``step_number`` of the run picks the samples)."""
        failures, successes = proposed.rollout.failures, proposed.successes[:SUCCESSES]
        offset = SAMPLE_BASE + step_number
        applied = tuple(proposed.applied)
        text = proposed.candidate_text or incumbent_text

        def note(result: Count | None, edits: Sequence[ScreenedEdit], passed: bool, reason: str) -> ScreenNote:
            return ScreenNote(failures, successes, offset, None if result is None else result.fixed,
                              None if result is None else result.broken, tuple(edits), passed, reason)

        if not failures:
            return Screening(text, applied, note(None, (), True, "not screened: the rollout had no failures"))
        before = dict(proposed.scores)

        def run(candidate: str, tasks: Sequence[str], label: str) -> dict[str, float]:
            wanted = set(tasks)
            chosen = tuple(t for t in self.evaluator.suite.tasks("train") if t.id in wanted)
            outcome = self.evaluator.evaluate(candidate, "train", f"steps/{step_id}/screen/{label}",
                                              sample_offset=offset, tasks=chosen, label=f"{step_id} screen {label}")
            return {s.task_id: s.mean for s in task_scores(outcome.results, list(tasks)) if s.mean is not None}

        edits: list[ScreenedEdit] = []
        cost = sum(len(proposed.sources(e)) + len(successes) for e in applied)
        if self.alone and len(applied) > 1 and cost <= ALONE_COST_FACTOR * (len(failures) + len(successes)):
            edits = [self._alone(incumbent_text, i, e, proposed.sources(e), successes, before, run)
                     for i, e in enumerate(applied)]
            kept = tuple(e.edit for e in edits if e.kept)
            if len(kept) < len(applied):
                text, outcomes = apply_edits(incumbent_text, kept, self.caps)
                kept = tuple(o.edit for o in outcomes if o.applied)
            if not kept:
                return Screening(text, applied, note(None, edits, False, f"screened out: none of {len(applied)} "
                                                     "edits alone fixed the training failures it was proposed for"))
            applied = kept
        if not self.candidate:
            reason = (f"screening: kept {len(applied)} of {len(edits)} edits screened alone" if edits else
                      "not screened: " + ("a single edit" if len(applied) < 2 else "screening each edit costs too much"))
            return Screening(text, applied, note(None, edits, True, reason))
        result = count(before, run(text, (*failures, *successes), "candidate"), failures, successes)
        verdict = "screening" if result.passes else "screened out"
        return Screening(text, applied, note(result, edits, result.passes, f"{verdict}: {result.why()}"))

    def _alone(self, incumbent_text: str, index: int, edit: Edit, sources: tuple[str, ...], successes: Sequence[str],
               before: Mapping[str, float], run) -> ScreenedEdit:  # type: ignore[no-untyped-def]
        text, outcomes = apply_edits(incumbent_text, [edit], self.caps)
        if not all(o.applied for o in outcomes):
            return ScreenedEdit(edit, sources, 0, 0, True, "kept: cannot be applied alone")
        result = count(before, run(text, (*sources, *successes), f"edit-{index}"), sources, successes)
        if result.passes:
            return ScreenedEdit(edit, sources, result.fixed, result.broken, True, f"kept: alone it {result.why()}")
        return ScreenedEdit(edit, sources, result.fixed, result.broken, False,
                            f"screened out alone: {result.why()}"
                            + ("" if sources else " (proposed for no failure)"))
