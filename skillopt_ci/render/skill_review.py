"""The static review for people: lines for a terminal, a markdown section for the sticky
comment and the job summary. Findings quote the skill's own text only through our messages,
and every path is escaped (a fork names its files)."""

from __future__ import annotations

from collections.abc import Sequence

from skillopt_ci.core.skill_review import Finding, SkillReview
from skillopt_ci.render.markdown import code_span, escape_inline

ICONS = {"error": "❌", "warning": "⚠️", "notice": "ℹ️"}
MAX_SHOWN = 30  # findings per skill in a comment; the annotations carry them all


def finding_line(f: Finding) -> str:
    """``skills/x/SKILL.md:12: warning: the same rule as line 9 [duplicate-rule]``"""
    where = f"{f.path}:{f.line}" if f.line else f.path
    return f"{where}: {f.level}: {f.message} [{f.rule}]"


def review_section(reviews: Sequence[SkillReview], *, heading: str = "### Static review (no model)") -> str:
    """Per skill, a table of its findings (or "no findings"), most severe first."""
    lines = [heading, ""]
    if not reviews:
        return "\n".join([*lines, "No configured skill changed."])
    order = {"error": 0, "warning": 1, "notice": 2}
    for r in reviews:
        counts = {level: sum(f.level == level for f in r.findings) for level in order}
        said = ", ".join(f"{n} {level}{'s' if n != 1 else ''}" for level, n in counts.items() if n) or "no findings"
        lines.append(f"**{escape_inline(r.name, 60)}** ({code_span(r.path, 200)}): {said}")
        shown = sorted(r.findings, key=lambda f: (order.get(f.level, 3), f.path, f.line or 0))[:MAX_SHOWN]
        if shown:
            lines += ["", "| | where | finding |", "| --- | --- | --- |"]
            lines += [f"| {ICONS.get(f.level, '')} | {code_span(f'{f.path}:{f.line}' if f.line else f.path, 200)} | "
                      f"{escape_inline(f.message, 300)} ({escape_inline(f.rule, 40)}) |" for f in shown]
            if len(r.findings) > len(shown):
                lines.append(f"\n_…and {len(r.findings) - len(shown)} more: see the annotations._")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
