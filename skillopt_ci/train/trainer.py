"""The training loop: rollout → reflect → merge → select → apply → screen → gate → record.

Per epoch the train split is shuffled (seeded by ``train.seed`` and the epoch) into minibatches;
each step rolls the incumbent out on one batch, asks the optimizer to reflect on failures and
successes, merges, selects and applies at most the step's edit budget, screens the edits
(:mod:`~skillopt_ci.train.screen`) and lets the acceptance rule judge the candidate on validation.
At each epoch's end the accepted rules are audited (:mod:`~skillopt_ci.train.audit`), the slow
update rewrites the protected ``durable`` block (gated like any candidate) and the meta skill is
updated. At the end the baseline and the best skill are scored on the sealed test split.

Every stage ends with a checkpoint (``state.json``); re-running the same command resumes and
makes the same decisions as an uninterrupted run (all randomness is derived from the seed and the
step). Budgets stop the run at a checkpoint; a target-call budget is planned
(:mod:`~skillopt_ci.train.call_plan`) so that the run still ends with its test.

Collaborators do the work of a step, each testable alone: the proposer, the screener, the
validation gate, the credit assigner and the auditor.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from skillopt_ci.core.compare import ComparePolicy
from skillopt_ci.core.edits import (
    Edit,
    EditCaps,
    ensure_protected_block,
    rewrite_protected_block,
    unified_diff,
)
from skillopt_ci.core.errors import RuntimeFailure
from skillopt_ci.core.records import TaskResult
from skillopt_ci.core.skill import Skill
from skillopt_ci.engine.budgets import budget_limits
from skillopt_ci.engine.evaluation import EvalSession
from skillopt_ci.engine.rundir import RunDir, write_atomic, write_json_atomic
from skillopt_ci.inputs.config import Budgets, Config, SkillEntry, TrainPolicy
from skillopt_ci.inputs.suite import Suite
from skillopt_ci.models.budget import BudgetReached
from skillopt_ci.train import audit as harm
from skillopt_ci.train.acceptance import only_deletes
from skillopt_ci.train.call_plan import CallPlan
from skillopt_ci.train.credit import CreditAssigner
from skillopt_ci.train.evaluate import BudgetExhausted, BudgetMeter, StageEvaluator
from skillopt_ci.train.gate import GateResult, ValidationGate, fmt
from skillopt_ci.train.gate_result import Verdict
from skillopt_ci.train.history import (
    CreditNote,
    Decision,
    EpochRecord,
    MetaSkillNote,
    StageSpend,
    StepKind,
    StepOutcome,
    StepRecord,
)
from skillopt_ci.train.optimizer import (
    EpochEdit,
    OptimizerBuffer,
    Rejection,
    categorize,
    classify_rejection,
    edit_budget,
    slow_update,
    update_meta_skill,
)
from skillopt_ci.train.propose import EditProposer, Proposed
from skillopt_ci.train.screen import Screener
from skillopt_ci.train.state import TrainState, Version

__all__ = ["BudgetExhausted", "Trainer"]

DURABLE_BLOCK = "durable"
STAGES = ("rollout", "reflect", "validation")
SCREENED_STAGES = ("rollout", "reflect", "screening", "validation")  # a step screened before validation


class Trainer:
    """One training run of one skill into ``run_dir``. Use :meth:`run`."""

    def __init__(self, config: Config, entry: SkillEntry, skill: Skill, suite: Suite, session: EvalSession,
                 run_dir: Path, *, policy: TrainPolicy, budgets: Budgets, log: Callable[[str], None] = print,
                 clock: Callable[[], float] = time.monotonic):
        self.config, self.entry, self.baseline, self.suite = config, entry, skill, suite
        self.session, self.dir, self.policy, self.log = session, run_dir, policy, log
        self.caps = EditCaps(policy.max_edit_chars, policy.max_skill_tokens, policy.parts)
        val_tasks = suite.tasks("val")
        self.val_ids = [t.id for t in val_tasks]
        self.train_tasks = suite.tasks("train")
        repeats = policy.repeats or suite.repeats
        self.steps_per_epoch = math.ceil(len(self.train_tasks) / policy.batch_size)
        self.meter = BudgetMeter(session, budgets, clock)
        self.evaluator = StageEvaluator(session, suite, entry.name, run_dir, repeats, self.meter.remaining,
                                        parent=skill)
        self.meter.cancelled = lambda: self.evaluator.cancelled
        self.proposer = EditProposer(self.evaluator, session, self.caps, policy.group_size,
                                     policy.max_edits_per_reflection, self.meter.reading)
        self.gate = ValidationGate(self.evaluator, val_tasks, repeats, policy,
                                   ComparePolicy.from_gate(config.gate, margin=0.0), self.val_results, self.skill_text)
        self.credit = CreditAssigner(self.evaluator, val_tasks, self.caps, policy.credit_confidence, repeats)
        self.screener = Screener(self.evaluator, self.caps, policy.screening, self.gate.rule.screens_edits_alone)
        self.plan = None if budgets.max_target_calls is None else CallPlan(  # see train.call_plan
            budgets.max_target_calls, 2 * len(suite.splits.get("test") or ()) * self.evaluator.repeats,
            len(self.val_ids) * self.evaluator.repeats, policy.batch_size, self.screener.active)
        self.auditor = harm.Auditor(self.evaluator, val_tasks, self.caps, self.meter.reading)

    # ---- run directory -----------------------------------------------------------------------

    def checkpoint(self, state: TrainState) -> None:
        state.spent = self.meter.spent()
        state.save(self.dir)
        write_atomic(self.dir / "history.jsonl",
                     "".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in state.history))

    def skill_text(self, number: int) -> str:
        return (self.dir / "skills" / f"v{number:03d}.md").read_text(encoding="utf-8")

    def add_version(self, state: TrainState, text: str, step: str, val_mean: float | None, val_dir: str) -> Version:
        number = len(state.versions)
        write_atomic(self.dir / "skills" / f"v{number:03d}.md", text)
        version = Version(number, self.evaluator.candidate(text).hash, state.incumbent if state.versions else None, step,
                          val_mean, val_dir)
        state.versions.append(version)
        return version

    def val_results(self, version: Version) -> list[TaskResult]:
        return RunDir(self.dir / version.val_dir).load_results()

    def write_step(self, record: StepRecord) -> None:
        write_json_atomic(self.dir / "steps" / record.step / "step.json", record.to_dict())

    # ---- the loop ----------------------------------------------------------------------------

    def batches(self, epoch: int) -> list[tuple]:
        rng = random.Random(f"{self.policy.seed}:{epoch}")
        order = list(self.train_tasks)
        rng.shuffle(order)
        size = self.policy.batch_size
        return [tuple(order[i:i + size]) for i in range(0, len(order), size)]

    def run(self, state: TrainState) -> TrainState:
        """Advance ``state`` to the end (or to a budget), checkpointing after every stage. With a
        target-call budget, a step that may not fit goes to the test phase instead (planned)."""
        self.meter.start(state.spent)
        state.steps_per_epoch = self.steps_per_epoch
        state.epochs_planned = self.policy.epochs
        try:
            # every call of the run (the optimizer's too) reserves its estimated cost against the budget left
            with self.session.pool.guard.limited(budget_limits(self.meter.remaining())):
                self.loop(state)
        except BudgetReached as exc:  # a call (the optimizer's) was not sent: the stage is not recorded
            state.stopped = self.meter.refused(exc)
        except RuntimeFailure as exc:
            state.stopped = f"runtime failure: {exc}"
            self.checkpoint(state)
            raise
        self.checkpoint(state)
        return state

    def loop(self, state: TrainState) -> None:
        while state.phase != "done":
            reason = self.meter.exhausted()
            if reason and state.phase != "baseline":
                state.stopped = reason
                return
            planned = self.plan and self.plan.stop_next(state, self.steps_per_epoch, self.policy.slow_update,
                                                        self.meter.spent().target_calls)
            if planned:
                state.stopped, state.phase = planned, "test"
                self.log(planned)
                self.checkpoint(state)  # a resume starts at the test, as the disk says
            # what the final test needs is held back from every evaluation before it
            self.meter.held = self.plan.test if self.plan and state.phase != "test" else 0
            phase = state.phase
            try:
                {"baseline": self.do_baseline, "steps": self.do_step, "epoch_end": self.do_epoch_end,
                 "test": self.do_test}[phase](state)
            except BudgetExhausted as exc:  # the stage in progress is not recorded
                state.stopped = str(exc)
                if self.plan is None or phase in ("baseline", "test") or self.meter.exhausted():
                    return
                state.stopped, state.phase = self.plan.overrun(state, self.meter.spent().target_calls), "test"
                self.log(state.stopped)
            self.checkpoint(state)

    def do_baseline(self, state: TrainState) -> None:
        self.log(f"baseline: scoring {self.entry.name} on {len(self.val_ids)} validation tasks")
        outcome = self.evaluator.evaluate(self.baseline.text, "val", "versions/v000/val", label="baseline val")
        self.add_version(state, self.baseline.text, "baseline", outcome.summary.mean, "versions/v000/val")
        state.phase, state.buffer, state.baseline_calls = "steps", OptimizerBuffer(), self.meter.spent().target_calls
        self.log(f"baseline: validation {fmt(outcome.summary.mean)}")

    def do_step(self, state: TrainState) -> None:
        if state.step >= self.steps_per_epoch:
            state.phase = "epoch_end"
            return
        step_id = f"e{state.epoch}-s{state.step:02d}"
        batch = self.batches(state.epoch)[state.step]
        incumbent_text = self.skill_text(state.incumbent)
        buffer = state.buffer or OptimizerBuffer()
        budget = edit_budget(self.policy.budget_schedule, state.epoch * self.steps_per_epoch + state.step,
                             self.policy.epochs * self.steps_per_epoch, self.policy.budget_start, self.policy.budget_end)
        proposed = self.proposer.propose(step_id, incumbent_text, batch, state.epoch, buffer, state.meta_skill, budget)
        record = StepRecord(step_id, StepKind.STEP, state.epoch, state.incumbent, batch=tuple(t.id for t in batch),
                            rollout=proposed.rollout, proposals=proposed.proposals, merged=proposed.merged,
                            selected=proposed.selected, edit_budget=budget, applied=proposed.outcomes)
        self.write_step(record)
        if proposed.candidate_text is None:
            self.finish(state, record, Decision.SKIPPED, proposed.why_nothing(), proposed.marks)
        else:
            self.gate_step(state, record, incumbent_text, proposed)
        state.buffer = (state.buffer or OptimizerBuffer()).with_failures(proposed.rollout.failures)
        state.step += 1

    def gate_step(self, state: TrainState, record: StepRecord, incumbent_text: str, proposed: Proposed) -> None:
        step_dir = self.dir / "steps" / record.step
        candidate_text, applied, marks = proposed.candidate_text or "", proposed.applied, proposed.marks
        if self.screener.active:
            if self.plan is not None:  # screening shrinks to what the budget leaves (train.call_plan)
                self.screener.allowance = self.plan.allowance(state, lambda: self.meter.spent().target_calls)
            screen = self.screener.screen(record.step, state.epoch * self.steps_per_epoch + state.step,
                                          incumbent_text, proposed)
            record, marks = replace(record, screen=screen.note), (*marks, self.meter.reading())
            # ``pairs`` (wins, losses over discordant paired re-runs) where screening records them
            self.reject(state, [e.edit for e in screen.dropped],
                        [classify_rejection(e.reason, pairs=e.pairs) for e in screen.dropped])
            if not screen.passed:
                kept = [e for e in screen.applied if e not in [d.edit for d in screen.dropped]]
                self.reject(state, kept, [classify_rejection(screen.note.reason)] * len(kept))
                self.finish(state, record, Decision.REJECTED, screen.note.reason, marks)
                return
            candidate_text, applied = screen.text, list(screen.applied)
        write_atomic(step_dir / "candidate.md", candidate_text)
        write_atomic(step_dir / "candidate.diff", unified_diff(incumbent_text, candidate_text))
        confirmed = record.screen is not None and record.screen.confirmed
        result = self.gate.judge(state.current, candidate_text, record.step, state.val_samples.get(state.incumbent),
                                 confirmed=confirmed, deletes_only=only_deletes(applied))
        if record.screen is not None and record.screen.dropped:
            result = replace(result, reason=f"{result.reason}; {len(record.screen.dropped)} of "
                                            f"{len(record.screen.edits)} edits screened out alone")
        val_dir = f"steps/{record.step}/val"
        # Edits confirmed one by one in screening each carry their own evidence: no leave-one-out.
        if result.accepted and self.policy.credit_assignment and len(applied) > 1 and not confirmed:
            credit = self.credit.assign(record.step, incumbent_text, applied, self.val_results(state.current),
                                        result.results)
            note = CreditNote.from_dict(credit.to_dict())
            record = replace(record, credit=note)
            if note.pruned:
                write_atomic(step_dir / "candidate.md", credit.text)
                write_atomic(step_dir / "candidate.diff", unified_diff(incumbent_text, credit.text))
                self.reject(state, [r.edit for r in note.removed],  # left out on validation: measured
                            [classify_rejection(r.reason, validated=True) for r in note.removed])
                result = replace(result, candidate_val=credit.pruned_val, candidate_samples=None,
                                 reason=f"{result.reason}; kept {len(credit.kept)} of {len(applied)} edits "
                                        f"(validation {fmt(credit.pruned_val)} without the others)")
                candidate_text, applied = credit.text, list(note.kept)
                val_dir = f"steps/{record.step}/credit/pruned"  # the kept skill's own validation results
        self.conclude(state, record, result, candidate_text, applied, marks, val_dir)

    def reject(self, state: TrainState, edits: Sequence[Edit], rejections: Sequence[Rejection]) -> None:
        """Tell the optimizer's memory that ``edits`` were dropped, each with its rejection (refuted
        or unproven, and the evidence)."""
        buffer = state.buffer or OptimizerBuffer()
        for edit, why in zip(edits, rejections, strict=True):
            buffer = buffer.with_rejected([edit], why)
        if edits:
            state.buffer = buffer
        state.epoch_log += [EpochEdit(e, False, r.reason, r.kind) for e, r in zip(edits, rejections, strict=True)]

    def conclude(self, state: TrainState, record: StepRecord, result: GateResult, candidate_text: str,
                 edits: Sequence[Edit], marks: Sequence[StageSpend], val_dir: str | None = None) -> StepRecord:
        honest = self.gate.rule.honest
        if honest and result.incumbent_samples is not None:
            state.val_samples[state.incumbent] = result.incumbent_samples
        if result.accepted:
            version = self.add_version(state, candidate_text, record.step, result.candidate_val,
                                       val_dir or f"steps/{record.step}/val")
            if honest and result.candidate_samples is not None:
                state.val_samples[version.number] = result.candidate_samples
            state.incumbent = version.number
            record = replace(record, candidate_version=version.number)
            state.epoch_log += [EpochEdit(e, True, result.reason) for e in edits]
        else:
            measured = result.verdict in (Verdict.REJECTED, Verdict.EARLY_REJECTED)  # not inconclusive
            why = classify_rejection(result.reason, validated=measured, candidate_val=result.candidate_val,
                                     incumbent_val=result.incumbent_val, together=len(edits),
                                     block=record.kind is StepKind.SLOW_UPDATE)
            self.reject(state, edits, [why] * len(edits))
        return self.finish(state, record, result.verdict.decision, result.reason, marks, result)

    def finish(self, state: TrainState, record: StepRecord, decision: Decision, reason: str,
               marks: Sequence[StageSpend], result: GateResult | None = None,
               stages: Sequence[str] | None = None) -> StepRecord:
        """Record how the step ended (in ``step.json`` and the history) and say so."""
        readings = [*marks, self.meter.reading()]
        stages = stages or (SCREENED_STAGES if len(marks) == len(SCREENED_STAGES) else STAGES)
        spend = {stage: readings[i + 1].minus(readings[i]) for i, stage in enumerate(stages[: len(readings) - 1])}
        outcome = StepOutcome(decision, reason, result.candidate_val if result else None, state.current.val_mean,
                              state.incumbent, spend, early_stopped=result.early_stopped if result else None,
                              delta=result.delta if result else None, ci=result.ci if result else None)
        record = replace(record, outcome=outcome)
        self.write_step(record)
        state.history.append(record)
        self.log(f"{record.step}: {decision.value} — {reason.removeprefix(decision.value + ': ')}")
        return record

    def do_epoch_end(self, state: TrainState) -> None:
        # only the screened rule records screening evidence; other runs' state files stay as they were
        if self.policy.audit and self.gate.rule.screens_edits_alone and state.audited_epoch != state.epoch:
            self.audit(state)
            state.audited_epoch = state.epoch
            self.checkpoint(state)  # a kill after the audit resumes at the slow update
        slow = self.slow_update(state) if self.policy.slow_update and state.incumbent != state.epoch_start else None
        meta = None
        if self.policy.meta_skill and state.epoch_log:
            result = self.session.run(update_meta_skill(self.session.pool, state.meta_skill, state.epoch_log))
            if result.meta_skill is not None:
                state.meta_skill = result.meta_skill
            meta = MetaSkillNote(state.meta_skill, result.error)
        state.epochs.append(EpochRecord(state.epoch, slow, meta))
        state.buffer = (state.buffer or OptimizerBuffer()).for_new_epoch()
        state.epoch_log = []
        state.epoch_start = state.incumbent
        state.epoch, state.step = state.epoch + 1, 0
        state.phase = "steps" if state.epoch < self.policy.epochs else "test"
        # an honest rule re-measures its incumbent at every validation: an epoch without a new version still moved it
        patience = None if self.gate.rule.honest else self.policy.patience
        if state.phase == "steps" and patience is not None and state.unchanged_epochs() >= patience:
            state.phase, state.stopped = "test", (  # converged: epochs in a row made no new version
                f"converged: {patience} epoch{'s' if patience > 1 else ''} in a row changed nothing (train.patience); "
                f"{self.policy.epochs - state.epoch} of {self.policy.epochs} epochs not run")
            self.log(state.stopped)

    def audit(self, state: TrainState) -> None:
        """The harm audit (:mod:`skillopt_ci.train.audit`): a few accepted rules re-tested, each in its
        own ``audit`` step (as many as the target calls left allow); a removal is a new version."""
        state.evidence += harm.new_evidence(state.history, state.evidence, self.dir / "steps")
        limit = harm.MAX_AUDITS if self.plan is None else \
            self.plan.audits(self.meter.spent().target_calls, 2 * harm.PAIRS, harm.MAX_AUDITS)
        for n, index in enumerate(harm.pick(state.evidence, self.skill_text(state.incumbent), self.caps, limit)):
            evidence, step_id = state.evidence[index], f"e{state.epoch}-audit-{n:02d}"
            if harm.without(self.skill_text(state.incumbent), evidence.edit, self.caps) is None:
                continue  # an earlier removal of this audit took its text too
            done = self.auditor.audit(step_id, self.skill_text(state.incumbent), evidence)
            record = StepRecord(step_id, StepKind.AUDIT, state.epoch, state.incumbent, audit=done.note)
            note = done.note
            if note.removed and done.val_dir is not None:
                write_atomic(self.dir / "steps" / step_id / "candidate.diff",
                             unified_diff(self.skill_text(state.incumbent), done.text))
                version = self.add_version(state, done.text, step_id, note.without_val, done.val_dir)
                state.incumbent = version.number
                record = replace(record, applied=(done.outcome,), candidate_version=version.number)
                state.evidence[index] = replace(evidence, removed_by=step_id)
                self.reject(state, [evidence.edit], [done.rejection])
            else:
                state.evidence[index] = replace(evidence, audits=evidence.audits + 1, reconfirmed=note.reconfirmed)
            self.finish(state, record, Decision.ACCEPTED if note.removed else Decision.REJECTED, done.reason,
                        done.marks, done.gate_result, harm.STAGES)

    def slow_update(self, state: TrainState) -> StepRecord:
        """Previous-epoch skill vs current on the same train sample → a new durable block → gate."""
        step_id = f"e{state.epoch}-slow"
        previous, current = self.skill_text(state.epoch_start), self.skill_text(state.incumbent)
        sample = self.batches(state.epoch)[0]
        before = self.meter.reading()
        prev_run = self.evaluator.evaluate(previous, "train", f"steps/{step_id}/previous", sample_offset=state.epoch,
                                           tasks=sample)
        cur_run = self.evaluator.evaluate(current, "train", f"steps/{step_id}/current", sample_offset=state.epoch,
                                          tasks=sample)
        after_rollout = self.meter.reading()
        categories = categorize(prev_run.results, cur_run.results)
        result = self.session.run(slow_update(self.session.pool, previous, current, categories, DURABLE_BLOCK))
        marks = (before, after_rollout, self.meter.reading())
        record = StepRecord(step_id, StepKind.SLOW_UPDATE, state.epoch, state.incumbent, categories=categories,
                            analysis=result.analysis)
        if result.content is None:
            return self.finish(state, record, Decision.SKIPPED, f"optimizer output unusable: {result.error}", marks)
        base = ensure_protected_block(current, DURABLE_BLOCK)
        candidate, outcome = rewrite_protected_block(base, DURABLE_BLOCK, result.content, self.caps)
        record = replace(record, applied=(outcome,))
        if not outcome.applied:
            return self.finish(state, record, Decision.SKIPPED, f"durable block not written: {outcome.detail}", marks)
        write_atomic(self.dir / "steps" / step_id / "candidate.diff", unified_diff(current, candidate))
        decision = self.gate.judge(state.current, candidate, step_id, state.val_samples.get(state.incumbent))
        return self.conclude(state, record, decision, candidate, [outcome.edit], marks)

    def do_test(self, state: TrainState) -> None:
        if "test" in self.suite.splits and self.suite.splits["test"]:
            self.evaluator.evaluate(self.skill_text(0), "test", "versions/v000/test", label="baseline test")
            best = state.current.number
            if best != 0:
                self.evaluator.evaluate(self.skill_text(best), "test", f"versions/v{best:03d}/test", label="best test")
        state.phase = "done"
