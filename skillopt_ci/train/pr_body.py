"""The nightly training pull request in markdown: its title, its body, its check run. Pure.

Readable in ten seconds: a hidden marker, one headline, the val/test score table; then the
accepted edits (op, text, why, support, step), a collapsible diff of the skill, what the run cost
and where its files are. Edit text and rationales come from a model: they are escaped (no raw
HTML, no ``@mentions``, no forged markers). The body stays under GitHub's 65,536 characters: the
head and the footer always fit; edits, then the diff, are cut with a visible note.
"""

from __future__ import annotations

import re
import textwrap

from skillopt_ci.core.edits import unified_diff
from skillopt_ci.render.eval_report import fmt_cost, fmt_score
from skillopt_ci.render.markdown import (
    code_block,
    defuse_comments,
    escape_inline,
    neutralize_mentions,
)
from skillopt_ci.train.records import AcceptedEdit, SplitComparison, TrainingSummary
from skillopt_ci.train.report import (
    cancelled_line,
    curve_line,
    description_section,
    no_skill_lines,
    stopped_line,
    trigger_table,
)

BODY_LIMIT = 65_536
TITLE_LIMIT = 256
CHECK_NAME = "skillopt-ci train"
MARKER_PREFIX = "<!-- skillopt-ci:train:"
EDIT_TEXT_LIMIT = 1_500
ANCHOR_LIMIT = 400
ICONS = {
    "improved": "🟢 improved",
    "unchanged": "⚪ unchanged",
    "regressed": "🔴 regressed",
    "inconclusive": "⚠️ inconclusive",
}
ANCHOR_LABELS = {"insert_after": "after", "replace": "replacing", "delete": "deleting"}
TEXT_LABELS = {"append": "added", "insert_after": "inserted", "replace": "with", "delete": "also removed"}
TRUNCATED = ("\n\n_Shortened to fit GitHub's 65,536-character limit: the full diff is under "
             "**Files changed** and every edit is in the run directory._")


def skill_name(summary: TrainingSummary) -> str:
    return str(summary.skill.get("name") or summary.skill.get("path") or "skill")


def marker(name: str) -> str:
    """``<!-- skillopt-ci:train:<name> -->`` with ``name`` reduced to ``[A-Za-z0-9._/-]`` so it
    can never close the comment."""
    return f"{MARKER_PREFIX}{re.sub(r'[^A-Za-z0-9._/-]', '-', name)[:100]} -->"


