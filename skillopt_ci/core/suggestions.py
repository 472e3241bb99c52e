"""A trained skill as suggested changes on a pull request's own lines.

GitHub lets a review comment carry a ``suggestion`` block that replaces the lines it spans, and a
reviewer accepts it with one click; the comment must sit on lines of the pull request's diff
(a hunk of the file's patch, added or context lines of the new side, all in one hunk). Here the
change from the head's skill to the trained one is cut into contiguous :class:`Change` blocks;
each one that fits a hunk becomes a :class:`Suggestion` (the head lines it spans and what replaces
them), the rest stay changes that the review body shows as a diff. An insertion spans the line
before it (or after, when that one is in the diff) and repeats it, since a suggestion can only
replace lines. The accepted edits a change comes from are found by their text
(:func:`edits_behind`). Pure: no I/O.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from skillopt_ci.core.edits import Edit

_HUNK_RE = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True)
class Change:
    """Head lines ``start``..``end`` (1-based, inclusive) become ``new``; for an insertion
    ``end == start - 1``: ``new`` goes after head line ``end`` (0: before the first line)."""

    start: int
    end: int
    old: tuple[str, ...]
    new: tuple[str, ...]


@dataclass(frozen=True)
class Suggestion:
    """A review comment on head lines ``first``..``last`` whose suggestion is ``lines``."""

    change: Change
    first: int
    last: int
    lines: tuple[str, ...]


def changes(head: str, trained: str) -> list[Change]:
    """The head's skill → the trained one as contiguous blocks of lines, in file order."""
    old, new = head.splitlines(), trained.splitlines()
    blocks = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            blocks.append(Change(i1 + 1, i2, tuple(old[i1:i2]), tuple(new[j1:j2])))
    return blocks


def diff_hunks(patch: str | None) -> list[tuple[int, int]]:
    """The new-side line ranges ``(first, last)`` of each hunk of a file's unified ``patch`` (as
    the pull request's files list gives it); empty when there is no patch (a binary file, a diff
    too large for GitHub to show)."""
    ranges = []
    for line in (patch or "").splitlines():
        match = _HUNK_RE.match(line)
        if match:
            first, count = int(match.group(1)), int(match.group(2) if match.group(2) is not None else 1)
            if count:
                ranges.append((first, first + count - 1))
    return ranges


def _inside(first: int, last: int, hunks: Sequence[tuple[int, int]]) -> bool:
    return any(lo <= first and last <= hi for lo, hi in hunks)


def place(change: Change, head_lines: Sequence[str], hunks: Sequence[tuple[int, int]]) -> Suggestion | None:
    """``change`` as a suggestion on lines of the diff, or None when it cannot sit on any."""
    if change.end >= change.start:  # lines replaced or removed: the comment spans exactly them
        if _inside(change.start, change.end, hunks):
            return Suggestion(change, change.start, change.end, change.new)
        return None
    before, after = change.end, change.end + 1  # an insertion: repeat a neighbour it can replace
    if before >= 1 and _inside(before, before, hunks):
        return Suggestion(change, before, before, (head_lines[before - 1], *change.new))
    if after <= len(head_lines) and _inside(after, after, hunks):
        return Suggestion(change, after, after, (*change.new, head_lines[after - 1]))
    return None


def suggest(head: str, trained: str, patch: str | None) -> tuple[list[Suggestion], list[Change]]:
    """(the changes that fit the diff as suggestions, the ones that do not), in file order."""
    head_lines, hunks = head.splitlines(), diff_hunks(patch)
    placed: list[Suggestion] = []
    outside: list[Change] = []
    for change in changes(head, trained):
        suggestion = place(change, head_lines, hunks)
        if suggestion is None or (placed and placed[-1].last >= suggestion.first):
            outside.append(change)  # two suggestions on one line would contradict each other
        else:
            placed.append(suggestion)
    return placed, outside


def _fold(text: str) -> str:
    return " ".join(text.split()).lower()


def edits_behind(change: Change, edits: Sequence[Edit]) -> list[int]:
    """The indexes of the ``edits`` whose text is in the lines ``change`` brings (or, for one
    that only takes text out, whose anchor is in the lines it removes)."""
    added, removed = _fold("\n".join(change.new)), _fold("\n".join(change.old))

    def wrote(edit: Edit) -> bool:
        pieces = [_fold(line) for line in edit.text.splitlines() if _fold(line)]
        if pieces:
            return any(piece in added for piece in pieces)
        anchor = _fold(edit.anchor)
        return bool(anchor) and anchor in removed

    return [i for i, edit in enumerate(edits) if wrote(edit)]
