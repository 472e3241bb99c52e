"""The review that carries a trained skill onto a pull request: one comment per suggestion (the
edit behind it, its rationale, support and the validation gain it was accepted with, then the
``suggestion`` block) and the review body (the scores, how to take the whole skill, and as a diff
the changes that fall outside the pull request's diff).

A suggestion block holds the trained lines verbatim (accepting it writes them into the file, so
nothing in it may be escaped); its fence is longer than any backtick run inside, so the text
cannot close it. Everything else from the run (rationales, step names) is escaped."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from skillopt_ci.core.suggestions import Change, Suggestion
from skillopt_ci.render.markdown import code_block, code_span, escape_inline
from skillopt_ci.train.pr_body import headline, score_table
from skillopt_ci.train.records import AcceptedEdit, TrainingSummary

RATIONALE_LIMIT = 600


def suggestion_fence(lines: Sequence[str]) -> str:
    """The suggestion block for ``lines`` (empty: the spanned lines are removed)."""
    text = "\n".join(lines)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    bar = "`" * max(3, longest + 1)
    return f"{bar}suggestion\n{text}\n{bar}" if lines else f"{bar}suggestion\n{bar}"


def validation_gains(summary: TrainingSummary) -> dict[str, float]:
    """Per accepted step, how much the incumbent's validation mean rose when it was accepted."""
    gains: dict[str, float] = {}
    last: float | None = None
    for point in summary.points:
        if point.decision == "accepted" and point.incumbent is not None and last is not None:
            gains[point.step] = point.incumbent - last
        if point.incumbent is not None:
            last = point.incumbent
    return gains


def edit_lines(accepted: AcceptedEdit, gains: Mapping[str, float]) -> list[str]:
    e = accepted.edit
    gain = gains.get(accepted.step)
    said = f"validation {gain:+.3f} when accepted" if gain is not None else "accepted"
    part = "" if e.part == "body" else f" of the {escape_inline(e.part, 20)}"
    lines = [f"**{escape_inline(e.op, 20)}**{part} · step {escape_inline(accepted.step, 40)} · support {e.support} · "
             f"{said}"]
    if e.rationale.strip():
        lines.append(f"why: {escape_inline(e.rationale, RATIONALE_LIMIT)}")
    return lines


def suggestion_comment(suggestion: Suggestion, behind: Sequence[AcceptedEdit], gains: Mapping[str, float]) -> str:
    """The body of one review comment: the edits it comes from, then the suggestion block."""
    lines = ["**skillopt-ci** suggests this change, from training on this pull request's head:", ""]
    for accepted in behind:
        lines += [*edit_lines(accepted, gains), ""]
    if not behind:
        lines += ["_Part of the trained skill; no single accepted edit wrote these lines (a later edit "
                  "reworded an earlier one)._", ""]
    return "\n".join([*lines, suggestion_fence(suggestion.lines)])


def change_diff(changes: Sequence[Change]) -> str:
    """The changes as one unified-diff-like text, each headed by the head lines it touches."""
    parts = []
    for c in changes:
        where = f"after line {c.end}" if c.end < c.start else (
            f"line {c.start}" if c.start == c.end else f"lines {c.start}–{c.end}")
        parts.append("\n".join([f"@@ {where} @@", *(f"-{x}" for x in c.old), *(f"+{x}" for x in c.new)]))
    return "\n".join(parts)


def review_body(summary: TrainingSummary, *, path: str, placed: int, outside: Sequence[Change],
                commit: str | None, run_url: str | None, limit: int = 60_000) -> str:
    """The review's own text: the scores, what to do, and the changes that are not suggestions."""


    lines = [headline(summary).replace("## ", "### ", 1), "", score_table(summary), ""]
    said = f"{placed} suggestion{'s' if placed != 1 else ''} on {code_span(path, 200)} below"
    them = "them one by one" if placed != 1 else "it"
    take = (f"Accept {them} with GitHub's \"Commit suggestion\", or comment `/skillopt apply` to commit the whole trained skill "
            f"(`{commit[:7]}`, the bytes that were validated) to this branch." if commit else
            f"Accept {them} with GitHub's \"Commit suggestion\"; `/skillopt apply` is not available for this run (the trained skill "
            "could not be stored: see the workflow run).")
    lines += [f"{said}. {take}" if placed else f"No change falls on this pull request's diff. {take}", ""]
    if outside:
        lines += [f"{len(outside)} change{'s fall' if len(outside) != 1 else ' falls'} outside this pull request's "
                  "diff, so GitHub cannot offer them as suggestions:", "",
                  code_block(change_diff(outside), limit // 2, lang="diff"), ""]
    if run_url:
        lines.append(f"[Workflow run]({run_url})")
    return "\n".join(lines).rstrip()[:limit] + "\n"
