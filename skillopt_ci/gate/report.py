"""The gate's report in markdown: a PR comment, a job summary, ``report.md``. Pure.

Readable in ten seconds: a verdict line, one row per skill, then details only where something
regressed. Everything from a model or a task file is escaped; the whole text is kept under a size
limit (GitHub comments: 65,536 characters) by dropping detail sections, with a visible note.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from skillopt_ci.core.triggering import rate_change
from skillopt_ci.gate.verdict import WORKTREE, GateReport, SkillVerdict, TaskExample
from skillopt_ci.render.eval_report import fmt_consulted, fmt_cost, fmt_score
from skillopt_ci.render.markdown import code_block, code_span, escape_inline

COMMENT_LIMIT = 65_536
ICONS = {
    "improved": "🟢 improved",
    "unchanged": "⚪ unchanged",
    "regressed": "🔴 regressed",
    "inconclusive": "⚠️ inconclusive",
    "new": "🆕 new",
    "deleted": "🗑️ deleted",
}
HEADLINES = {
    "passed": "✅ passed",
    "failed": "❌ failed",
    "overridden": "🟡 regression allowed by label",
    "inconclusive": "⚠️ inconclusive",
    "skipped": "⏭️ no skill changed",
}


def fmt_delta(s: SkillVerdict) -> str:
    c = s.comparison
    if c is None or c.delta is None:
        return "—"
    ci = f" [{c.ci[0]:+.3f}, {c.ci[1]:+.3f}]" if c.ci else ""
    return f"{c.delta:+.3f}{ci}"


def _consequence(s: SkillVerdict, overridden: bool, fails: str, allowed: str) -> str:
    """What a skill's verdict does to the check: an overridden gate never says "fails"."""
    if not s.failed:
        return ""
    return allowed if overridden else fails


def skill_row(s: SkillVerdict, overridden: bool = False) -> str:
    c = s.comparison
    base = fmt_score(c.base_mean if c else (s.base.mean if s.base else None))
    head = fmt_score(c.head_mean if c else (s.head.mean if s.head else None))
    verdict = ICONS.get(s.verdict, s.verdict) + _consequence(s, overridden, " · fails the check", " · allowed by label")
    improved = str(c.improved) if c else "—"
    regressed = str(c.regressed) if c else "—"
    return f"| {escape_inline(s.change.name, 60)} | {base} | {head} | {fmt_delta(s)} | {improved} | {regressed} | {verdict} |"


def power_line(report: GateReport, name: Callable[[str], str] = str) -> str | None:
    """One short line on what the gate could have caught (80% power), or ``None`` when no skill
    was compared (or the record predates the figure). ``name`` renders a skill name."""
    found = [(name(s.change.name), s.comparison) for s in report.skills
             if s.comparison is not None and s.comparison.detectable_drop is not None]
    if not found:
        return None

    def drop(c: Any) -> str:
        if c.detectable_drop >= 0.995:
            return "no drop short of the whole score"
        worst = " (worst-case noise)" if c.detectable_drop_basis == "worst case" else ""
        return f"drops of about {c.detectable_drop * 100:.0f} points or more{worst}"

    if len(found) == 1:
        return f"This gate can detect {drop(found[0][1])} (80% power)."
    return "This gate can detect (80% power): " + "; ".join(f"{name}: {drop(c)}" for name, c in found) + "."


