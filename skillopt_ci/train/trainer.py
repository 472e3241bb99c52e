"""The training loop: rollout → reflect → merge → select → apply → gate on validation → record.

Per epoch the train split is shuffled (seeded by ``train.seed`` and the epoch) into minibatches;
each step rolls the incumbent skill out on one batch, asks the optimizer to reflect on failures
and successes separately, merges and selects at most the step's edit budget, applies the edits,
and accepts the candidate only if it beats the incumbent on the same validation tasks and
repeats (ties rejected; scoring stops early once it cannot win). At each epoch boundary the slow
update rewrites the protected ``durable`` block (gated like any candidate) and the meta skill
(the optimizer's memory) is updated. At the end the baseline and the best skill are scored on the
sealed test split.

Every step ends with a checkpoint (``state.json``); re-running the same command resumes, and
makes the same decisions as an uninterrupted run (all randomness is derived from the seed and the
step, never from the order of events). Budgets stop the run at a checkpoint.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from skillopt_ci.core.compare import ComparePolicy, compare_results
from skillopt_ci.core.credit import CreditResult, attribute_credit, means
from skillopt_ci.core.early_stop import accepts, cannot_win
from skillopt_ci.core.edits import (
    Edit,
    EditCaps,
    apply_edits,
    ensure_protected_block,
    rewrite_protected_block,
    unified_diff,
)
from skillopt_ci.core.errors import RuntimeFailure
from skillopt_ci.core.records import TaskResult
from skillopt_ci.core.skill import Skill, parse_skill
from skillopt_ci.engine.evaluation import EvalSession, make_plan
from skillopt_ci.engine.rundir import RunDir, write_atomic, write_json_atomic
from skillopt_ci.engine.runner import EvalOutcome
from skillopt_ci.inputs.config import Budgets, Config, SkillEntry, TrainPolicy
from skillopt_ci.inputs.suite import Suite
from skillopt_ci.train.optimizer import (
    OptimizerBuffer,
    ReflectionContext,
    categorize,
    edit_budget,
    merge_proposals,
    reflect,
    select_edits,
    slow_update,
    update_meta_skill,
)
from skillopt_ci.train.state import Spend, TrainState, Version

DURABLE_BLOCK = "durable"


class BudgetExhausted(Exception):
    """A budget ran out inside a stage; the stage is not recorded and the run finishes."""


@dataclass(frozen=True)
class Decision:
    accepted: bool
    reason: str
    candidate_val: float | None
    incumbent_val: float | None
    delta: float | None = None
    ci: tuple[float, float] | None = None
    early_stopped: bool = False
    results: tuple = ()  # the candidate's validation results (in memory only, for credit assignment)


class Trainer:
    """One training run of one skill into ``run_dir``. Use :meth:`run`."""

    def __init__(self, config: Config, entry: SkillEntry, skill: Skill, suite: Suite, session: EvalSession,
                 run_dir: Path, *, policy: TrainPolicy, budgets: Budgets, log: Callable[[str], None] = print,
                 clock: Callable[[], float] = time.monotonic):
        self.config, self.entry, self.baseline, self.suite = config, entry, skill, suite
        self.session, self.dir, self.policy, self.budgets, self.log = session, run_dir, policy, budgets, log
        self.clock = clock
        self.caps = EditCaps(max_edit_chars=policy.max_edit_chars, max_skill_tokens=policy.max_skill_tokens)
        self.val_ids = [t.id for t in suite.tasks("val")]
        self.train_tasks = suite.tasks("train")
        self.repeats = policy.repeats or suite.repeats
        self.steps_per_epoch = math.ceil(len(self.train_tasks) / policy.batch_size)
        self.compare_policy = ComparePolicy.from_gate(config.gate, margin=0.0)
        self._started = self.clock()
        self._spent_before = Spend()

    # ---- bookkeeping -------------------------------------------------------------------------

    def spent(self) -> Spend:
        pool = self.session.pool.total_spend()
        base = self._spent_before
        return Spend(
            input_tokens=base.input_tokens + (pool.usage.input_tokens or 0),
            output_tokens=base.output_tokens + (pool.usage.output_tokens or 0),
            cost_usd=round(base.cost_usd + pool.cost_usd, 6),
            cost_known=base.cost_known and pool.cost_known,
            wall_time_s=round(base.wall_time_s + self.clock() - self._started, 3),
        )

    def remaining(self) -> Budgets:
        """The budgets left for the next evaluation, in the runner's terms (this process)."""
        b, before = self.budgets, self._spent_before
        return Budgets(
            max_tokens=None if b.max_tokens is None else b.max_tokens - before.tokens,
            max_dollars=None if b.max_dollars is None else b.max_dollars - before.cost_usd,
            max_wall_seconds=None if b.max_wall_seconds is None
            else b.max_wall_seconds - before.wall_time_s - (self.clock() - self._started),
        )

    def budget_reason(self) -> str | None:
        spent, b = self.spent(), self.budgets
        if b.max_tokens is not None and spent.tokens >= b.max_tokens:
            return f"token budget reached ({spent.tokens} of {b.max_tokens})"
        if b.max_dollars is not None and spent.cost_usd >= b.max_dollars:
            return f"dollar budget reached (${spent.cost_usd:.4f} of ${b.max_dollars})"
        if b.max_wall_seconds is not None and spent.wall_time_s >= b.max_wall_seconds:
            return f"wall-time budget reached ({spent.wall_time_s:.0f}s of {b.max_wall_seconds}s)"
        return None

    def checkpoint(self, state: TrainState) -> None:
        state.spent = self.spent()
        state.save(self.dir)
        lines = "".join(_json_line(r) for r in state.history)
        write_atomic(self.dir / "history.jsonl", lines)

    def skill_text(self, number: int) -> str:
        return (self.dir / "skills" / f"v{number:03d}.md").read_text(encoding="utf-8")

    def add_version(self, state: TrainState, text: str, step: str, val_mean: float | None, val_dir: str) -> Version:
        number = len(state.versions)
        write_atomic(self.dir / "skills" / f"v{number:03d}.md", text)
        version = Version(number, parse_skill(text).hash, state.incumbent if state.versions else None, step,
                          val_mean, val_dir)
        state.versions.append(version)
        return version

    def stage_spend(self) -> dict[str, Any]:
        total = self.session.pool.total_spend()
        return {"input_tokens": total.usage.input_tokens or 0, "output_tokens": total.usage.output_tokens or 0,
                "cost_usd": total.cost_usd if total.cost_known else None}

    # ---- evaluations -------------------------------------------------------------------------

    def evaluate(self, text: str, split: str, out: str, *, sample_offset: int = 0, tasks: tuple | None = None,
                 stop_when: Any = None, label: str = "") -> EvalOutcome:
        skill = parse_skill(text, path=self.entry.name)
        plan = make_plan(skill, self.suite, split, 1 if split == "train" else self.repeats, sample_offset=sample_offset)
        if tasks is not None:
            plan = replace(plan, tasks=tasks)
        outcome = self.session.evaluate(plan, self.dir / out, budgets=self.remaining(), stop_when=stop_when,
                                        label=label or f"{self.entry.name} {out}")
        stopped = outcome.summary.stopped or ""
        if not outcome.summary.complete and not stopped.startswith("early rejection"):
            raise BudgetExhausted(stopped)
        return outcome

    def hardest_first(self, incumbent: list[TaskResult]) -> tuple:
        """Validation tasks, the ones the incumbent does worst on first. A candidate that fails
        them too has used up its margin at once: a tie with the incumbent (the most common
        rejection) is known after those tasks instead of after all of them. The order changes
        no score and no decision."""
        score: dict[str, float] = {}
        for r in incumbent:
            if r.ok:
                score[r.task_id] = score.get(r.task_id, 0.0) + float(r.score)  # type: ignore[arg-type]
        tasks = self.suite.tasks("val")
        return tuple(sorted(tasks, key=lambda t: score.get(t.id, 0.0)))

    def val_results(self, version: Version) -> list[TaskResult]:
        return RunDir(self.dir / version.val_dir).load_results()

    def gate(self, state: TrainState, text: str, step_id: str) -> Decision:
        """Score a candidate on validation against the incumbent; early rejection when it cannot win."""
        incumbent = state.current
        base = self.val_results(incumbent)
        measured = [t for t in self.val_ids if any(r.task_id == t and r.ok for r in base)]
        stop = cannot_win(incumbent.val_mean, measured, self.repeats, self.policy.min_gain) if self.policy.early_stop else None
        outcome = self.evaluate(text, "val", f"steps/{step_id}/val", stop_when=stop, label=f"{step_id} val",
                                tasks=self.hardest_first(base))
        rejected = f"validation does not beat the incumbent's {_fmt(incumbent.val_mean)}"
        if (outcome.summary.stopped or "").startswith("early rejection"):
            # The same words as a full pass gives: what the optimizer is told must not depend on
            # whether scoring stopped early, or early stopping would change later decisions.
            return Decision(False, rejected, None, incumbent.val_mean, early_stopped=True)
        comparison = compare_results(base, outcome.results, self.val_ids, self.compare_policy)
        if comparison.verdict == "inconclusive":
            return Decision(False, f"inconclusive: {comparison.reason}", None, incumbent.val_mean)
        ok = accepts(comparison.head_mean, comparison.base_mean, self.policy.min_gain)
        if not ok:
            val = None if self.policy.early_stop else comparison.head_mean
            return Decision(False, rejected, val, incumbent.val_mean, comparison.delta if val is not None else None,
                            comparison.ci if val is not None else None)
        reason = f"validation {comparison.head_mean:.3f} beats the incumbent's {comparison.base_mean:.3f}"
        return Decision(True, reason, comparison.head_mean, incumbent.val_mean, comparison.delta, comparison.ci,
                        results=tuple(outcome.results))

    # ---- the loop ----------------------------------------------------------------------------

    def batches(self, epoch: int) -> list[tuple]:
        rng = random.Random(f"{self.policy.seed}:{epoch}")
        order = list(self.train_tasks)
        rng.shuffle(order)
        size = self.policy.batch_size
        return [tuple(order[i:i + size]) for i in range(0, len(order), size)]

    def run(self, state: TrainState) -> TrainState:
        """Advance ``state`` to the end (or to a budget), checkpointing after every stage."""
        self._spent_before = state.spent
        self._started = self.clock()
        state.steps_per_epoch = self.steps_per_epoch
        state.epochs_planned = self.policy.epochs
        try:
            while state.phase != "done":
                reason = self.budget_reason()
                if reason and state.phase != "baseline":
                    state.stopped = reason
                    break
                {"baseline": self.do_baseline, "steps": self.do_step, "epoch_end": self.do_epoch_end,
                 "test": self.do_test}[state.phase](state)
                self.checkpoint(state)
        except BudgetExhausted as exc:
            state.stopped = str(exc)
        except RuntimeFailure as exc:
            state.stopped = f"runtime failure: {exc}"
            self.checkpoint(state)
            raise
        self.checkpoint(state)
        return state

    def do_baseline(self, state: TrainState) -> None:
        self.log(f"baseline: scoring {self.entry.name} on {len(self.val_ids)} validation tasks")
        outcome = self.evaluate(self.baseline.text, "val", "versions/v000/val", label="baseline val")
        self.add_version(state, self.baseline.text, "baseline", outcome.summary.mean, "versions/v000/val")
        state.phase = "steps"
        state.buffer = OptimizerBuffer().to_dict()
        self.log(f"baseline: validation {_fmt(outcome.summary.mean)}")

    def do_step(self, state: TrainState) -> None:
        if state.step >= self.steps_per_epoch:
            state.phase = "epoch_end"
            return
        step_id = f"e{state.epoch}-s{state.step:02d}"
        batch = self.batches(state.epoch)[state.step]
        incumbent_text = self.skill_text(state.incumbent)
        record: dict[str, Any] = {"step": step_id, "kind": "step", "epoch": state.epoch,
                                  "batch": [t.id for t in batch], "incumbent_version": state.incumbent}
        before = self.stage_spend()
        rollout = self.evaluate(incumbent_text, "train", f"steps/{step_id}/rollout", sample_offset=state.epoch,
                                tasks=batch, label=f"{step_id} rollout")
        after_rollout = self.stage_spend()
        failures = [r.task_id for r in rollout.results if r.ok and not r.passed]
        record["rollout"] = {"mean": rollout.summary.mean, "failures": failures}
        buffer = OptimizerBuffer.from_dict(state.buffer)
        budget = edit_budget(self.policy.budget_schedule, state.epoch * self.steps_per_epoch + state.step,
                             self.policy.epochs * self.steps_per_epoch, self.policy.budget_start, self.policy.budget_end)
        context = ReflectionContext(skill_text=incumbent_text, buffer=buffer, meta_skill=state.meta_skill,
                                    max_edits=self.policy.max_edits_per_reflection)
        proposals = self.session.run(reflect(self.session.pool, rollout.results, context,
                                             group_size=self.policy.group_size))
        after_reflect = self.stage_spend()
        merged = merge_proposals(proposals)
        selected = select_edits(merged, budget)
        record.update(proposals=[p.to_dict() for p in proposals], merged=[e.to_dict() for e in merged],
                      selected=[e.to_dict() for e in selected], edit_budget=budget)
        candidate_text, outcomes = apply_edits(incumbent_text, selected, self.caps)
        record["applied"] = [o.to_dict() for o in outcomes]
        step_dir = self.dir / "steps" / step_id
        write_json_atomic(step_dir / "step.json", record)
        if not any(o.applied for o in outcomes):
            errors = [p.error for p in proposals if p.error]
            why = ("optimizer output unusable: " + errors[0]) if errors and not merged else \
                "no edit could be applied" if selected else "no edit proposed"
            self.record(state, record, "skipped", why, None, state.current.val_mean, before, after_rollout, after_reflect)
            state.buffer = buffer.with_failures(failures).to_dict()
            state.step += 1
            return
        write_atomic(step_dir / "candidate.md", candidate_text)
        write_atomic(step_dir / "candidate.diff", unified_diff(incumbent_text, candidate_text))
        decision = self.gate(state, candidate_text, step_id)
        applied = [o.edit for o in outcomes if o.applied]
        if decision.accepted and self.policy.credit_assignment and len(applied) > 1:
            credit = self.attribute_credit(state, step_id, incumbent_text, applied, decision)
            record["credit"] = credit.to_dict()
            if credit.used == "pruned":
                write_atomic(step_dir / "candidate.md", credit.text)
                write_atomic(step_dir / "candidate.diff", unified_diff(incumbent_text, credit.text))
                removed = [Edit.from_dict(r["edit"]) for r in credit.removed]
                state.buffer = OptimizerBuffer.from_dict(state.buffer).with_rejected(removed, credit.removed[0]["reason"]).to_dict()
                state.epoch_log += [{"edit": e.to_dict(), "accepted": False, "reason": r["reason"]}
                                    for e, r in zip(removed, credit.removed, strict=True)]
                decision = replace(decision, candidate_val=credit.pruned_val,
                                   reason=f"{decision.reason}; kept {len(credit.kept)} of {len(applied)} edits "
                                          f"(validation {_fmt(credit.pruned_val)} without the others)")
                candidate_text, applied = credit.text, credit.kept
        self.conclude(state, record, decision, candidate_text, applied, step_id, before, after_rollout, after_reflect)
        state.buffer = OptimizerBuffer.from_dict(state.buffer).with_failures(failures).to_dict()
        state.step += 1

    def attribute_credit(self, state: TrainState, step_id: str, incumbent_text: str, edits: list[Edit],
                         decision: Decision) -> CreditResult:
        """Leave-one-edit-out on the tasks the accepted step changed (see :mod:`credit`)."""
        base = self.val_results(state.current)

        def score_tasks(text: str, task_ids: Sequence[str], label: str) -> dict[str, float]:
            wanted = set(task_ids)
            tasks = tuple(t for t in self.suite.tasks("val") if t.id in wanted)
            run = self.evaluate(text, "val", f"steps/{step_id}/credit/{label}", tasks=tasks, label=f"{step_id} {label}")
            return means(run.results, task_ids)

        def score_all(text: str, label: str) -> list[TaskResult]:
            return self.evaluate(text, "val", f"steps/{step_id}/credit/{label}", label=f"{step_id} {label}").results

        return attribute_credit(incumbent_text, edits, base, list(decision.results), self.val_ids, self.caps,
                                score_tasks=score_tasks, score_all=score_all)

    def conclude(self, state: TrainState, record: dict[str, Any], decision: Decision, candidate_text: str,
                 edits: list, step_id: str, *spends: dict[str, Any]) -> None:
        if decision.accepted:
            version = self.add_version(state, candidate_text, step_id, decision.candidate_val, f"steps/{step_id}/val")
            state.incumbent = version.number
            record["candidate_version"] = version.number
        else:
            buffer = OptimizerBuffer.from_dict(state.buffer).with_rejected(edits, decision.reason)
            state.buffer = buffer.to_dict()
        state.epoch_log += [{"edit": e.to_dict(), "accepted": decision.accepted, "reason": decision.reason}
                            for e in edits]
        record.update(delta=decision.delta, ci=list(decision.ci) if decision.ci else None)
        self.record(state, record, "accepted" if decision.accepted else "rejected", decision.reason,
                    decision.candidate_val, state.current.val_mean, *spends,
                    stats={"early_stopped": decision.early_stopped})

    def record(self, state: TrainState, record: dict[str, Any], decision: str, reason: str,
               candidate_val: float | None, incumbent_val: float | None, *spends: dict[str, Any],
               stats: dict[str, Any] | None = None) -> None:
        end = self.stage_spend()
        marks = [*spends, end]
        stages = ("rollout", "reflect", "validation")[: len(marks) - 1]
        record.update(decision=decision, reason=reason, candidate_val=candidate_val, incumbent_val=incumbent_val,
                      incumbent_version_after=state.incumbent,
                      spend={stage: _diff(marks[i + 1], marks[i]) for i, stage in enumerate(stages)},
                      stats=stats or {})
        write_json_atomic(self.dir / "steps" / record["step"] / "step.json", record)
        state.history.append(record)
        self.log(f"{record['step']}: {decision} — {reason}")

    def do_epoch_end(self, state: TrainState) -> None:
        epoch = state.epoch
        info: dict[str, Any] = {"epoch": epoch, "slow_update": None, "meta_skill": None}
        if self.policy.slow_update and state.incumbent != state.epoch_start:
            info["slow_update"] = self.slow_update(state)
        if self.policy.meta_skill and state.epoch_log:
            result = self.session.run(update_meta_skill(self.session.pool, state.meta_skill, state.epoch_log))
            if result.meta_skill is not None:
                state.meta_skill = result.meta_skill
            info["meta_skill"] = {"text": state.meta_skill, "error": result.error}
        state.epochs.append(info)
        state.buffer = OptimizerBuffer.from_dict(state.buffer).for_new_epoch().to_dict()
        state.epoch_log = []
        state.epoch_start = state.incumbent
        state.epoch += 1
        state.step = 0
        state.phase = "steps" if state.epoch < self.policy.epochs else "test"

    def slow_update(self, state: TrainState) -> dict[str, Any]:
        """Previous-epoch skill vs current on the same train sample → a new durable block → gate."""
        step_id = f"e{state.epoch}-slow"
        previous = self.skill_text(state.epoch_start)
        current = self.skill_text(state.incumbent)
        sample = self.batches(state.epoch)[0]
        before = self.stage_spend()
        prev_run = self.evaluate(previous, "train", f"steps/{step_id}/previous", sample_offset=state.epoch, tasks=sample)
        cur_run = self.evaluate(current, "train", f"steps/{step_id}/current", sample_offset=state.epoch, tasks=sample)
        after_rollout = self.stage_spend()
        categories = categorize(prev_run.results, cur_run.results)
        result = self.session.run(slow_update(self.session.pool, previous, current, categories, DURABLE_BLOCK))
        after_reflect = self.stage_spend()
        record: dict[str, Any] = {"step": step_id, "kind": "slow_update", "epoch": state.epoch,
                                  "incumbent_version": state.incumbent, "categories": categories.to_dict(),
                                  "analysis": result.analysis}
        if result.content is None:
            self.record(state, record, "skipped", f"optimizer output unusable: {result.error}", None,
                        state.current.val_mean, before, after_rollout, after_reflect)
            return record
        base = ensure_protected_block(current, DURABLE_BLOCK)
        candidate, outcome = rewrite_protected_block(base, DURABLE_BLOCK, result.content, self.caps)
        record["applied"] = [outcome.to_dict()]
        if not outcome.applied:
            self.record(state, record, "skipped", f"durable block not written: {outcome.detail}", None,
                        state.current.val_mean, before, after_rollout, after_reflect)
            return record
        write_atomic(self.dir / "steps" / step_id / "candidate.diff", unified_diff(current, candidate))
        decision = self.gate(state, candidate, step_id)
        self.conclude(state, record, decision, candidate, [outcome.edit], step_id, before, after_rollout, after_reflect)
        return record

    def do_test(self, state: TrainState) -> None:
        if "test" in self.suite.splits and self.suite.splits["test"]:
            self.evaluate(self.skill_text(0), "test", "versions/v000/test", label="baseline test")
            best = state.current.number
            if best != 0:
                self.evaluate(self.skill_text(best), "test", f"versions/v{best:03d}/test", label="best test")
        state.phase = "done"


def _diff(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    cost = None if after["cost_usd"] is None or before["cost_usd"] is None else round(after["cost_usd"] - before["cost_usd"], 6)
    return {"input_tokens": after["input_tokens"] - before["input_tokens"],
            "output_tokens": after["output_tokens"] - before["output_tokens"], "cost_usd": cost}


def _json_line(record: dict[str, Any]) -> str:
    import json

    return json.dumps(record, ensure_ascii=False) + "\n"


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"
