"""How many merged edits a step may apply: an edit budget that decays over the run.

Early steps may change more (the skill is far from good); later steps make smaller, safer moves.
The budget is spent only on edits that apply: :func:`select_applicable` applies the ranking in
order, skips an edit that cannot be applied (an anchor not in the skill, a cap) without counting
it, and stops when the budget is spent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from skillopt_ci.core.edits import Edit, EditCaps, EditOutcome, apply_edits

SCHEDULES = ("cosine", "linear", "constant")


def edit_budget(schedule: str, step: int, total_steps: int, start: int = 4, end: int = 2) -> int:
    """The budget at ``step`` (0-based) of ``total_steps``: ``start`` at the first step, ``end``
    at the last, along a half cosine (``cosine``), a straight line (``linear``) or flat at
    ``start`` (``constant``); rounded half up. Steps outside the range are clamped. Raises
    ``ValueError`` for an unknown schedule or a negative budget."""
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown edit budget schedule {schedule!r}; use one of: {', '.join(SCHEDULES)}")
    if start < 0 or end < 0:
        raise ValueError(f"edit budgets must not be negative (start {start}, end {end})")
    if schedule == "constant" or total_steps <= 1:
        return start
    t = min(max(step, 0), total_steps - 1) / (total_steps - 1)
    weight = (1 + math.cos(math.pi * t)) / 2 if schedule == "cosine" else 1 - t
    return math.floor(end + (start - end) * weight + 0.5)


def select_edits(merged: Sequence[Edit], budget: int) -> list[Edit]:
    """The first ``budget`` edits: the merge order is the ranking."""
    return list(merged[: max(budget, 0)])


_CAPS = EditCaps()


def select_applicable(text: str, merged: Sequence[Edit], budget: int,
                      caps: EditCaps = _CAPS) -> tuple[list[Edit], str, list[EditOutcome]]:
    """Apply ``merged`` in ranking order to ``text`` until ``budget`` edits have applied: the
    edits that applied, the resulting text, and the outcome of every edit tried (those skipped
    on the way included, so the record says why). Pure."""
    selected: list[Edit] = []
    outcomes: list[EditOutcome] = []
    for edit in merged:
        if len(selected) >= budget:
            break
        text, (outcome,) = apply_edits(text, [edit], caps)
        outcomes.append(outcome)
        if outcome.applied:
            selected.append(edit)
    return selected, text, outcomes