def _fmt_value(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def example_block(t: TaskExample, limit: int = 600) -> str:
    return "\n".join([
        f"**{escape_inline(t.task_id, 80)}** (Δ {t.delta:+.2f})",
        "",
        "Input:",
        code_block(_fmt_value(t.input), limit),
        "Expected:",
        code_block(_fmt_value(t.expected), limit // 2),
        "Base answer:",
        code_block(t.base_output or "(no valid answer)", limit),
        "Head answer:",
        code_block(t.head_output or "(no valid answer)", limit),
        "",
    ])


def spend_table(report: GateReport) -> str:
    rows = []
    for side in ("base", "head"):
        summaries = [getattr(s, side) for s in report.skills if getattr(s, side)]
        if not summaries:
            continue
        tokens = sum(x.input_tokens + x.output_tokens + x.scorer_input_tokens + x.scorer_output_tokens for x in summaries)
        costs = [x.spent_usd for x in summaries]
        spent = None if any(c is None for c in costs) else sum(c for c in costs if c is not None)
        hits = sum(x.cache_hits for x in summaries)
        results = sum(x.n_results for x in summaries)
        wall = sum(x.wall_time_s for x in summaries)
        rows.append(f"| {side} | {results} | {hits} | {tokens:,} | {fmt_cost(spent)} | {wall:.1f}s |")
    if not rows:
        return ""
    return "\n".join(["| side | rollouts | from cache | tokens | spent | time |", "| --- | --- | --- | --- | --- | --- |", *rows])


def render_gate(report: GateReport, *, limit: int = COMMENT_LIMIT, header: str = "",
                footer: str = "", run_url: str | None = None) -> str:
    """The whole report, at most ``limit`` characters. ``header`` (e.g. a hidden marker) and
    ``footer`` are ours and inserted verbatim."""
    p = report.policy
    head = [header] if header else []
    title = "compare" if report.mode == "compare" else "gate"
    head.append(f"## skillopt-ci {title}: {HEADLINES.get(report.verdict, report.verdict)}")
    head.append("")
    compared = f"`{report.merge_base[:7]}` → `{report.head_sha[:7]}`" if report.head_ref != WORKTREE else \
        f"`{report.merge_base[:7]}` → working tree"
    if report.mode == "compare":
        compared = f"{escape_inline(report.base_ref, 200)} → {escape_inline(report.head_ref, 200)}"
    repeats = f", {p.repeats} repeats" if p.repeats else ""
    shard = f", shard {report.shard}" if report.shard else ""
    head.append(f"Split {code_span(p.split, 40)}{repeats}{shard}, paired on the same tasks · {compared} · "
                f"fails on a {int(p.confidence * 100)}% confident drop beyond {p.margin:.2f}")
    head.append("")
    if report.skills:
        head += ["| skill | base | head | Δ (95% CI) | improved | regressed | verdict |",
                 "| --- | --- | --- | --- | --- | --- | --- |"]
        head += [skill_row(s, report.overridden) for s in report.skills]
        power = power_line(report, lambda n: escape_inline(n, 60))
        if power:
            head += ["", power]
    else:
        head.append("No configured skill or suite changed.")
    named = lambda n: escape_inline(n, 60)  # noqa: E731
    notes = no_skill_notes(report, named) + consulted_notes(report, named) + trigger_notes(report, named)
    notes += [f"- **{escape_inline(s.change.name, 60)}** skill folder: {escape_inline(s.change.files_line(), 600)}"
             for s in report.skills if s.change.files]
    notes += [f"- **{escape_inline(s.change.name, 60)}**: {escape_inline(s.reason, 300)}"
              for s in report.skills if s.failed or s.verdict == "inconclusive"]
    notes += [f"- ⚠️ **{escape_inline(s.change.name, 60)}** (warning): {escape_inline(w, 300)}"
              for s in report.skills for w in s.warnings]
    if notes:
        head += ["", *notes]
    if report.overridden:
        head += ["", f"The label {code_span(p.override_label, 60)} is set: the regression is allowed, the check passes."]
    elif report.failed and report.mode == "gate":
        head += ["", f"To merge anyway, add the label {code_span(p.override_label, 60)}."]
    tail = []
    spend = spend_table(report)
    if spend:
        tail += ["", spend]
    if run_url:
        tail += ["", f"[Workflow run]({run_url})"]
    if footer:
        tail += ["", footer]
    return assemble(head, skill_details(report), tail, limit)


def no_skill_notes(report: GateReport, name: Callable[[str], str] = str) -> list[str]:
    """``--baseline none``: per skill, the head's score with no skill and what the skill adds
    (information only; the verdict never depends on it)."""
    return [f"- **{name(s.change.name)}** baseline: {s.head.no_skill.get('line', '')}"
            for s in report.skills if s.head is not None and s.head.no_skill]


def consulted_notes(report: GateReport, name: Callable[[str], str] = str) -> list[str]:
    """Agent environments: per skill, how often the agent consulted it on base and on head
    ("skill used: base 6/6 (100%) → head 2/6 (33%)"); information, the verdict is the score's."""
    lines = []
    for s in report.skills:
        sides = [(side, summary.consulted) for side, summary in (("base", s.base), ("head", s.head))
                 if summary is not None and summary.consulted is not None]
        if sides:
            used = " → ".join(f"{side} {fmt_consulted(c)}" for side, c in sides)
            lines.append(f"- **{name(s.change.name)}** skill used: {used}")
    return lines


def trigger_notes(report: GateReport, name: Callable[[str], str] = str) -> list[str]:
    """Trigger tasks: per skill, recall and precision on base and head ("triggering: recall 6/6
    (100%) → 2/6 (33%), 4 fewer requests use the skill; precision …")."""
    lines = []
    for s in report.skills:
        base, head = (x.trigger if x is not None else None for x in (s.base, s.head))
        if head is None:
            continue
        parts = [rate_change(rate, base, head) for rate in ("recall", "precision")]
        if base and base.tp > head.tp:
            fewer = base.tp - head.tp
            parts[0] += f", {fewer} fewer request{'' if fewer == 1 else 's'} the skill is for use it"
        if base and head.fp > base.fp:
            more = head.fp - base.fp
            parts[1] += f", {more} more request{'' if more == 1 else 's'} it is not for use it"
        lines.append(f"- **{name(s.change.name)}** triggering: " + "; ".join(parts))
    return lines


def skill_details(report: GateReport) -> list[str]:
    """Per skill, the collapsed list of tasks that lost the most and the tasks whose answers vary
    between repeats; the first thing dropped when the comment is too long."""
    details = []
    for s in report.skills:
        extra = []
        if s.regressed_tasks:
            extra.append(f"<details><summary>{escape_inline(s.change.name, 60)}: tasks that lost the most "
                         f"({len(s.regressed_tasks)} shown)</summary>\n")
            extra += [example_block(t) for t in s.regressed_tasks]
            extra.append("</details>")
        c = s.comparison
        flaky = sorted(set(c.flaky_base) | set(c.flaky_head)) if c else []
        if flaky:
            listed = ", ".join(escape_inline(t, 40) for t in flaky[:20])
            more = f" and {len(flaky) - 20} more" if len(flaky) > 20 else ""
            extra.append(f"\nFlaky in {escape_inline(s.change.name, 60)} (answers vary between repeats): {listed}{more}")
        if extra:
            details.append("\n".join(extra))
    return details


def assemble(head: list[str], details: list[str], tail: list[str], limit: int) -> str:
    """Head and tail always; detail sections while they fit; a note when some did not."""
    note = "\n\n_Report truncated to fit: the full report is in the run directory (report.md)._"
    base = "\n".join(head)
    end = "\n".join(tail)
    budget = limit - len(base) - len(end) - len(note) - 4
    kept, dropped = [], 0
    for section in details:
        if len(section) + 2 <= budget:
            kept.append(section)
            budget -= len(section) + 2
        else:
            dropped += 1
    body = base + ("\n\n" + "\n\n".join(kept) if kept else "")
    text = body + (note if dropped else "") + ("\n" + end if end else "") + "\n"
    if len(text) > limit:  # the head alone is too long (hundreds of skills): cut it hard
        text = text[: limit - len(note) - 1] + note + "\n"
    return text


def terminal_table(report: GateReport) -> str:
    """The per-skill table for a terminal."""
    from tabulate import tabulate

    rows = []
    for s in report.skills:
        c = s.comparison
        rows.append({
            "skill": s.change.name,
            "change": s.change.status,
            "base": fmt_score(c.base_mean if c else (s.base.mean if s.base else None)),
            "head": fmt_score(c.head_mean if c else (s.head.mean if s.head else None)),
            "Δ (95% CI)": fmt_delta(s),
            "improved": c.improved if c else "",
            "regressed": c.regressed if c else "",
            "verdict": s.verdict + _consequence(s, report.overridden, " (fails)", " (allowed by label)"),
        })
    if not rows:
        return "no configured skill or suite changed"
    table = tabulate(rows, headers="keys", tablefmt="simple", disable_numparse=True)
    files = "".join(f"\n{s.change.name}: {s.change.files_line()}" for s in report.skills if s.change.files)
    power = power_line(report)
    worth = "\n".join(line.removeprefix("- ") for line in no_skill_notes(report) + consulted_notes(report) + trigger_notes(report))
    return (table + ("\n" + files if files else "") + ("\n\n" + power if power else "")
            + ("\n\n" + worth.replace("**", "") if worth else ""))
