"""Rendering eval results: the terminal table and ``report.md``. Pure functions of records."""

from __future__ import annotations

from collections.abc import Sequence

from tabulate import tabulate

from skillopt_ci.core.records import Consulted, EvalSummary, TaskResult, TriggerCounts
from skillopt_ci.core.stats import wilson_ci
from skillopt_ci.core.text import fraction
from skillopt_ci.render.markdown import code_span, escape_inline

MAX_LISTED_FAILURES = 25


def fmt_score(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def fmt_ci(ci: tuple[float, float] | None) -> str:
    return "" if ci is None else f" [{ci[0]:.3f}, {ci[1]:.3f}]"


def fmt_cost(value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"${value:.4f}" if value < 10 else f"${value:,.2f}"


def fmt_pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def fmt_consulted(c: Consulted | None) -> str:
    """"5/6 (83%)": rollouts that consulted the skill, of those that had it installed."""
    return "—" if c is None else fraction(c.consulted, c.rollouts)


def consulted_line(c: Consulted) -> str:
    """The report's sentence on how often the agent read the skill, with its 95 % interval."""
    ci = wilson_ci(c.consulted, c.rollouts)
    interval = f", 95% CI {100 * ci[0]:.0f}–{100 * ci[1]:.0f}%" if ci else ""
    extra = "".join(f"; {what} in {n}" for what, n in (("read its other files", c.references),
                                                        ("ran its scripts", c.scripts)) if n)
    return (f"The agent consulted the skill in {c.consulted} of {c.rollouts} finished rollouts "
            f"({fmt_pct(c.rate)}{interval}){extra}.")


def trigger_line(t: TriggerCounts) -> str:
    """"Triggering over 12 trigger rollouts: recall 5/6 (83%, 95% CI 44–97%), precision …"."""
    parts = []
    for name, (hits, of) in t.rates().items():
        ci = wilson_ci(hits, of)
        parts.append(f"{name} {hits}/{of} ({100 * hits / of:.0f}%, 95% CI {100 * ci[0]:.0f}–{100 * ci[1]:.0f}%)"
                     if of and ci else f"{name} — (0 of 0)")
    return f"Triggering over {t.rollouts} trigger rollouts: " + ", ".join(parts) + "."


def summary_row(s: EvalSummary, consulted: bool = False) -> dict[str, str]:
    row = {
        "skill": s.skill["name"],
        "split": s.split + (f" (shard {s.shard})" if s.shard else ""),
        "tasks": f"{s.n_tasks_scored}/{s.n_tasks}" if s.n_tasks_scored != s.n_tasks else str(s.n_tasks),
        "score (95% CI)": fmt_score(s.mean) + fmt_ci(s.ci95),
        "pass rate": fmt_pct(s.pass_rate),
        **({"skill used": fmt_consulted(s.consulted)} if consulted else {}),
        "errors": str(s.n_errors),
        "tokens": f"{s.input_tokens + s.output_tokens + s.scorer_input_tokens + s.scorer_output_tokens:,}",
        "cost": fmt_cost(s.cost_usd) + (" (batch price)" if s.pricing == "batch" else ""),
        "time": f"{s.wall_time_s:.1f}s",
    }
    return row


def no_skill_line(s: EvalSummary) -> str:
    """The ``--baseline none`` line of a summary ("no skill: …; the skill adds …"), or ""."""
    return str(s.no_skill.get("line", "")) if s.no_skill else ""


def score_table(summaries: Sequence[EvalSummary], fmt: str = "simple") -> str:
    """The score table printed by ``eval`` (``fmt="github"`` for markdown)."""
    consulted = any(s.consulted is not None for s in summaries)  # a column only where agents ran
    rows = [summary_row(s, consulted) for s in summaries]
    return tabulate(rows, headers="keys", tablefmt=fmt, disable_numparse=True)


def eval_report(summary: EvalSummary, results: Sequence[TaskResult], *, threshold: float | None = None) -> str:
    """``report.md`` for one eval: the score table, what ran, then failing and errored tasks."""
    s = summary
    lines = [f"# skillopt-ci eval: {escape_inline(s.skill['name'])} on {escape_inline(s.suite['name'])}/{s.split}", ""]
    lines += [score_table([s], "github"), ""]
    if s.no_skill:
        lines += [f"Baseline: {no_skill_line(s)}.", ""]  # our own numbers: nothing to escape
    model = s.model
    lines.append(
        f"Model {code_span(model['provider'])} / {code_span(model['model'])} · repeats {s.repeats} · "
        f"skill `{s.skill['hash'][:12]}` ({s.skill['tokens']} tokens) · suite `{s.suite['hash'][:12]}` · "
        f"cache hits {s.cache_hits}/{s.n_results}"
    )
    if s.consulted is not None and s.consulted.rollouts:
        lines += ["", consulted_line(s.consulted)]
    if s.trigger is not None:
        lines += ["", trigger_line(s.trigger)]
    if s.pricing == "batch":
        lines += ["", f"Sent through the provider's batch API: {fmt_cost(s.cost_usd)} at the batch price."]
    if threshold is not None:
        verdict = "passed" if s.mean is not None and s.mean >= threshold else "failed"
        lines += ["", f"Threshold {threshold:.3f}: **{verdict}**."]
    if not s.complete:
        lines += ["", f"**Incomplete run:** {escape_inline(s.stopped or 'stopped early')}. Re-run the same command to resume."]
    if s.errors_by_kind:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(s.errors_by_kind.items()))
        lines += ["", f"Errored rollouts are missing data, left out of the score: {kinds}."]
    failed = [r for r in results if r.ok and not r.passed]
    errored = [r for r in results if not r.ok]
    for title, rows in (("Failed tasks", failed), ("Errored rollouts", errored)):
        if rows:
            lines += ["", f"<details><summary>{title} ({len(rows)})</summary>", "", *result_table(rows), "", "</details>"]
    return "\n".join(lines) + "\n"


def result_table(rows: Sequence[TaskResult]) -> list[str]:
    """Failing or errored results as a markdown table, at most :data:`MAX_LISTED_FAILURES` rows. A
    ``steps`` column appears when a result has a trajectory (see :func:`trajectory_cell`)."""
    steps = any(r.trajectory is not None for r in rows)
    lines = ["| task | repeat | output | feedback |" + (" steps |" if steps else ""),
             "| --- | --- | --- | --- |" + (" --- |" if steps else "")]
    for r in rows[:MAX_LISTED_FAILURES]:
        detail = r.feedback if r.ok else f"{r.error['kind']}: {r.error['message']}" if r.error else ""
        lines.append(
            f"| {escape_inline(r.task_id, 60)} | {r.repeat} | {escape_inline(r.output or '', 120)} | {escape_inline(detail, 200)} |"
            + (f" {trajectory_cell(r)} |" if steps else "")
        )
    if len(rows) > MAX_LISTED_FAILURES:
        lines.append(f"\n… and {len(rows) - MAX_LISTED_FAILURES} more in results.jsonl.")
    return lines


def trajectory_cell(r: TaskResult) -> str:
    """A trajectory in one bounded table cell: its number of steps, the environment's reward and
    the last error step (escaped, cut), never the steps themselves (they are in results.jsonl and
    the HTML report)."""
    if r.trajectory is None:
        return "—"
    n = len(r.trajectory)
    parts = [f"{n} step{'' if n == 1 else 's'}"]
    if isinstance(r.reward, (int, float)):
        parts.append(f"reward {r.reward:.3f}")
    errors = [s for s in r.trajectory if isinstance(s, dict) and (s.get("kind") == "error" or s.get("is_error"))]
    if errors:
        last = errors[-1]
        where = f"{last['name']}: " if last.get("name") and last.get("kind") != "error" else ""
        parts.append("last error: " + escape_inline(f"{where}{last.get('text') or '(no message)'}", 120))
    return " · ".join(parts)
