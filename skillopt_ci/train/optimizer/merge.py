"""Merge the proposals of one step into one ranked list of edits.

Duplicates (same :meth:`Edit.key`: operation, anchor and text with case and spacing folded) fold
into one edit whose ``support`` is the sum and whose rationale joins the distinct ones. Edits
that cannot all apply because they compete for one anchor — two different replacements or
deletions of it, or an insertion after an anchor another edit replaces or deletes — are a
conflict: the one with more support stays (the earlier one on ties), the others are dropped.
Several insertions after the same anchor are not a conflict.

Order (the ranking :func:`~skillopt_ci.train.optimizer.select.select_edits` cuts): failure-driven edits
first, then success-driven ones; within each, support descending, then first appearance. An edit
proposed by both kinds counts as failure-driven. Pure and deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from skillopt_ci.core.edits import Edit
from skillopt_ci.train.optimizer.reflect import FAILURE, Proposal

MAX_RATIONALES = 3
RATIONALE_CHARS = 200
_CONSUMING = ("replace", "delete")


def merge_proposals(proposals: Sequence[Proposal]) -> list[Edit]:
    folded: dict[tuple[str, ...], Edit] = {}
    rationales: dict[tuple[str, ...], list[str]] = {}
    first_seen: dict[tuple[str, ...], int] = {}
    for proposal in proposals:
        for edit in proposal.edits:
            key = edit.key()
            if key not in folded:
                first_seen[key] = len(first_seen)
                folded[key] = edit
                rationales[key] = []
            else:
                kept = folded[key]
                source = FAILURE if FAILURE in (kept.source, edit.source) else kept.source
                folded[key] = replace(kept, support=kept.support + edit.support, source=source)
            reason = " ".join(edit.rationale.split())
            if reason and reason not in rationales[key]:
                rationales[key].append(reason)
    merged = {key: replace(edit, rationale=_join(rationales[key])) for key, edit in folded.items()}
    survivors = _resolve_conflicts(merged, first_seen)
    ranked = sorted(survivors, key=lambda k: (merged[k].source != FAILURE, -merged[k].support, first_seen[k]))
    return [merged[k] for k in ranked]


def _resolve_conflicts(
    merged: dict[tuple[str, ...], Edit], first_seen: dict[tuple[str, ...], int]
) -> list[tuple[str, ...]]:
    by_anchor: dict[tuple[str, str], list[tuple[str, ...]]] = {}
    for key in merged:
        anchor = key[1]  # (op, anchor, text[, part]): see Edit.key
        if anchor:
            by_anchor.setdefault((merged[key].part, anchor), []).append(key)
    dropped: set[tuple[str, ...]] = set()
    for keys in by_anchor.values():
        if len(keys) > 1 and any(merged[k].op in _CONSUMING for k in keys):
            best = min(keys, key=lambda k: (-merged[k].support, first_seen[k]))
            dropped.update(k for k in keys if k != best)
    return [k for k in merged if k not in dropped]


def _join(reasons: list[str]) -> str:
    shown = [r if len(r) <= RATIONALE_CHARS else r[: RATIONALE_CHARS - 1] + "…" for r in reasons[:MAX_RATIONALES]]
    more = len(reasons) - len(shown)
    return " | ".join(shown) + (f" (+{more} more)" if more else "")
