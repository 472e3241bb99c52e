"""A training run's summary (``summary.json``), built from its state and run directory.

The baseline is version 0 (the skill as it was); the best is the incumbent at the end. Val and
test are compared paired, from the versions' results on disk; the report
(:mod:`skillopt_ci.train.report`) renders what this builds.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from skillopt_ci.core.baseline import skill_worth
from skillopt_ci.core.compare import ComparePolicy, compare_results
from skillopt_ci.core.description import description_of
from skillopt_ci.core.records import EvalSummary, TriggerCounts
from skillopt_ci.core.skill import NO_SKILL_NAME, no_skill
from skillopt_ci.engine.evaluation import make_plan
from skillopt_ci.engine.rundir import RunDir
from skillopt_ci.train.call_plan import best_so_far
from skillopt_ci.train.history import Decision, StepKind, StepRecord
from skillopt_ci.train.records import AcceptedEdit, SplitComparison, StepPoint, TrainingSummary
from skillopt_ci.train.state import TrainState

if TYPE_CHECKING:
    from skillopt_ci.train.trainer import Trainer

NO_SKILL_DIR = "versions/none"  # --baseline none: one run directory per split under it


def measure_no_skill(trainer: Trainer) -> None:
    """``--baseline none``: evaluate val and test (when the suite has it) with no skill, like the
    baseline's evaluations (same repeats and sample indices, the run's budgets), into
    ``versions/none/<split>``: cached and resumed like any run."""
    for split in ("val", "test"):
        if not trainer.suite.tasks(split):
            continue
        plan = make_plan(no_skill(), trainer.suite, split, trainer.evaluator.repeats)
        trainer.session.evaluate(plan, trainer.dir / NO_SKILL_DIR / split, budgets=trainer.meter.remaining(),
                                 label=f"{NO_SKILL_NAME} {split}")


def _no_skill(trainer: Trainer, state: TrainState) -> dict[str, dict[str, Any]] | None:
    """Per split, what the best skill adds over no skill (from the runs on disk), or None."""
    best = state.current
    found: dict[str, dict[str, Any]] = {}
    for split, best_dir in (("val", best.val_dir), ("test", f"versions/v{best.number:03d}/test")):
        none_dir, best_run = trainer.dir / NO_SKILL_DIR / split, trainer.dir / best_dir
        if not (none_dir / "summary.json").exists() or not (best_run / "results.jsonl").exists():
            continue
        summary = EvalSummary.from_dict(json.loads((none_dir / "summary.json").read_text()))
        worth = skill_worth(RunDir(best_run).load_results(), RunDir(none_dir).load_results(),
                            [t.id for t in trainer.suite.tasks(split)], summary,
                            ComparePolicy.from_gate(trainer.config.gate), run_dir=f"{NO_SKILL_DIR}/{split}")
        found[split] = worth.to_dict()
    return found or None


def _compare(trainer: Trainer, split: str, base_dir: str, best_dir: str, margin: float = 0.0) -> SplitComparison | None:
    base_run, best_run = trainer.dir / base_dir, trainer.dir / best_dir
    if not (base_run / "results.jsonl").exists() or not (best_run / "results.jsonl").exists():
        return None
    ids = [t.id for t in trainer.suite.tasks(split)]
    c = compare_results(RunDir(base_run).load_results(), RunDir(best_run).load_results(), ids,
                        ComparePolicy.from_gate(trainer.config.gate, margin))
    return SplitComparison(split, c.base_mean, c.head_mean, c.delta, c.ci, c.verdict, c.n_paired)


def _trigger(trainer: Trainer, state: TrainState) -> dict[str, dict[str, TriggerCounts]] | None:
    """Per split, the trigger counts of the current (v0) and the trained (best) skill, from the
    results on disk; ``None`` when no split has trigger tasks."""
    best = state.current
    found: dict[str, dict[str, TriggerCounts]] = {}
    for split, base_dir, best_dir in (("val", state.versions[0].val_dir, best.val_dir),
                                      ("test", "versions/v000/test", f"versions/v{best.number:03d}/test")):
        runs = [trainer.dir / d for d in (base_dir, best_dir)]
        if not all((r / "results.jsonl").exists() for r in runs):
            continue
        current, trained = (TriggerCounts.of(RunDir(r).load_results()) for r in runs)
        if current is not None and trained is not None:
            found[split] = {"current": current, "trained": trained}
    return found or None


def left_out(record: StepRecord) -> tuple[dict[str, str], ...]:
    """The edits a step's candidate lost before its decision, each with why: screened out alone,
    then pruned by credit assignment."""
    found = [(e.edit, e.reason) for e in (record.screen.dropped if record.screen else [])]
    found += [(d.edit, d.reason) for d in (record.credit.removed if record.credit else ())]
    return tuple({"op": edit.op, "text": edit.text or edit.anchor or "", "reason": reason} for edit, reason in found)


def build_summary(trainer: Trainer, state: TrainState) -> TrainingSummary:
    best = state.current
    val = _compare(trainer, "val", state.versions[0].val_dir, best.val_dir) or SplitComparison(
        "val", state.versions[0].val_mean, best.val_mean, None, None, "inconclusive", 0)
    test = _compare(trainer, "test", "versions/v000/test", f"versions/v{best.number:03d}/test",
                    trainer.policy.test_margin)
    accepted = [AcceptedEdit(r.step, edit) for r in state.history if r.decision is Decision.ACCEPTED
                for edit in r.kept_edits()]
    points = [StepPoint("baseline", state.versions[0].val_mean, state.versions[0].val_mean, "baseline")]
    points += [StepPoint(r.step, r.outcome.candidate_val, r.outcome.incumbent_val, r.outcome.decision.value,
                         r.outcome.reason, left_out(r)) for r in state.history if r.outcome]
    test_ok = test is None or test.delta is None or test.delta >= -trainer.policy.test_margin
    improved = best.number != 0 and (val.delta or 0.0) > 0 and test_ok
    # the harm audit's records re-test accepted rules: they are not steps that proposed a change
    counts = {d: sum(1 for r in state.history if r.decision is d and r.kind is not StepKind.AUDIT) for d in Decision}
    stages: dict[str, dict[str, Any]] = {}
    for record in state.history:
        for stage, spend in (record.outcome.spend if record.outcome else {}).items():
            total = stages.setdefault(stage, {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0})
            total["input_tokens"] += spend.input_tokens
            total["output_tokens"] += spend.output_tokens
            total["cost_usd"] = None if total["cost_usd"] is None or spend.cost_usd is None else \
                round(total["cost_usd"] + spend.cost_usd, 6)
    spent = state.spent
    return TrainingSummary(
        skill={"name": trainer.entry.name, "path": str(trainer.baseline.path), "hash": trainer.baseline.hash,
               **{k: v for k, v in trainer.baseline.identity().items() if k == "resources"}},
        suite={"name": trainer.suite.name, "path": trainer.suite.display, "hash": trainer.suite.hash},
        baseline_hash=state.versions[0].hash, best_hash=best.hash, final_hash=best.hash, best_version=best.number,
        val=val, test=test,
        final_val=best.val_mean, final_test=test.trained if test else None,
        accepted_edits=tuple(accepted),
        steps_accepted=counts[Decision.ACCEPTED], steps_rejected=counts[Decision.REJECTED],
        steps_skipped=counts[Decision.SKIPPED],
        points=tuple(points),
        input_tokens=spent.input_tokens, output_tokens=spent.output_tokens,
        cost_usd=spent.cost_usd if spent.cost_known else None, wall_time_s=spent.wall_time_s,
        improved=improved, complete=state.phase == "done", stopped=state.stopped, run_dir=str(trainer.dir),
        tokens_by_stage=stages, no_skill=_no_skill(trainer, state), cancelled_rollouts=spent.cancelled_rollouts,
        best_so_far=best_so_far(state.history, state.versions[0].val_mean, state.baseline_calls),
        max_target_calls=trainer.meter.budgets.max_target_calls, target_calls=spent.target_calls,
        **_description_fields(trainer, state),
    )


def _description_fields(trainer: Trainer, state: TrainState) -> dict[str, Any]:
    """The summary's ``target``, ``description`` and ``trigger`` (absent for a body run without
    trigger tasks, so its summary stays as it was)."""
    fields: dict[str, Any] = {"trigger": _trigger(trainer, state)}
    if trainer.policy.target != "body":
        fields["target"] = trainer.policy.target
        fields["description"] = {"current": description_of(trainer.skill_text(0)) or "",
                                 "trained": description_of(trainer.skill_text(state.current.number)) or ""}
    return fields