def _one_line(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_title(summary: TrainingSummary) -> str:
    """``skillopt: train ticket-triage (val 0.458 → 0.750)``; at most 256 characters."""
    v = summary.val
    scores = f" (val {fmt_score(v.current)} → {fmt_score(v.trained)})"
    return f"skillopt: train {_one_line(skill_name(summary), TITLE_LIMIT - 40 - len(scores))}{scores}"


def fmt_delta(c: SplitComparison) -> str:
    if c.delta is None:
        return "—"
    ci = f" [{c.ci[0]:+.3f}, {c.ci[1]:+.3f}]" if c.ci else ""
    return f"{c.delta:+.3f}{ci}"


def score_table(summary: TrainingSummary) -> str:
    """``| split | current | trained | Δ (95% CI) | verdict |`` for val and test."""
    rows = ["| split | current | trained | Δ (95% CI) | verdict |", "| --- | --- | --- | --- | --- |"]
    for name, c in (("val", summary.val), ("test", summary.test)):
        if c is None:
            rows.append(f"| {name} | — | — | — | not evaluated |")
            continue
        verdict = ICONS.get(c.verdict, escape_inline(c.verdict, 40))
        rows.append(f"| {name} ({c.n_tasks} tasks) | {fmt_score(c.current)} | {fmt_score(c.trained)} | "
                    f"{fmt_delta(c)} | {verdict} |")
    return "\n".join(rows)


def headline(summary: TrainingSummary) -> str:
    v, t = summary.val, summary.test
    text = (f"## skillopt-ci trained **{escape_inline(skill_name(summary), 64)}**: "
            f"val {fmt_score(v.current)} → {fmt_score(v.trained)}")
    if t is not None:
        text += f", test {fmt_score(t.current)} → {fmt_score(t.trained)}"
    return text


def edit_item(number: int, accepted: AcceptedEdit) -> str:
    """One accepted edit as a numbered list item; its code blocks indented into the item."""
    e = accepted.edit
    source = {"failure": "from failures", "success": "from successes", "slow_update": "slow update"}
    origin = source.get(e.source, escape_inline(e.source, 30)) + ("" if e.part == "body" else " · description")
    lead = f"{number}. "
    lines = [f"**{escape_inline(e.op, 20)}** · step {escape_inline(accepted.step, 40)} · "
             f"support {e.support} · {origin}"]
    if e.anchor and e.op in ANCHOR_LABELS:
        lines += [f"{ANCHOR_LABELS[e.op]}:", code_block(e.anchor, ANCHOR_LIMIT)]
    if e.text or e.op != "delete":
        label = TEXT_LABELS.get(e.op, "text")
        lines += [f"{label}:", code_block(e.text, EDIT_TEXT_LIMIT, lang="markdown")]
    if e.rationale.strip():
        lines.append(f"why: {escape_inline(e.rationale, 600)}")
    item = "\n".join(lines)
    return lead + textwrap.indent(item, " " * len(lead), lambda _: True)[len(lead):]


def skill_diff(old: str, new: str, path: str) -> str:
    """The unified diff of the skill with git-style ``a/``/``b/`` headers."""
    return unified_diff(old, new, f"a/{path}", f"b/{path}")


def _cut_lines(text: str, room: int) -> str:
    """``text`` cut at a line boundary to about ``room`` characters, saying how much is left."""
    if len(text) <= room:
        return text
    kept = text[: max(0, room - 60)]
    kept = kept[: kept.rfind("\n") + 1]
    return kept + f"… {text.count(chr(10), len(kept)) + 1} more lines: see Files changed"


def diff_section(diff: str, path: str, budget: int) -> tuple[str, bool]:
    """``<details>`` with the diff in at most ``budget`` characters, and whether it was cut
    ('' when not even a stub fits)."""
    lines = diff.splitlines()
    adds = sum(1 for x in lines if x.startswith("+") and not x.startswith("+++"))
    dels = sum(1 for x in lines if x.startswith("-") and not x.startswith("---"))
    head = f"<details><summary>Diff of {escape_inline(path, 200)} (+{adds} −{dels} lines)</summary>\n\n"
    tail = "\n\n</details>"
    text = diff.rstrip("\n") or "(no textual change)"
    room = budget - len(head) - len(tail) - 20
    while room >= 200:  # fences and zero-width spaces add characters: shrink until it fits
        shown = _cut_lines(text, room)
        section = head + code_block(shown, len(shown), lang="diff") + tail
        if len(section) <= budget:
            return section, shown != text
        room -= len(section) - budget
    return "", True


def fmt_duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    return f"{s // 3600}h {s % 3600 // 60}m"


def run_section(summary: TrainingSummary, run_url: str | None, artifact_hint: str | None) -> list[str]:
    s = summary
    tokens = s.input_tokens + s.output_tokens
    lines = [
        "### Run",
        f"- Steps: {s.steps_accepted} accepted · {s.steps_rejected} rejected · {s.steps_skipped} skipped",
        f"- Spent: {tokens:,} tokens ({s.input_tokens:,} in · {s.output_tokens:,} out) · "
        f"{fmt_cost(s.cost_usd)} · wall time {fmt_duration(s.wall_time_s)}",
    ]
    if s.cancelled_rollouts:
        lines.append(f"- {cancelled_line(s.cancelled_rollouts)}")
    if not s.complete:
        why = f" ({escape_inline(s.stopped, 120)})" if s.stopped else ""
        lines.append(f"- The run stopped early{why}: this is the best skill it found so far.")
    lines += [f"- {escape_inline(line, 1000)}" for line in (stopped_line(s), curve_line(s)) if line]
    where = f"[Workflow run]({run_url})" if run_url else "Workflow run: not available"
    if artifact_hint:  # ours, not a model's: kept as markdown, only markers and mentions defused
        where += " — " + neutralize_mentions(defuse_comments(_one_line(artifact_hint, 300)))
    lines.append(f"- {where}")
    return lines


def validation_chart(summary: TrainingSummary, max_points: int = 60) -> str:
    """A Mermaid line chart GitHub renders: the incumbent's validation score after each step.
    Step ids are ours (``e0-s03``), scores are numbers: nothing untrusted goes in."""
    points = [p for p in summary.points if p.incumbent is not None][-max_points:]
    if len(points) < 2:
        return ""
    names = ", ".join(f'"{p.step}"' for p in points)
    values = ", ".join(f"{p.incumbent:.3f}" for p in points)
    return "\n".join([
        "### Validation score per step", "",
        "```mermaid",
        "xychart-beta",
        '    title "Validation score of the current best skill"',
        f"    x-axis [{names}]",
        '    y-axis "score" 0 --> 1',
        f"    line [{values}]",
        "```",
    ])


FOOTER = ("_Opened by skillopt-ci. It is never merged automatically: review the diff and merge it "
          "yourself, or close it. Pull requests opened with the Actions token do not trigger "
          f"workflows, so the scores are posted as the check run `{CHECK_NAME}` on this commit._")


def decisions_section(summary: TrainingSummary, budget: int) -> str:
    """Each step's decision in one line, and the edits left out on the way with why, folded;
    as many steps as ``budget`` characters allow (the rest is in the run's report.md)."""
    steps = [p for p in summary.points[1:] if p.reason]
    if not steps or budget < 200:
        return ""
    head, foot = "<details><summary>Why each step was decided</summary>\n", "\n</details>"
    lines: list[str] = []
    used = len(head) + len(foot)
    for n, point in enumerate(steps):
        said = point.reason if point.reason.startswith(point.decision) else f"{point.decision}: {point.reason}"
        entry = [f"- **{escape_inline(point.step)}** {escape_inline(said, 200)}"]
        entry += [f"  - left out `{escape_inline(x['op'])}` {escape_inline(x['text'], 80)}: "
                  f"{escape_inline(x['reason'], 160)}" for x in point.left_out]
        text = "\n".join(entry)
        if used + len(text) + 80 > budget:
            lines.append(f"- _…{len(steps) - n} more step(s): see report.md in the run directory._")
            break
        lines.append(text)
        used += len(text) + 1
    return head + "\n" + "\n".join(lines) + foot


def render_training_pr(summary: TrainingSummary, *, current_text: str, trained_text: str,
                       run_url: str | None, artifact_hint: str | None = None,
                       limit: int = BODY_LIMIT) -> tuple[str, str]:
    """(title, body) of the training pull request; the body is at most ``limit`` characters and
    starts with :func:`marker`. ``artifact_hint`` is our own sentence, e.g. "download the
    artifact `skillopt-run` for the full run directory"."""
    name = skill_name(summary)
    path = str(summary.skill.get("path") or "SKILL.md")
    chart = validation_chart(summary)
    worth = no_skill_lines(summary)
    triggering, description = trigger_table(summary), description_section(summary)
    head = "\n".join([marker(name), headline(summary), "", score_table(summary),
                      *(["", *(f"{line}  " for line in worth)] if worth else []),
                      *(["", *triggering] if triggering else []), *(["", *description] if description else []),
                      *(["", chart] if chart else [])])
    tail = "\n".join(["", *run_section(summary, run_url, artifact_hint), "", "---", FOOTER, ""])
    budget = limit - len(head) - len(tail) - len(TRUNCATED) - 8
    cut = False

    edits = list(summary.accepted_edits)
    parts = [f"### {len(edits)} accepted edit{'s' if len(edits) != 1 else ''}"] if edits else \
        ["### No accepted edits were recorded"]
    budget -= len(parts[0]) + 2
    reserve = min(budget // 3, 4_000)  # keep room for at least a part of the diff
    items: list[str] = []
    for i, accepted in enumerate(edits, 1):
        item = edit_item(i, accepted)
        if len(item) + 1 > budget - reserve:
            items.append(f"\n_…and {len(edits) - i + 1} more edit(s), not shown._")
            budget -= len(items[-1]) + 1
            cut = True
            break
        items.append(item)
        budget -= len(item) + 1
    if items:
        parts.append("\n".join(items))

    diff = skill_diff(current_text, trained_text, path)
    section, shortened = diff_section(diff, path, budget)
    parts.append(section or "_The diff is too long to show here: see **Files changed**._")
    cut = cut or shortened
    budget -= len(parts[-1]) + 2
    decisions = decisions_section(summary, budget)
    if decisions:
        parts.append(decisions)

    body = head + "\n\n" + "\n\n".join(parts) + (TRUNCATED if cut else "") + "\n" + tail
    if len(body) > limit:  # a pathological head (never with sane inputs): cut hard, keep the note
        body = body[: limit - len(TRUNCATED) - 1] + TRUNCATED + "\n"
    return render_title(summary), body


def render_training_check(summary: TrainingSummary, run_url: str | None = None) -> tuple[str, str]:
    """(title, summary) for the ``skillopt-ci train`` check run: the headline and score table."""
    v = summary.val
    title = f"val {fmt_score(v.current)} → {fmt_score(v.trained)}"
    if summary.test is not None:
        title += f", test {fmt_score(summary.test.current)} → {fmt_score(summary.test.trained)}"
    lines = [headline(summary).removeprefix("## "), "", score_table(summary), "",
             f"{summary.steps_accepted} steps accepted · {summary.steps_rejected} rejected · "
             f"{summary.steps_skipped} skipped · {fmt_cost(summary.cost_usd)}"]
    if run_url:
        lines += ["", f"[Workflow run]({run_url})"]
    return title[:255], "\n".join(lines)[:65_535]
