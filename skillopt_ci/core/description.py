"""The front-matter ``description``: what an agent reads to decide whether to use a skill.

Codex and Claude Code list each installed skill by name and description; the body enters the
context only when the agent decides to open it. So the description is trained apart from the
body (``train --target description``): edits of ``part: description`` change this one value and
nothing else — the name, the other keys and the body stay byte for byte.

:func:`edit_description` applies one edit to the description string (anchors are exact
substrings of it, as in the body); :func:`with_description` writes a description back into the
skill's front matter by replacing only the ``description:`` entry. Pure functions.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.skill import FRONT_MATTER_RE

LIMIT = 1024  # the Agent Skills specification's maximum description length, in characters
_KEY = re.compile(r"^description[ \t]*:", re.MULTILINE)


def description_of(text: str) -> str | None:
    """The skill's description, or ``None`` when it has no front matter or no string description."""
    front = _front(text)
    value = front.get("description") if front is not None else None
    return value if isinstance(value, str) else None


def with_description(text: str, description: str) -> str:
    """``text`` with its front matter's ``description`` set to ``description`` (a single line),
    every other byte kept. Raises :class:`InputError` when the skill has no front matter, or when
    its ``description`` entry is written in a form that cannot be replaced alone."""
    match = FRONT_MATTER_RE.match(text)
    front = _front(text)
    if match is None or front is None:
        raise InputError("the skill has no front matter to hold a description",
                         hint="start SKILL.md with '---', a name: and a description: line, and '---'")
    entry = yaml.safe_dump({"description": description}, allow_unicode=True, width=1 << 30, sort_keys=False)
    inner_start, inner_end = match.span(1)
    span = _entry_span(text, inner_start, inner_end)
    if span is None:  # no description yet: the new entry goes right after the name, or first
        name = re.search(r"^name[ \t]*:.*(\n|\Z)", text[inner_start:inner_end], re.MULTILINE)
        at = inner_start + (name.end() if name and name.group(1) else 0)
        out = text[:at] + entry + text[at:]
    else:
        out = text[:span[0]] + entry + text[span[1]:]
    if _front(out) != {**front, "description": description}:
        raise InputError("the front matter's description entry cannot be rewritten on its own",
                         hint="write the description as one 'description: ...' line of the front matter")
    return out


def edit_description(description: str, op: str, anchor: str, text: str) -> tuple[str, str]:
    """The description after one edit, whitespace folded to single spaces (a listing shows one
    line), and ``""`` when it applied, else ``(description, why)``. ``append`` adds a sentence at
    the end; ``insert_after``, ``replace`` and ``delete`` need an anchor found exactly once."""
    if op == "append":
        new = f"{description.rstrip()} {text.strip()}"
    else:
        count = description.count(anchor)
        if count != 1:
            quoted = anchor if len(anchor) <= 60 else anchor[:59] + "\u2026"
            return description, (f"anchor {quoted!r} is not in the description" if count == 0
                                 else f"anchor {quoted!r} appears {count} times in the description")
        at = description.index(anchor)
        end = at + len(anchor)
        if op == "insert_after":
            new = f"{description[:end]} {text.strip()} {description[end:]}"
        elif op == "replace":
            new = description[:at] + text + description[end:]
        else:
            new = description[:at] + " " + description[end:]
    return " ".join(new.split()), ""


def description_problem(description: str) -> str:
    """Why ``description`` cannot be a skill's description (or ``""``): empty, over the Agent
    Skills limit, or holding angle brackets (agent tools reject tags in a description)."""
    if not description.strip():
        return "the description would be empty"
    if len(description) > LIMIT:
        return f"the description would be {len(description)} characters; the Agent Skills limit is {LIMIT:,}"
    if "<" in description or ">" in description:
        return "the description would contain '<' or '>', which agent tools reject"
    return ""


def _front(text: str) -> dict[str, Any] | None:
    match = FRONT_MATTER_RE.match(text)
    if match is None:
        return None
    try:
        loaded = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return None
    return loaded if isinstance(loaded, dict) else ({} if loaded is None else None)


def _entry_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The ``description:`` entry inside the front matter ``text[start:end]``: its key line and
    every indented (or blank) line after it, up to its last non-blank line and its line break."""
    key = _KEY.search(text, start, end)
    if key is None:
        return None
    stop = key.start()
    last = text.find("\n", stop, end)
    last = end if last < 0 else last + 1
    at = last
    while at < end:
        line_end = text.find("\n", at, end)
        line_end = end if line_end < 0 else line_end + 1
        line = text[at:line_end]
        if line.strip() and not line[0].isspace():
            break
        if line.strip():
            last = line_end
        at = line_end
    return stop, last
