"""Skill edits: bounded, anchored changes an optimizer proposes to a skill document.

An edit is one of ``append`` (add text at the end of the body), ``insert_after`` (add text right
after an exact anchor), ``replace`` (swap an exact anchor for new text) and ``delete`` (remove an
exact anchor). Anchors are exact substrings of the current skill; an anchor that is missing or
appears more than once is not applied (never guessed).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from skillopt_ci.core.codec import Record
from skillopt_ci.core.description import (
    description_of,
    description_problem,
    edit_description,
    with_description,
)
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.skill import (
    FRONT_MATTER_RE,
    PROTECTED_RE,
    ProtectedRegion,
    estimate_tokens,
    find_protected,
)

OPS = ("append", "insert_after", "replace", "delete")
BODY, DESCRIPTION = "body", "description"
PARTS = (BODY, DESCRIPTION)


@dataclass(frozen=True)
class Edit(Record):
    """One proposed change. ``support`` counts the reflections that proposed it (after merging);
    ``source`` says which reflection produced it: ``failure``, ``success`` or ``slow_update``."""

    op: str
    text: str = ""
    anchor: str = ""
    rationale: str = ""
    support: int = 1
    source: str = "failure"
    part: str = BODY  # what it edits: the body, or the front matter's description (core.description)

    def key(self) -> tuple[str, ...]:
        """Identity for de-duplication: the part, operation, anchor and text with whitespace and
        case folded, so the same edit proposed twice in slightly different spacing merges."""
        folded = (self.op, _fold(self.anchor), _fold(self.text))
        return folded if self.part == BODY else (*folded, self.part)

    def _json_out(self, data: dict[str, Any]) -> dict[str, Any]:
        if data.get("part") == BODY:  # a body edit is written as it always was
            del data["part"]
        return data


def is_deletion(edit: Edit) -> bool:
    """The edit only takes text out (a ``delete``, or a ``replace`` by nothing)."""
    return edit.op == "delete" or (edit.op == "replace" and not edit.text)


def _fold(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


@dataclass(frozen=True)
class EditOutcome(Record):
    """What happened to one edit when applied. ``status`` is one of ``applied``,
    ``anchor_not_found``, ``ambiguous_anchor``, ``protected``, ``too_long``, ``over_token_cap``,
    ``no_op`` or ``invalid``; ``detail`` is a short human sentence."""

    edit: Edit
    status: str
    detail: str = ""

    @property
    def applied(self) -> bool:
        return self.status == "applied"


@dataclass(frozen=True)
class EditCaps:
    """Hard limits on edits. ``max_edit_chars`` bounds the new text of one step edit;
    ``max_skill_tokens`` bounds :func:`estimate_tokens` of the whole resulting skill. Only an edit
    that leaves the skill above the cap *and* bigger than before is refused, so a skill already
    over the cap can always be trimmed."""

    max_edit_chars: int = 800
    max_skill_tokens: int = 4000
    parts: tuple[str, ...] = (BODY,)  # which parts of the skill this run may edit (train.target)


_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")
_MARKER_DETAIL = (
    "new text contains a protected marker or an HTML comment; markers cannot be written by step edits"
)


def edit_problems(edit: Edit) -> list[str]:
    """Structural problems of one edit, independent of any skill text (empty when valid)."""
    if not isinstance(edit.text, str) or not isinstance(edit.anchor, str):
        return ["text and anchor must be strings"]
    if edit.op not in OPS:
        return [f"op {edit.op!r} is not one of {', '.join(OPS)}"]
    if edit.part not in PARTS:
        return [f"part {edit.part!r} is not one of {', '.join(PARTS)}"]
    problems: list[str] = []
    if edit.op == "append":
        if edit.anchor:
            problems.append("append takes no anchor")
    elif not edit.anchor.strip():
        problems.append(f"{edit.op} needs a non-blank anchor")
    if edit.op in ("append", "insert_after") and not edit.text.strip():
        problems.append(f"{edit.op} needs non-blank text")
    if edit.op == "delete" and edit.text:
        problems.append("delete takes no text")
    if "\x00" in edit.text:
        problems.append("text contains a NUL character")
    return problems


def apply_edits(
    text: str, edits: Sequence[Edit], caps: EditCaps = EditCaps()
) -> tuple[str, list[EditOutcome]]:
    """Apply ``edits`` in order to the evolving ``text``; return the result and one outcome per edit.

    A refused edit leaves the text as it was. Anchors must occur exactly once in the current
    text (occurrences inside protected blocks count too) and must not touch the front matter or
    a protected block, markers included. Whitespace rules (line breaks are ``\\n``):

    - ``append``: trailing whitespace of the skill is dropped, then one blank line, the text
      without leading/trailing newlines, and a final newline. The end of the skill is outside
      every protected block, so an append lands after a trailing block.
    - ``insert_after``: if the anchor ends with a newline, the text (newlines stripped) plus a
      newline goes right after it; if the anchor ends a line, a newline plus the text (newlines
      stripped) goes right after it, before the existing line break -- either way anchoring on a
      whole bullet line adds the text as the next line. Mid-line, the text is inserted verbatim.
    - ``replace``: the anchor is swapped for the text verbatim; an empty text acts as ``delete``.
    - ``delete``: the anchor is removed. If it covered whole lines, their line break goes too
      (no empty line is left), and if that leaves two blank lines in a row -- or a blank line at
      the start or end of the skill -- one of them is removed.

    Every result keeps the front matter and every protected block byte for byte, so it parses
    whenever ``text`` did. Raises :class:`InputError` if ``text`` has unbalanced markers.
    Deterministic and pure.
    """
    find_protected(text)
    outcomes: list[EditOutcome] = []
    for edit in edits:
        text, outcome = _apply_one(text, edit, caps)
        outcomes.append(outcome)
    return text, outcomes


def _apply_one(text: str, edit: Edit, caps: EditCaps) -> tuple[str, EditOutcome]:
    def refuse(status: str, detail: str) -> tuple[str, EditOutcome]:
        return text, EditOutcome(edit, status, detail)

    problems = edit_problems(edit)
    if problems:
        return refuse("invalid", "; ".join(problems))
    if len(edit.text) > caps.max_edit_chars:
        return refuse("too_long", f"text is {len(edit.text)} characters; the limit is {caps.max_edit_chars}")
    if _writes_marker(edit.text):
        return refuse("protected", _MARKER_DETAIL)
    if edit.part not in caps.parts:
        return refuse("protected", f"this run edits only the {' and the '.join(caps.parts)}, not the {edit.part}")
    if edit.part == DESCRIPTION:
        return _apply_to_description(text, edit)
    if edit.op == "append":
        head = len(text.rstrip())
        start = head + 2 if head else 0
        new = _append(text, edit.text)
    else:
        quoted = _quote(edit.anchor)
        starts = _occurrences(text, edit.anchor)
        if not starts:
            return refuse("anchor_not_found", f"anchor {quoted} is not in the skill")
        if len(starts) > 1:
            return refuse("ambiguous_anchor", f"anchor {quoted} appears {len(starts)} times")
        start, end = starts[0], starts[0] + len(edit.anchor)
        point = end if edit.op == "insert_after" else None
        blocked = _blocked(text, start, end, point)
        if blocked:
            return refuse("protected", f"anchor {quoted} {blocked}")
        new = _splice(text, edit, start, end)
    if new == text:
        return refuse("no_op", "the edit leaves the skill unchanged")
    if _structure(new) != _structure(text):
        return refuse("protected", "the edit would change the front matter or a protected block")
    before, after = estimate_tokens(text), estimate_tokens(new)
    if after > caps.max_skill_tokens and after > before:
        return refuse("over_token_cap", f"the skill would be {after} tokens; the cap is {caps.max_skill_tokens}")
    line = new.count("\n", 0, start) + 1
    return new, EditOutcome(edit, "applied", f"{edit.op} at line {line}")


def _apply_to_description(text: str, edit: Edit) -> tuple[str, EditOutcome]:
    """One edit of the front matter's description (:mod:`~skillopt_ci.core.description`): the
    name, the other keys and the body are kept byte for byte."""
    current = description_of(text)
    if current is None:
        return text, EditOutcome(edit, "protected", "the skill has no description in its front matter to edit")
    new, why = edit_description(current, edit.op, edit.anchor, edit.text)
    if why:
        return text, EditOutcome(edit, "ambiguous_anchor" if "times" in why else "anchor_not_found", why)
    if new == current:
        return text, EditOutcome(edit, "no_op", "the edit leaves the description unchanged")
    problem = description_problem(new)
    if problem:
        return text, EditOutcome(edit, "too_long" if "limit" in problem else "invalid", problem)
    try:
        out = with_description(text, new)
    except InputError as exc:
        return text, EditOutcome(edit, "protected", exc.message)
    return out, EditOutcome(edit, "applied", f"{edit.op} in the description ({len(new)} characters)")


def _writes_marker(text: str) -> bool:
    return "skillopt:protected" in text or "<!--" in text


def _quote(text: str, limit: int = 60) -> str:
    short = text if len(text) <= limit else text[: limit - 1] + "\u2026"
    return json.dumps(short, ensure_ascii=False)


def _label(name: str) -> str:
    return f"protected block {json.dumps(name)}" if name else "an unnamed protected block"


def _occurrences(text: str, anchor: str) -> list[int]:
    """Start offsets of every occurrence of ``anchor``, overlapping ones included."""
    found: list[int] = []
    at = text.find(anchor)
    while at != -1:
        found.append(at)
        at = text.find(anchor, at + 1)
    return found


def _blocked(text: str, start: int, end: int, point: int | None) -> str:
    """Why the span ``[start, end)`` (or an insertion at ``point``) may not be edited, or ''."""
    front = FRONT_MATTER_RE.match(text)
    if front and start < front.end():
        return "overlaps the front matter, which step edits cannot change"
    for region in find_protected(text):
        if start < region.end and region.start < end:
            return f"overlaps {_label(region.name)}"
        if point is not None and region.start < point < region.end:
            return f"would insert inside {_label(region.name)}"
    return ""


def _structure(text: str) -> tuple[Any, ...] | None:
    """What step edits must preserve: the front matter and every protected block, verbatim."""
    try:
        regions = find_protected(text)
    except InputError:
        return None
    front = FRONT_MATTER_RE.match(text)
    blocks = tuple((r.name, text[r.start : r.end]) for r in regions)
    return (front.group(0) if front else None, text.startswith("---"), blocks)


def _append(text: str, addition: str) -> str:
    head = text.rstrip()
    return (head + "\n\n" if head else "") + addition.strip("\n") + "\n"


def _splice(text: str, edit: Edit, start: int, end: int) -> str:
    if edit.op == "insert_after":
        body = edit.text.strip("\n")
        if text[end - 1] == "\n":
            inserted = body + "\n"
        elif end == len(text) or text[end] == "\n":
            inserted = "\n" + body
        else:
            inserted = edit.text
        return text[:end] + inserted + text[end:]
    if edit.op == "replace" and edit.text:
        return text[:start] + edit.text + text[end:]
    return _delete(text, start, end)


def _delete(text: str, start: int, end: int) -> str:
    starts_line = start == 0 or text[start - 1] == "\n"
    ends_line = end == len(text) or text[end] == "\n" or text[end - 1] == "\n"
    if not (starts_line and ends_line):
        return text[:start] + text[end:]
    if text[end - 1] != "\n":
        if end < len(text):
            end += 1  # the line break that ended the deleted line
        elif start > 0:
            start -= 1  # last line without a break: take the one before it
    out = text[:start] + text[end:]
    before_blank = start == 0 or out[:start].endswith("\n\n") or out[:start] == "\n"
    after_blank = start == len(out) or out[start] == "\n"
    if out and before_blank and after_blank:
        cut = start if start < len(out) else start - 1
        out = out[:cut] + out[cut + 1 :]
    return out


def _named(text: str, name: str) -> list[ProtectedRegion]:
    return [r for r in find_protected(text) if r.name == name]


def _inner(text: str, region: ProtectedRegion) -> tuple[str, str, str]:
    """The start marker, raw content and end marker of ``region``."""
    markers = list(PROTECTED_RE.finditer(text, region.start, region.end))
    first, last = markers[0], markers[-1]
    return first.group(0), text[first.end() : last.start()], last.group(0)


def protected_block(text: str, name: str) -> str | None:
    """The content of the first protected block ``name``, stripped, without its markers; or None."""
    regions = _named(text, name)
    return _inner(text, regions[0])[1].strip() if regions else None


def ensure_protected_block(text: str, name: str) -> str:
    """``text`` with an empty protected block ``name`` appended (as ``append`` would) if absent."""
    if not _NAME_RE.fullmatch(name):
        raise ValueError(f"protected block name {name!r} must be letters, digits, '_', '.' or '-'")
    if _named(text, name):
        return text
    block = f"<!-- skillopt:protected:start {name} -->\n<!-- skillopt:protected:end {name} -->"
    return _append(text, block)


def rewrite_protected_block(
    text: str, name: str, content: str, caps: EditCaps = EditCaps()
) -> tuple[str, EditOutcome]:
    """Replace the content of protected block ``name`` (the slow update's durable guidance).

    ``content`` is stripped and placed on its own lines between the existing markers. The
    outcome's edit is a ``replace`` of the old content with ``content``, ``source="slow_update"``.
    ``max_edit_chars`` does not apply (a block is rewritten whole); the token cap does.
    Refused (text unchanged): content with a marker or ``<!--`` -> ``protected``; no such block ->
    ``anchor_not_found`` (see :func:`ensure_protected_block`); several -> ``ambiguous_anchor``.
    """
    regions = _named(text, name)
    old = _inner(text, regions[0])[1].strip() if len(regions) == 1 else ""
    edit = Edit(op="replace", anchor=old, text=content, source="slow_update", rationale="slow update")

    def outcome(status: str, detail: str, result: str = text) -> tuple[str, EditOutcome]:
        return result, EditOutcome(edit, status, detail)

    if _writes_marker(content):
        return outcome("protected", "content contains a protected marker or an HTML comment")
    if "\x00" in content:
        return outcome("invalid", "content contains a NUL character")
    if not regions:
        return outcome("anchor_not_found", f"there is no {_label(name)}")
    if len(regions) > 1:
        return outcome("ambiguous_anchor", f"there are {len(regions)} blocks named {json.dumps(name)}")
    region = regions[0]
    start_marker, _, end_marker = _inner(text, region)
    body = content.strip()
    block = start_marker + "\n" + (body + "\n" if body else "") + end_marker
    new = text[: region.start] + block + text[region.end :]
    if new == text:
        return outcome("no_op", f"{_label(name)} already has this content")
    before, after = estimate_tokens(text), estimate_tokens(new)
    if after > caps.max_skill_tokens and after > before:
        return outcome("over_token_cap", f"the skill would be {after} tokens; the cap is {caps.max_skill_tokens}")
    return outcome("applied", f"rewrote {_label(name)}", new)


def unified_diff(old: str, new: str, old_name: str = "current", new_name: str = "candidate") -> str:
    """A unified diff of two skill texts ('' when equal). A last line without a newline is marked
    ``\\ No newline at end of file`` as git does, so the output always ends with a newline."""
    if old == new:
        return ""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), old_name, new_name
    )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )
