"""The harm audit: accepted rules re-tested at an epoch's end, and taken out when they do not hold.

A rule confirmed in screening on a failure that was noise, and accepted because validation found
no loss, can be harmful where validation cannot see it (it breaks a kind the skill does not cover
yet). It then blocks the rules it breaks: they fix nothing alone while it is there, and deleting
it fixes no training failure, so screening never undoes it. So at each epoch's end, before the
slow update, the trainer audits the rules it accepted on screening evidence
(:class:`~skillopt_ci.train.history.EditEvidence`) that are still in the incumbent and were not
re-confirmed by an earlier audit: audited fewest times first, then newest first, at most
:data:`MAX_AUDITS` per epoch, each against the incumbent as the audits before it left it.

1. *Re-confirmation*, paired: the incumbent against the incumbent without the rule, on the
   training tasks the rule fixed when it was accepted (those screening confirmed first; at most
   :data:`WIDTH`), in rounds at fresh sample indices derived from the audit step and the round
   (so a resumed audit redraws nothing). A pair is *won* when the incumbent scores above the skill
   without the rule, *lost* when below. The rule is re-confirmed as soon as wins exceed losses by
   :data:`NET`, within :data:`PAIRS` pairs; the rounds stop as soon as that can no longer happen.
2. *Validation*, only for a rule that was not re-confirmed: both sides once more on every
   validation task, at the same fresh sample index, paired per task and repeat. The rule is kept
   only when the skill without it is worse there by the exact one-sided sign test on the
   discordant pairs at :data:`KEEP_ALPHA`; otherwise (removal non-inferior, let alone
   significantly better) it is removed.

A re-confirmed rule is kept without spending validation on it: its effect was shown again where it
is concentrated. Removing a rule is a new version (the incumbent without it); keeping one is
recorded too, each with a one-line reason. Decisions are pure functions here; evaluations go
through the :class:`~skillopt_ci.train.evaluate.StageEvaluator`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from skillopt_ci.core.credit import means
from skillopt_ci.core.edits import Edit, EditCaps, EditOutcome, apply_edits
from skillopt_ci.core.records import TaskResult
from skillopt_ci.core.sequential import fresh_offset
from skillopt_ci.core.signtest import sign_test
from skillopt_ci.core.task import Task
from skillopt_ci.engine.rundir import RunDir
from skillopt_ci.train.evaluate import StageEvaluator
from skillopt_ci.train.gate import GateResult
from skillopt_ci.train.gate_result import Verdict
from skillopt_ci.train.history import (
    AuditNote,
    Decision,
    EditEvidence,
    StageSpend,
    StepKind,
    StepRecord,
)
from skillopt_ci.train.optimizer import Rejection, classify_rejection
from skillopt_ci.train.screen import confirm_label, control_of

MAX_AUDITS = 4  # rules audited per epoch (bounds the calls)
WIDTH = 2  # evidence tasks re-run per round
PAIRS = 16  # paired re-runs at most per rule (rounds = PAIRS / tasks)
NET = 3  # wins minus losses that re-confirm a rule
KEEP_ALPHA = 0.25  # a rule is kept when validation without it is worse at this level (sign test)
STAGES = ("confirmation", "validation")


def removal_of(edit: Edit) -> Edit | None:
    """The edit that takes ``edit`` back out of a skill it was applied to: a delete of the text an
    append or insert added, a replace of a replacement by its anchor; ``None`` for a delete (where
    it was is not known) or an edit that added nothing."""
    if edit.op in ("append", "insert_after") and edit.text.strip():
        return Edit("delete", anchor=edit.text.strip("\n"), rationale="harm audit: removed", source="audit",
                    part=edit.part)
    if edit.op == "replace" and edit.text.strip():
        return Edit("replace", text=edit.anchor, anchor=edit.text, rationale="harm audit: reverted", source="audit",
                    part=edit.part)
    return None


def without(text: str, edit: Edit, caps: EditCaps) -> tuple[str, EditOutcome] | None:
    """``text`` without ``edit`` and the removal's outcome, or ``None`` when the edit is not (or
    not unambiguously) in ``text`` any more."""
    removal = removal_of(edit)
    if removal is None:
        return None
    # the removal shrinks the skill: the token cap never refuses it
    out, (outcome,) = apply_edits(text, [removal], replace(caps, max_edit_chars=max(caps.max_edit_chars,
                                                                                     len(removal.text))))
    return (out, outcome) if outcome.applied else None


def fixed_tasks(sources: Sequence[str], rollout: Mapping[str, float], alone: Mapping[str, float]) -> tuple[str, ...]:
    """The ``sources`` an edit alone scored above the rollout on (what screening called fixed)."""
    return tuple(t for t in sources if t in rollout and t in alone and alone[t] > rollout[t])


def confirmed_first(fixed: Sequence[str], rounds: Sequence[tuple[Mapping[str, float], Mapping[str, float]]]
                    ) -> tuple[str, ...]:
    """``fixed`` ordered by how well each task did in the screening's paired rounds (edit,
    incumbent): discordant wins minus losses, best first (ties keep their order)."""
    net = dict.fromkeys(fixed, 0)
    for edit, control in rounds:
        for t in net:
            if t in edit and t in control:
                net[t] += (edit[t] > control[t]) - (edit[t] < control[t])
    return tuple(sorted(fixed, key=lambda t: -net[t]))


def screened_fixes(step_dir: Path, index: int, sources: tuple[str, ...]) -> tuple[str, ...]:
    """The training tasks edit ``index`` of the step in ``step_dir`` fixed alone in screening
    (read back from the step's rollout and screening runs), confirmed ones first."""
    screen = step_dir / "screen"
    runs = [step_dir / "rollout", screen / f"edit-{index}"]
    if not all((run / "results.jsonl").exists() for run in runs):
        return ()
    rollout, alone = (means(RunDir(run).load_results(), list(sources)) for run in runs)
    fixed = fixed_tasks(sources, rollout, alone)
    rounds: list[tuple[dict[str, float], dict[str, float]]] = []
    while (screen / (run := confirm_label(index, "confirm", len(rounds) + 1)) / "results.jsonl").exists():
        rounds.append((means(RunDir(screen / run).load_results(), list(fixed)),
                       control_of(screen, index, len(rounds) + 1, fixed)))
    return confirmed_first(fixed, rounds)


def new_evidence(history: Sequence[StepRecord], known: Sequence[EditEvidence], steps: Path) -> list[EditEvidence]:
    """The evidence of the accepted steps in ``history`` not yet in ``known`` (run directory ``steps``)."""
    seen = {e.step for e in known}
    return [e for r in history if r.kind is StepKind.STEP and r.decision is Decision.ACCEPTED and r.step not in seen
            for e in evidence_of(r, partial(screened_fixes, steps / r.step))]


def evidence_of(record: StepRecord, fixed: Callable[[int, tuple[str, ...]], tuple[str, ...]]) -> list[EditEvidence]:
    """The evidence of each edit an accepted, confirmed step added: ``fixed(index, sources)`` gives
    the training tasks edit ``index`` of the screening fixed alone. Empty for any other step (a
    rule accepted on a validation gain carries no screening evidence and is not audited)."""
    screen = record.screen
    if screen is None or not screen.confirmed or record.outcome is None or record.candidate_version is None:
        return []
    kept = record.kept_edits()
    # an edit proposed only by success reflections was screened on all the batch's failures
    batch = record.rollout.failures if record.rollout else ()
    return [EditEvidence(record.step, i, e.edit, fixed(i, e.failures or batch) or e.failures or batch, *e.paired)
            for i, e in enumerate(screen.edits) if e.kept and e.paired is not None and e.edit in kept]


def pick(evidence: Sequence[EditEvidence], text: str, caps: EditCaps, limit: int = MAX_AUDITS) -> list[int]:
    """Indices into ``evidence`` of the rules to audit against ``text``: those still in it and not
    re-confirmed by an earlier audit, audited fewest times first, then newest first; at most
    ``limit``. In a run that trains the body and the description together, a description edit is
    not audited: its evidence is whether the skill was used, which this re-test by score cannot
    see while the body may not yet do the work (a description-only run scores triggering alone)."""
    both = "body" in caps.parts and "description" in caps.parts
    live = [i for i, e in enumerate(evidence) if e.removed_by is None and not e.reconfirmed
            and not (both and e.edit.part == "description") and without(text, e.edit, caps) is not None]
    return sorted(live, key=lambda i: (evidence[i].audits, -i))[:limit]


@dataclass(frozen=True)
class Audited:
    """One audit's decision: the note, its reason, and for a removal the text without the rule,
    the removal's outcome and its validation results' directory and mean."""

    note: AuditNote
    reason: str
    text: str
    outcome: EditOutcome
    val_dir: str | None
    marks: tuple[StageSpend, ...]

    @property
    def gate_result(self) -> GateResult | None:
        """The removal against the rule on validation, as the step records show a gate's."""
        n = self.note
        if n.with_val is None:
            return None
        delta = None if n.without_val is None else round(n.without_val - n.with_val, 6)
        return GateResult(Verdict.ACCEPTED if n.removed else Verdict.REJECTED, self.reason, n.without_val, n.with_val,
                          delta)

    @property
    def rejection(self) -> Rejection:
        """What the optimizer's memory is told of a removed rule: refuted when, on validation, it did
        not score above the skill without it; unproven otherwise."""
        return classify_rejection(self.reason, validated=self.note.with_val is not None,
                                  candidate_val=self.note.with_val, incumbent_val=self.note.without_val)


@dataclass
class Auditor:
    evaluator: StageEvaluator
    val_tasks: Sequence[Task]
    caps: EditCaps
    reading: Callable[[], StageSpend]

    def audit(self, step_id: str, text: str, evidence: EditEvidence) -> Audited:
        """Audit ``evidence``'s rule in the incumbent ``text`` (which must hold it: see :func:`pick`),
        its evaluations under ``steps/<step_id>/``."""
        found = without(text, evidence.edit, self.caps)
        assert found is not None, "audit a rule the incumbent holds"
        bare, outcome = found
        marks: tuple[StageSpend, ...] = (self.reading(),)
        wins, losses = self.reconfirm(step_id, text, bare, evidence.tasks[:WIDTH])
        marks += (self.reading(),)
        pairs = f"its evidence {'task' if len(evidence.tasks[:WIDTH]) == 1 else 'tasks'} won {wins} of " \
                f"{wins + losses} discordant paired re-runs against the skill without it"
        note = AuditNote(evidence.step, evidence.edit, evidence.tasks[:WIDTH], wins, losses, wins - losses >= NET,
                         False)
        if note.reconfirmed:
            return Audited(note, f"kept: {pairs}", text, outcome, None, marks)
        with_, without_ = self.validate(step_id, text, bare)
        better, worse = discordant(without_, with_)
        p_better, p_worse = sign_test(better, worse), sign_test(worse, better)
        note = AuditNote(note.step, note.edit, note.tasks, wins, losses, False, p_worse > KEEP_ALPHA,
                         mean_of(with_), mean_of(without_), better, worse, round(p_better, 6))
        val = (f"without it validation {fmt(note.without_val)} vs {fmt(note.with_val)}, {better} of "
               f"{better + worse} discordant pairs better")
        if note.removed:
            return Audited(note, f"removed: {val} (p {p_better:.3f}); {pairs}", bare, outcome,
                           f"steps/{step_id}/val-without", marks)
        return Audited(note, f"kept: {pairs}, but {val} and {worse} worse (p {p_worse:.3f})", text, outcome, None,
                       marks)

    def reconfirm(self, step_id: str, text: str, bare: str, tasks: Sequence[str]) -> tuple[int, int]:
        """Paired rounds on ``tasks``, ``text`` against ``bare`` at the same fresh sample index:
        (pairs won, pairs lost), stopped once decided."""
        if not tasks:
            return 0, 0
        wanted = set(tasks)
        chosen = tuple(t for t in self.evaluator.suite.tasks("train") if t.id in wanted)
        rounds = math.ceil(PAIRS / len(tasks))
        wins = losses = 0
        for round_no in range(1, rounds + 1):
            at = fresh_offset(step_id, "confirm", round_no)
            runs = [means(self.evaluator.evaluate(t, "train", f"steps/{step_id}/confirm-{round_no}-{side}",
                                                  sample_offset=at, tasks=chosen,
                                                  label=f"{step_id} confirm {round_no}").results, list(tasks))
                    for t, side in ((text, "with"), (bare, "without"))]
            for t in tasks:
                if t in runs[0] and t in runs[1]:
                    wins += runs[0][t] > runs[1][t]
                    losses += runs[0][t] < runs[1][t]
            left = (rounds - round_no) * len(tasks)
            if wins - losses >= NET or wins - losses + left < NET:
                break
        return wins, losses

    def validate(self, step_id: str, text: str, bare: str) -> tuple[dict[tuple[str, int], float],
                                                                    dict[tuple[str, int], float]]:
        """Both sides on every validation task at the same fresh sample index: score per (task, repeat)."""
        at = fresh_offset(step_id, "validation", 1)
        return tuple(scores(self.evaluator.evaluate(t, "val", f"steps/{step_id}/val-{side}", sample_offset=at,
                                                    label=f"{step_id} val {side}").results)
                     for t, side in ((text, "with"), (bare, "without")))  # type: ignore[return-value]  # two sides


def scores(results: Sequence[TaskResult]) -> dict[tuple[str, int], float]:
    """Per (task, repeat) with a valid measurement: its score (errored rollouts are missing data)."""
    return {(r.task_id, r.repeat): float(r.score) for r in results if r.ok and r.score is not None}


def discordant(a: Mapping[tuple[str, int], float], b: Mapping[tuple[str, int], float]) -> tuple[int, int]:
    """Pairs measured on both sides where ``a`` scores above ``b``, and below."""
    both = [k for k in a if k in b]
    return sum(a[k] > b[k] for k in both), sum(a[k] < b[k] for k in both)


def mean_of(samples: Mapping[tuple[str, int], float]) -> float | None:
    """The mean over tasks of each task's mean over its repeats."""
    per: dict[str, list[float]] = {}
    for (task, _), v in samples.items():
        per.setdefault(task, []).append(v)
    return sum(sum(v) / len(v) for v in per.values()) / len(per) if per else None


def fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"
