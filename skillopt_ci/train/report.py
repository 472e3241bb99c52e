"""A training run's report (``report.md``) and terminal table, rendered from its summary and state.

Pure: the summary is built from the run directory by :mod:`skillopt_ci.train.summary`. Because
every change is gated on validation, the final skill *is* the best one: the report says so rather
than showing the same numbers twice.
"""

from __future__ import annotations

from skillopt_ci.core.description import LIMIT as DESCRIPTION_LIMIT
from skillopt_ci.core.text import fraction
from skillopt_ci.render.eval_report import fmt_cost, fmt_score
from skillopt_ci.render.markdown import code_block, escape_inline
from skillopt_ci.train.records import CurvePoint, SplitComparison, TrainingSummary
from skillopt_ci.train.state import TrainState


def _row(c: SplitComparison | None, name: str) -> str:
    if c is None:
        return f"| {name} | — | — | — | not measured |"
    ci = f" [{c.ci[0]:+.3f}, {c.ci[1]:+.3f}]" if c.ci else ""
    delta = "—" if c.delta is None else f"{c.delta:+.3f}{ci}"
    return f"| {name} | {fmt_score(c.current)} | {fmt_score(c.trained)} | {delta} | {c.verdict} |"


def no_skill_lines(summary: TrainingSummary) -> list[str]:
    """``--baseline none``: per split, the score with no skill and what the trained (best) skill
    adds over it, beside the table's current and trained scores."""
    return [f"No skill on {split} (trained skill vs none): {worth.get('line', '')}"
            for split, worth in (summary.no_skill or {}).items()]


def trigger_table(summary: TrainingSummary) -> list[str]:
    """Per split with trigger tasks, recall, precision and accuracy of the current → trained
    skill as a markdown table ([] without trigger tasks)."""
    if not summary.trigger:
        return []
    rows = ["| triggering | recall | precision | accuracy |", "| --- | --- | --- | --- |"]
    for split, pair in summary.trigger.items():
        current, trained = pair["current"].rates(), pair["trained"].rates()
        rows.append(f"| {escape_inline(split, 20)} | " + " | ".join(
            f"{fraction(*current[m])} → {fraction(*trained[m])}" for m in ("recall", "precision", "accuracy")) + " |")
    return rows


def description_section(summary: TrainingSummary, limit: int = 1100) -> list[str]:
    """The current and trained descriptions (a model's text: fenced), or [] when training could
    not edit the description; one line when it did not change."""
    d = summary.description
    if d is None:
        return []
    if d["current"] == d["trained"]:
        return ["The description did not change:", "", code_block(d["current"], limit)]
    return ["Description before:", "", code_block(d["current"], limit), "", "Description after "
            f"({len(d['trained'])} of {DESCRIPTION_LIMIT:,} characters):", "", code_block(d["trained"], limit)]


def _spaced(lines: list[str]) -> list[str]:
    return [*lines, ""] if lines else []


def curve_points(summary: TrainingSummary, max_points: int = 12) -> list[CurvePoint]:
    """The best-so-far points worth showing: the baseline, every change of the best skill and the
    last step (at most ``max_points``, the latest kept)."""
    points = list(summary.best_so_far)
    shown = [p for i, p in enumerate(points) if i == 0 or i == len(points) - 1 or p.version != points[i - 1].version]
    return shown if len(shown) <= max_points else [shown[0], *shown[-(max_points - 1):]]


def curve_line(summary: TrainingSummary) -> str:
    """The best-so-far curve in one line: "Best so far by target calls (of 265): 40 → val 0.620 (v0),
    120 → val 0.710 (v1)"; by step in a run recorded before target calls were counted; "" without steps."""
    points = curve_points(summary)
    if len(points) < 2:
        return ""
    counted = any(p.calls for p in summary.best_so_far)
    budget = f" (of {summary.max_target_calls})" if summary.max_target_calls is not None else ""
    items = ", ".join(f"{p.calls if counted else p.step} → val {fmt_score(p.val)} (v{p.version})" for p in points)
    return f"Best so far by {'target calls' + budget if counted else 'step'}: {items}"


def stopped_line(summary: TrainingSummary) -> str:
    """A finished run that stopped stepping early (its budget's plan), or ``""``."""
    if summary.complete and summary.stopped:
        return f"Steps stopped early, then the best skill was tested: {summary.stopped}"
    return ""


def render_train_report(summary: TrainingSummary, state: TrainState) -> str:
    s = summary
    head = "improved" if s.improved else "no improvement to propose"
    lines = [f"# skillopt-ci train: {escape_inline(s.skill['name'])} — {head}", ""]
    if not s.complete:
        lines += [f"**Stopped early:** {escape_inline(s.stopped or 'stopped')}. Re-run the same command to resume.", ""]
    lines += ["| split | current | trained | Δ (95% CI) | verdict |", "| --- | --- | --- | --- | --- |",
              _row(s.val, "val"), _row(s.test, "test"), "",
              *_spaced(trigger_table(s)), *_spaced(description_section(s)),
              *[f"{line}  " for line in no_skill_lines(s)], *([""] if s.no_skill else []),
              f"Best is version {s.best_version} (also the final skill: every change is gated on validation). "
              f"Steps: {s.steps_accepted} accepted, {s.steps_rejected} rejected, {s.steps_skipped} skipped. "
              f"Tokens {s.input_tokens + s.output_tokens:,}, cost {fmt_cost(s.cost_usd)}, {s.wall_time_s:.1f}s."
              + (f" {cancelled_line(s.cancelled_rollouts)}." if s.cancelled_rollouts else ""), "",
              *[f"{escape_inline(line, 2000)}" for line in (stopped_line(s), curve_line(s)) if line],
              *([""] if stopped_line(s) or curve_line(s) else []),
              "## Steps", "", "| step | decision | validation (candidate → incumbent) | reason |",
              "| --- | --- | --- | --- |"]
    for p, record in zip(s.points[1:], state.history, strict=True):
        lines.append(f"| {p.step} | {p.decision} | {fmt_score(p.candidate)} → {fmt_score(p.incumbent)} | "
                     f"{escape_inline(record.reason, 160)} |")
    left = [(p.step, x) for p in s.points for x in p.left_out]
    if left:
        lines += ["", "## Edits left out before a decision", ""]
        lines += [f"- **{escape_inline(step)}** `{escape_inline(x['op'])}` {escape_inline(x['text'], 120)}: "
                  f"{escape_inline(x['reason'], 200)}" for step, x in left]
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
    worth = "".join(f"\n{line}" for line in no_skill_lines(summary))
    for split, pair in (summary.trigger or {}).items():
        current, trained = pair["current"].rates(), pair["trained"].rates()
        worth += f"\ntriggering on {split}: " + ", ".join(
            f"{m} {fraction(*current[m])} → {fraction(*trained[m])}" for m in ("recall", "precision", "accuracy"))
    if summary.description and summary.description["current"] != summary.description["trained"]:
        worth += f"\ndescription: {summary.description['trained']}"
    worth += "".join(f"\n{line}" for line in (stopped_line(summary), curve_line(summary)) if line)
    return (f"{table}{worth}\n\nsteps: {s.steps_accepted} accepted, {s.steps_rejected} rejected, {s.steps_skipped} skipped"
            f" · tokens {s.input_tokens + s.output_tokens:,} · cost {fmt_cost(s.cost_usd)} · {s.wall_time_s:.1f}s")


def cancelled_line(n: int) -> str:
    """Rollouts early stopping cut off in flight: a provider may bill their calls all the same."""
    return f"{n} rollout{'s' if n != 1 else ''} cancelled in flight by early stopping (calls may still be billed)"
