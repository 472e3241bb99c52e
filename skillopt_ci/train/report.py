"""A training run's summary (``summary.json``) and report (``report.md``), built from its state.

The baseline is version 0 (the skill as it was); the best is the incumbent at the end. Because
every change is gated on validation, the final skill *is* the best one: the report says so rather
than showing the same numbers twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skillopt_ci.core.compare import ComparePolicy, compare_results
from skillopt_ci.engine.rundir import RunDir
from skillopt_ci.render.eval_report import fmt_cost, fmt_score
from skillopt_ci.render.markdown import code_block, escape_inline
from skillopt_ci.train.history import Decision
from skillopt_ci.train.records import AcceptedEdit, SplitComparison, StepPoint, TrainingSummary
from skillopt_ci.train.state import TrainState

if TYPE_CHECKING:
    from skillopt_ci.train.trainer import Trainer


def _compare(trainer: Trainer, split: str, base_dir: str, best_dir: str, margin: float = 0.0) -> SplitComparison | None:
    base_run, best_run = trainer.dir / base_dir, trainer.dir / best_dir
    if not (base_run / "results.jsonl").exists() or not (best_run / "results.jsonl").exists():
        return None
    ids = [t.id for t in trainer.suite.tasks(split)]
    c = compare_results(RunDir(base_run).load_results(), RunDir(best_run).load_results(), ids,
                        ComparePolicy.from_gate(trainer.config.gate, margin))
    return SplitComparison(split, c.base_mean, c.head_mean, c.delta, c.ci, c.verdict, c.n_paired)


def build_summary(trainer: Trainer, state: TrainState) -> TrainingSummary:
    best = state.current
    val = _compare(trainer, "val", state.versions[0].val_dir, best.val_dir) or SplitComparison(
        "val", state.versions[0].val_mean, best.val_mean, None, None, "inconclusive", 0)
    test = _compare(trainer, "test", "versions/v000/test", f"versions/v{best.number:03d}/test",
                    trainer.policy.test_margin)
    accepted = [AcceptedEdit(r.step, edit) for r in state.history if r.decision is Decision.ACCEPTED
                for edit in r.kept_edits()]
    points = [StepPoint("baseline", state.versions[0].val_mean, state.versions[0].val_mean, "baseline")]
    points += [StepPoint(r.step, r.outcome.candidate_val, r.outcome.incumbent_val, r.outcome.decision.value)
               for r in state.history if r.outcome]
    test_ok = test is None or test.delta is None or test.delta >= -trainer.policy.test_margin
    improved = best.number != 0 and (val.delta or 0.0) > 0 and test_ok
    counts = {d: sum(1 for r in state.history if r.decision is d) for d in Decision}
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
        skill={"name": trainer.entry.name, "path": str(trainer.baseline.path), "hash": trainer.baseline.hash},
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
        tokens_by_stage=stages,
    )


def _row(c: SplitComparison | None, name: str) -> str:
    if c is None:
        return f"| {name} | — | — | — | not measured |"
    ci = f" [{c.ci[0]:+.3f}, {c.ci[1]:+.3f}]" if c.ci else ""
    delta = "—" if c.delta is None else f"{c.delta:+.3f}{ci}"
    return f"| {name} | {fmt_score(c.current)} | {fmt_score(c.trained)} | {delta} | {c.verdict} |"


def render_train_report(summary: TrainingSummary, state: TrainState) -> str:
    s = summary
    head = "improved" if s.improved else "no improvement to propose"
    lines = [f"# skillopt-ci train: {escape_inline(s.skill['name'])} — {head}", ""]
    if not s.complete:
        lines += [f"**Stopped early:** {escape_inline(s.stopped or 'stopped')}. Re-run the same command to resume.", ""]
    lines += ["| split | current | trained | Δ (95% CI) | verdict |", "| --- | --- | --- | --- | --- |",
              _row(s.val, "val"), _row(s.test, "test"), "",
              f"Best is version {s.best_version} (also the final skill: every change is gated on validation). "
              f"Steps: {s.steps_accepted} accepted, {s.steps_rejected} rejected, {s.steps_skipped} skipped. "
              f"Tokens {s.input_tokens + s.output_tokens:,}, cost {fmt_cost(s.cost_usd)}, {s.wall_time_s:.1f}s.", "",
              "## Steps", "", "| step | decision | validation (candidate → incumbent) | reason |",
              "| --- | --- | --- | --- |"]
    for p, record in zip(s.points[1:], state.history, strict=True):
        lines.append(f"| {p.step} | {p.decision} | {fmt_score(p.candidate)} → {fmt_score(p.incumbent)} | "
                     f"{escape_inline(record.reason, 160)} |")
    if s.accepted_edits:
        lines += ["", "## Accepted edits", ""]
        for a in s.accepted_edits:
            lines += [f"- **{a.step}** `{a.edit.op}` (support {a.edit.support}): "
                      f"{escape_inline(a.edit.rationale, 300)}", "", code_block(a.edit.text or a.edit.anchor, 800), ""]
    for epoch in state.epochs:
        meta = epoch.meta_skill.text if epoch.meta_skill else ""
        if meta:
            lines += ["", f"## Meta skill after epoch {epoch.epoch} (optimizer memory, not part of the skill)", "",
                      code_block(meta, 1500)]
    return "\n".join(lines) + "\n"


def summary_table(summary: TrainingSummary) -> str:
    """Current vs trained on val and test, for a terminal."""
    from tabulate import tabulate

    rows = []
    for c in (summary.val, summary.test):
        if c is None:
            continue
        ci = f" [{c.ci[0]:+.3f}, {c.ci[1]:+.3f}]" if c.ci else ""
        rows.append({"split": c.split, "current": fmt_score(c.current), "trained": fmt_score(c.trained),
                     "Δ (95% CI)": "—" if c.delta is None else f"{c.delta:+.3f}{ci}", "verdict": c.verdict})
    table = tabulate(rows, headers="keys", tablefmt="simple", disable_numparse=True)
    s = summary
    return (f"{table}\n\nsteps: {s.steps_accepted} accepted, {s.steps_rejected} rejected, {s.steps_skipped} skipped"
            f" · tokens {s.input_tokens + s.output_tokens:,} · cost {fmt_cost(s.cost_usd)} · {s.wall_time_s:.1f}s")
