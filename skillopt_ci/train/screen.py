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

1. *Alone*: first, each edit is applied alone to the incumbent and run once on the failures of the
   reflections that proposed it (an edit proposed only by success reflections: on all the
   batch's failures). It *fixes* a failure when it scores above the rollout there. An edit that
   fixes nothing is dropped, except one proposed for a single failure: it is run alone once more
   at another fresh sample index, and dropped when it fixes nothing again. (A real fix that passes
   9 times in 10 misses its only failure 1 time in 10, two runs 1 time in 100, and all of two or
   more failures at most 1 time in 100 already, so only the single failure is worth a second run.
   That run costs one call; the alternative, a paired round, costs two, and on a failure both sides
   always fail it ties until the round cap. An edit of success reflections was not proposed for
   these failures: one run on all of them is its test.)
2. *Confirmation on discordant pairs* (:mod:`skillopt_ci.core.signtest`), for each edit that fixed
   something alone: the fixed tasks are re-run in rounds, the edit and the incumbent side by side at
   the same fresh sample index (one per round, shared by the step's edits, so the incumbent runs a
   task once per round however many edits are confirmed on it: :class:`Controls`); each round
   runs the (at most :data:`CONFIRM_WIDTH`) fixed tasks that have done best so far, none that lost
   more pairs than it won (a choice made from past pairs only, so under "no effect" every pair is
   still a fair coin). A pair is *discordant* when exactly one side scores
   higher; under "no effect" the edit wins it with probability 1/2 whatever the task's pass rate,
   so the test is calibrated at every base rate (a test on rounds won is not: a useless edit wins
   a round ``p(1-p)`` of the time). The pairs, pooled over the fixed tasks in a fixed order, feed
   a sequential probability ratio test of "wins with probability :data:`THETA`" against 1/2 that
   confirms when the likelihood ratio reaches ``k / ALPHA`` (``k`` the step's edits that fixed a
   failure alone, known before any pair is run, so under "no effect" the step's false-confirm rate
   stays under :data:`ALPHA` whatever ``k`` turns out to be) and rejects at
   :data:`REJECT_AT`, within :data:`MAX_PAIRS` pairs and :data:`CONFIRM_ROUNDS` rounds; it also
   stops, unconfirmed, once the rounds left cannot bring the wins it needs even if every pair
   were won, counting as discordant the share of pairs that has been so far (two more discordant
   than seen, to be generous). That rule reads only ties, which under "no effect" say nothing
   about who wins a discordant pair, so it cannot raise the false-confirm rate; it ends early the
   edits that tie round after round (a fix that did not fix: both sides fail) and lets a weak
   target's fix, discordant about one pair in two, run the 40 rounds it may need.
3. *Breakage, paired*: a confirmed edit and the incumbent re-run up to :data:`SUCCESSES` of the
   rollout's successes at the same fresh sample index (a second round only when the first lost
   more pairs than it won). Counting flips against the rollout would not do: a success of a kind
   the skill does not cover was luck and "breaks" under any edit 9 times in 10. The edit is
   dropped when its losses there are significant (:func:`~skillopt_ci.core.signtest.sign_test`
   at :data:`ALPHA`) or when they outweigh its confirmed wins: at least
   :data:`BREAK_MIN` more losses than wins, and more net losses per round on the successes than
   net wins per round on the fixed tasks (each a sum over the tasks run of how much the edit
   moved their pass rate, so the edit's net effect on the tasks it was run on is not positive).
   One loss more than wins is within noise (a success at 0.9 on both sides loses a pair 9 times
   in 100), so it never drops an edit on its own.

The candidate is rebuilt from the kept edits (applied in order). An edit that cannot be applied
alone (its anchor comes from another edit) cannot be run alone and is dropped. A delete that fixes
none of the failures in both alone runs is not dropped: deletes shorten the skill and need not fix
anything, so it is kept, unconfirmed ("passed to validation unconfirmed"), and the candidate then
goes to validation as not confirmed. A step whose rollout had no failures is not screened (its
edits come from success reflections); its candidate goes to validation, where, unconfirmed, it
must beat the incumbent. ``ScreenedEdit.pairs`` is ``None`` exactly for the edits never run
paired, otherwise the (wins, losses) of their confirmation.

Under a target-call budget, screening spends at most what the plan leaves it
(:meth:`~skillopt_ci.train.call_plan.CallPlan.screening_left`): an edit whose alone run and
least confirmation no longer fit is dropped as not measured, and a confirmation stops,
unconfirmed, before a round that would not leave its breakage rounds room. Neither is a verdict
on the edit (the optimizer's memory lists it as unproven).

Everything here is deterministic given the step, so a resumed step re-reads its screening runs
from disk and decides the same.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from skillopt_ci.core.credit import means
from skillopt_ci.core.edits import DESCRIPTION, Edit, EditCaps, apply_edits, is_deletion
from skillopt_ci.core.sequential import fresh_offset
from skillopt_ci.core.signtest import CONFIRM, CONTINUE, Sprt, sign_test
from skillopt_ci.core.triggering import trigger_means
from skillopt_ci.engine.rundir import RunDir
from skillopt_ci.train.evaluate import StageEvaluator
from skillopt_ci.train.history import ScreenedEdit, ScreenNote
from skillopt_ci.train.propose import Proposed

SUCCESSES = 3  # minibatch successes re-run to catch breakage
SAMPLE_BASE = 1000  # screening sample indices start here, clear of the rollouts' (one per epoch)
ALPHA = 0.05  # the step's false-confirm rate (split over its edits) and the breakage test's level
THETA = 0.9  # the win rate on discordant pairs the confirmation test is powered for
REJECT_AT = 0.1  # the likelihood ratio at or below which the confirmation test gives up
MAX_PAIRS = 40  # discordant pairs at most per edit
CONFIRM_ROUNDS = 40  # paired rounds at most per edit (a weak target's fix is discordant about one pair in two)
CONFIRM_WIDTH = 3  # fixed tasks run side by side per round (more: fewer rounds, more wasted pairs)
BREAK_ROUNDS = 2  # paired rounds on the successes at most (the second only after a net loss)
BREAK_MIN = 2  # net paired losses on the successes below which an edit is never dropped for breakage

Runner = Callable[..., dict[str, float]]  # (skill text, task ids, label[, sample offset[, trigger]]) -> per task
Allowance = Callable[[], "float | None"]  # rollouts screening may still run (``None``: no budget)


def confirm_label(index: int, side: str, round_no: int) -> str:
    """The run label of edit ``index``'s paired confirmation round ``round_no`` (``side``: the edit's
    ``confirm`` run or the incumbent's ``control``); the harm audit reads them back."""
    return f"edit-{index}-{side}-{round_no}"


def control_of(screen_dir: Path, index: int, round_no: int, tasks: Sequence[str]) -> dict[str, float]:
    """The incumbent's scores on ``tasks`` in confirmation round ``round_no`` of edit ``index``, read
    back from a step's ``screen`` folder: its own control run first, then the round's other edits'
    (:class:`Controls` runs a task the incumbent already ran in the round only once)."""
    own = confirm_label(index, "control", round_no)
    pattern = re.compile(rf"edit-\d+-control-{round_no}")  # confirm_label(any index, "control", round_no)
    runs = [screen_dir / own, *sorted(d for d in screen_dir.glob("edit-*") if pattern.fullmatch(d.name) and d.name != own)]
    found: dict[str, float] = {}
    for run in runs:
        if (run / "results.jsonl").exists():
            found = {**means(RunDir(run).load_results(), [t for t in tasks if t not in found]), **found}
    return found


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
    allowance: Allowance = lambda: None  # what a target-call budget leaves for screening (train.call_plan)

    def affords(self, rollouts: int) -> bool:
        left = self.allowance()
        return left is None or rollouts <= left

    @property
    def active(self) -> bool:
        return self.candidate or self.alone

    def screen(self, step_id: str, step_number: int, incumbent_text: str, proposed: Proposed) -> Screening:
        """Screen ``proposed``'s candidate (step ``step_number`` of the run picks the samples)."""
        failures, successes = proposed.rollout.failures, proposed.successes[:SUCCESSES]
        offset = SAMPLE_BASE + step_number
        applied = tuple(proposed.applied)
        text = proposed.candidate_text or incumbent_text

        def run(candidate: str, tasks: Sequence[str], label: str, at: int = offset,
                trigger: bool = False) -> dict[str, float]:
            wanted = set(tasks)
            chosen = tuple(t for t in self.evaluator.suite.tasks("train") if t.id in wanted)
            outcome = self.evaluator.evaluate(candidate, "train", f"steps/{step_id}/screen/{label}",
                                              sample_offset=at, tasks=chosen, label=f"{step_id} screen {label}")
            return (trigger_means if trigger else means)(outcome.results, list(tasks))

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

        reserve = 2 * len(successes)  # the breakage rounds (both sides) a confirmed edit still needs
        first = [self._alone(step_id, incumbent_text, i, e, proposed, before, run, reserve) for i, e in enumerate(applied)]
        # The step's error rate is split over the edits that fixed a failure alone: a number known before
        # any pair is run, so under "no effect" the union bound holds whatever it turns out to be.
        fixing = sum(isinstance(a, Alone) for a in first)
        test = Sprt(theta=THETA, alpha=ALPHA, tests=max(1, fixing), reject_at=REJECT_AT, max_pairs=MAX_PAIRS)
        control = Controls(run, incumbent_text)
        edits = [self._paired(step_id, a, successes, reserve, run, control, test) if isinstance(a, Alone) else a
                 for a in first]
        kept = tuple(e.edit for e in edits if e.kept)
        if not kept:
            return Screening(incumbent_text, (), note(edits, False, f"screened out: none of {len(applied)} edits "
                                                                    "alone confirmed a fix"))
        text, outcomes = apply_edits(incumbent_text, kept, self.caps)
        kept = tuple(o.edit for o in outcomes if o.applied)
        confirmed = sum(1 for e in edits if e.kept and e.pairs is not None and e.edit in kept)
        unconfirmed = len(kept) - confirmed
        more = f", {unconfirmed} passed to validation unconfirmed" if unconfirmed else ""
        return Screening(text, kept, note(edits, True, f"screening: {confirmed} of {len(applied)} edits "
                                                       f"confirmed alone{more}"))

    def _confirm(self, step_id: str, index: int, text: str, fixed: Sequence[str], reserve: int,
                 run: Runner, control: Controls, test: Sprt, trigger: bool = False) -> tuple[str, int, int, int]:
        """The sequential test on discordant pairs over the first :data:`CONFIRM_WIDTH` tasks the
        edit fixed, round by round: (verdict, wins, losses, rounds run); ``trigger``: on whether
        the skill was used exactly when it should be (a description edit), not on the score."""
        net = dict.fromkeys(fixed, 0)  # per fixed task: its discordant wins minus losses so far
        wins = losses = rounds = paired = 0
        verdict = CONTINUE
        while verdict == CONTINUE and rounds < CONFIRM_ROUNDS:
            # The tasks that have done best so far (none that lost more than it won), in batch order on ties.
            tasks = sorted((t for t in fixed if net[t] >= 0), key=lambda t: -net[t])[:CONFIRM_WIDTH]
            rate = (wins + losses + 2) / (paired + 2)  # discordant so far, two more counted to be generous
            left = min((CONFIRM_ROUNDS - rounds) * len(tasks) * rate, test.max_pairs - wins - losses)
            if wins + left < test.wins_needed(losses):  # cannot confirm any more: stop paying for pairs
                break
            if not self.affords(2 * len(tasks) + reserve):  # the budget: unconfirmed, not refuted
                break
            rounds += 1
            at = fresh_offset(step_id, "confirm", rounds)  # one index per round: edits share the control
            again = run(text, tasks, confirm_label(index, "confirm", rounds), at, trigger)
            versus = control(tasks, confirm_label(index, "control", rounds), at, trigger)
            for t in tasks:
                paired += t in again and t in versus
                if t not in again or t not in versus or again[t] == versus[t]:
                    continue
                won = again[t] > versus[t]
                wins, losses, net[t] = wins + won, losses + (not won), net[t] + (1 if won else -1)
                verdict = test.verdict(wins, losses)
                if verdict != CONTINUE:
                    break
        return verdict, wins, losses, rounds

    def _breakage(self, step_id: str, index: int, text: str, successes: Sequence[str], run: Runner,
                  control: Controls) -> tuple[int, int, int]:
        """Paired rounds on the successes: (wins, losses, rounds run); a second round only after
        the first lost more pairs than it won."""
        wins = losses = rounds = 0
        while rounds < BREAK_ROUNDS and (rounds == 0 or losses > wins):
            rounds += 1
            at = fresh_offset(step_id, "successes", rounds)
            again = run(text, successes, f"edit-{index}-successes-{rounds}", at)
            versus = control(successes, f"edit-{index}-successes-control-{rounds}", at)
            for t in successes:
                if t in again and t in versus:
                    wins, losses = wins + (again[t] > versus[t]), losses + (again[t] < versus[t])
        return wins, losses, rounds

    def _alone(self, step_id: str, incumbent_text: str, index: int, edit: Edit, proposed: Proposed,
               before: Mapping[str, float], run: Runner, reserve: int = 0) -> ScreenedEdit | Alone:
        """Edit ``index`` run alone on its failures: dropped (or a delete kept unconfirmed) as a
        :class:`ScreenedEdit`, or what it fixed, to be confirmed."""
        proposed_for = proposed.sources(edit)
        # An edit proposed only for successes: every failure of the batch is one it may fix.
        sources = proposed_for or proposed.rollout.failures
        text, outcomes = apply_edits(incumbent_text, [edit], self.caps)
        if not all(o.applied for o in outcomes):
            return ScreenedEdit(edit, proposed_for, 0, 0, False, "screened out: cannot be applied alone")
        of = f"{len(sources)} training failures" if proposed_for else f"the batch's {len(sources)} training failures"
        if not self.affords(len(sources) + 2 * min(len(sources), CONFIRM_WIDTH) + reserve):
            return ScreenedEdit(edit, proposed_for, 0, 0, False, "screened out: the target-call budget left too "
                                                                 "few calls to screen it (not measured)")
        # A description edit fixes a trigger mistake when the skill is then used exactly when it should be,
        # whatever the work scored (train.target both: the body may not do the work yet).
        trigger = edit.part == DESCRIPTION
        before = dict(proposed.trigger_scores) if trigger else before
        after = run(text, sources, f"edit-{index}", trigger=trigger)
        fixed = [t for t in sources if t in after and t in before and after[t] > before[t]]
        runs = ""
        if not fixed and len(proposed_for) == 1:  # one sample of one failure: a real fix misses it 1 time in 10
            after = run(text, sources, f"edit-{index}-again", fresh_offset(step_id, f"alone-{index}", 2), trigger)
            fixed, runs = [t for t in sources if t in after and t in before and after[t] > before[t]], " in two runs"
        if fixed:
            return Alone(index, edit, proposed_for, text, tuple(fixed), of)
        if is_deletion(edit):
            return ScreenedEdit(edit, proposed_for, 0, 0, True, "kept: passed to validation unconfirmed "
                                                                f"(a delete that fixed none of {of}{runs})")
        return ScreenedEdit(edit, proposed_for, 0, 0, False, f"screened out alone: fixed none of {of}{runs}")

    def _paired(self, step_id: str, alone: Alone, successes: Sequence[str], reserve: int, run: Runner,
                control: Controls, test: Sprt) -> ScreenedEdit:
        """An edit that fixed failures alone, confirmed against the incumbent, then its breakage."""
        index, edit, proposed_for, text, fixed = alone.index, alone.edit, alone.proposed_for, alone.text, alone.fixed
        verdict, wins, losses, rounds = self._confirm(step_id, index, text, fixed, reserve, run, control, test,
                                                      edit.part == DESCRIPTION)
        done = (f"alone it fixed {len(fixed)} of {alone.of} and beat the incumbent in {wins} of {wins + losses} "
                "discordant paired re-runs")
        if verdict != CONFIRM:
            why = "" if losses > wins or not wins else ", not enough to confirm"
            if why and not self.affords(2 * min(len(fixed), CONFIRM_WIDTH) + reserve):
                why += " within the target-call budget"
            return ScreenedEdit(edit, proposed_for, len(fixed), 0, False, f"screened out: {done}{why}", pairs=(wins, losses))
        broken = 0
        if successes:
            b_wins, b_losses, b_rounds = self._breakage(step_id, index, text, successes, run, control)
            net = b_losses - b_wins
            outweighs = net >= BREAK_MIN and net / b_rounds > (wins - losses) / rounds
            if b_losses and (outweighs or sign_test(b_losses, b_wins) <= ALPHA):
                return ScreenedEdit(edit, proposed_for, len(fixed), b_losses, False,
                                    f"screened out: {done}, but lost {b_losses} and won {b_wins} paired re-runs "
                                    f"of {len(successes)} successes", pairs=(wins, losses))
            broken = b_losses
            if b_losses:
                done += f", lost {b_losses} and won {b_wins} paired re-runs of {len(successes)} successes"
        return ScreenedEdit(edit, proposed_for, len(fixed), broken, True, f"kept: {done}", pairs=(wins, losses))


@dataclass(frozen=True)
class Alone:
    """An edit that fixed failures run alone: what its confirmation starts from."""

    index: int
    edit: Edit
    proposed_for: tuple[str, ...]
    text: str
    fixed: tuple[str, ...]
    of: str  # which failures it was run on, in words


@dataclass
class Controls:
    """The incumbent's paired runs of one step's screening, shared by its edits: every edit is run
    against the incumbent at the same sample index per round, so a task the incumbent already ran
    there is not run again (two edits confirmed on the same failure share its control).
    Each edit's test stays exact; they are no longer independent, which the union bound over the
    step's edits does not need. A run's folder holds only the tasks it ran; the harm audit reads a
    round's control back from every edit's folder (:func:`control_of`)."""

    run: Runner
    text: str
    known: dict[tuple[int, str, bool], float] = field(default_factory=dict)

    def __call__(self, tasks: Sequence[str], label: str, at: int, trigger: bool = False) -> dict[str, float]:
        missing = [t for t in tasks if (at, t, trigger) not in self.known]
        if missing:
            got = self.run(self.text, missing, label, at, trigger)
            self.known.update({(at, t, trigger): got[t] for t in missing if t in got})
        return {t: self.known[(at, t, trigger)] for t in tasks if (at, t, trigger) in self.known}
