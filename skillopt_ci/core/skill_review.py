"""The static review of a skill: what a reviewer looks for that no model is needed to see.

It runs on every pull request that touches a skill, forks included and with no model key, so it
reads the skill only as data (its text, its folder's file names, modes and first lines) and
never runs anything. Each finding names its file and line, so it can be an annotation there:

- ``front-matter``: the Agent Skills checks ``validate`` runs (a name that breaks the rule, a
  description over 1,024 characters, a name unlike its folder);
- ``missing-file``: a relative link or a backticked path in the body (``scripts/fix.py``,
  ``references/api.md``) to a file the skill folder does not have;
- ``script-not-executable`` / ``script-no-shebang``: a file under ``scripts/`` the agent would run;
- ``vague-description``: a description that says what the skill is but not when to use it (an
  agent picks skills by their description);
- ``duplicate-rule`` / ``near-duplicate-rule`` / ``contradiction``: the same rule twice (exactly,
  or nearly: most of its words), or "always X" next to "never X";
- ``size``: over the token limit every rollout pays for, or a body that grew or shrank sharply
  against the base;
- ``markdown``: a code fence never closed, a heading that skips a level, an empty heading.

Pure: :func:`review_skill` takes the texts and the folder's listing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from skillopt_ci.core.codec import Record
from skillopt_ci.core.description import description_of
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.skill import FRONT_MATTER_RE, estimate_tokens, parse_skill

ERROR, WARNING, NOTICE = "error", "warning", "notice"
NEAR = 0.8  # word overlap (Jaccard) from which two rules are the same rule reworded
MIN_RULE_WORDS = 5  # shorter lines are headings or fragments, not rules worth comparing
SHARP = 0.5  # a body that grew or shrank by half or more against the base
SHARP_TOKENS = 200  # ... and by at least this many tokens (a 10-line skill doubling is not news)
WHEN = re.compile(r"\b(use (it |this )?(when|for|whenever|if|to)|when(ever)?\b|if (the|a|you)|for requests?|"
                  r"not for|triggers? on|applies (to|when))", re.IGNORECASE)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_TICKED = re.compile(r"`((?:scripts|references|assets|templates|examples)/[^`\s]+)`")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^(#{1,6})(\s+|$)(.*)$")
_WORDS = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Finding(Record):
    """One thing a reviewer should look at: ``rule`` (see the module docstring), ``level``
    (error, warning or notice), the file and 1-based line (``None``: the file as a whole)."""

    rule: str
    level: str
    path: str
    line: int | None
    message: str


@dataclass(frozen=True)
class SkillReview:
    """One configured skill's findings; ``path`` is relative to the repository's top."""

    name: str
    path: str
    findings: tuple[Finding, ...]

    @property
    def errors(self) -> int:
        return sum(f.level == ERROR for f in self.findings)


@dataclass(frozen=True)
class FolderFile:
    """A file of the skill folder as the review sees it: executable or not, and its first line."""

    executable: bool = False
    first_line: str = ""


def review_skill(text: str, path: str, files: Mapping[str, FolderFile] | None, *, base_text: str | None = None,
                 token_limit: int = 5000) -> list[Finding]:
    """Every finding of the skill ``text`` (shown as ``path``; ``files``: the folder's other files
    by path relative to it, ``None`` for a lone file, which has no folder to check), in file and
    line order. ``base_text``: the skill before the change."""
    folder = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
    lines = text.splitlines()
    body_start = _body_start(text)
    found = _front_matter(text, path)
    if files is not None:
        found += _references(lines, body_start, path, folder, files)
        found += _scripts(files, folder)
    found += _description(text, lines, path)
    found += _duplicates(lines, body_start, path)
    found += _markdown(lines, body_start, path)
    found += _size(text, base_text, path, token_limit)
    return sorted(found, key=lambda f: (f.path != path, f.path, f.line or 0, f.rule))


def _body_start(text: str) -> int:
    """The index of the body's first line."""
    match = FRONT_MATTER_RE.match(text)
    return text[: match.end()].count("\n") if match else 0


def _front_matter(text: str, path: str) -> list[Finding]:
    try:
        skill = parse_skill(text, path=path)
    except InputError as exc:
        line = exc.where.rsplit(":", 1)[-1] if exc.where and ":" in exc.where else "1"
        return [Finding("front-matter", ERROR, path, int(line) if line.isdigit() else 1, exc.message)]
    return [Finding("front-matter", WARNING, path, 1, w) for w in skill.warnings]


def _references(lines: list[str], start: int, path: str, folder: str, files: Mapping[str, FolderFile]) -> list[Finding]:
    found, fenced = [], False
    for number, line in enumerate(lines[start:], start + 1):
        if _FENCE.match(line):
            fenced = not fenced
        if fenced:
            continue
        for target in [m.group(1) for m in _LINK.finditer(line)] + [m.group(1) for m in _TICKED.finditer(line)]:
            rel = target.split("#", 1)[0].removeprefix("./")
            if not rel or re.match(r"^[a-z][a-z0-9+.-]*:", rel, re.I) or rel.startswith(("/", "../")):
                continue  # a URL, an anchor, or outside the folder: not the skill's own file
            if rel not in files and not any(f.startswith(rel.rstrip("/") + "/") for f in files):
                found.append(Finding("missing-file", ERROR, path, number,
                                     f"the body refers to {rel!r}, which is not in the skill folder {folder or './'}"))
    return found


def _scripts(files: Mapping[str, FolderFile], folder: str) -> list[Finding]:
    found = []
    for rel, info in sorted(files.items()):
        if not rel.startswith("scripts/") or rel.endswith((".md", ".txt", ".json")):
            continue
        if not info.executable:
            found.append(Finding("script-not-executable", WARNING, folder + rel, 1,
                                 "a script the agent may run is not executable (git update-index --chmod=+x)"))
        if not info.first_line.startswith("#!"):
            found.append(Finding("script-no-shebang", WARNING, folder + rel, 1,
                                 "a script without a shebang line (#!/usr/bin/env python3, #!/bin/sh …): run "
                                 "directly, which interpreter runs it is up to the shell"))
    return found


def _description(text: str, lines: list[str], path: str) -> list[Finding]:
    description = description_of(text)
    if description is None or WHEN.search(description):
        return []
    line = next((i for i, x in enumerate(lines, 1) if x.startswith("description:")), 1)
    return [Finding("vague-description", WARNING, path, line,
                    "the description says what the skill is, not when to use it: agents pick a skill by its "
                    "description alone (add a sentence such as 'Use when …')")]


def _rules(lines: list[str], start: int) -> list[tuple[int, str, frozenset[str]]]:
    """(line number, the rule folded, its words) for every rule-like line outside code fences."""
    rules, fenced = [], False
    for number, line in enumerate(lines[start:], start + 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        stripped = re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", line).strip()
        words = _WORDS.findall(stripped.lower())
        if fenced or stripped.startswith("#") or len(words) < MIN_RULE_WORDS:
            continue
        rules.append((number, " ".join(words), frozenset(words)))
    return rules


def _duplicates(lines: list[str], start: int, path: str) -> list[Finding]:
    found: list[Finding] = []
    rules = _rules(lines, start)
    for i, (number, folded, words) in enumerate(rules):
        for first, earlier, earlier_words in rules[:i]:
            if earlier == folded:
                found.append(Finding("duplicate-rule", WARNING, path, number, f"the same rule as line {first}"))
                break
            if _opposed(earlier, folded):
                found.append(Finding("contradiction", WARNING, path, number,
                                     f"contradicts line {first}: one says always, the other never"))
                break
            if len(words & earlier_words) / len(words | earlier_words) >= NEAR:
                found.append(Finding("near-duplicate-rule", NOTICE, path, number,
                                     f"nearly the same rule as line {first} (most of its words): merge them"))
                break
    return found


def _opposed(a: str, b: str) -> bool:
    """"always X" against "never X" (or "do X" against "do not X"), the rest word for word."""
    def split(rule: str) -> tuple[str, str]:
        m = re.match(r"^(.*?)\b(always|never|do not|don t|must not|must)\b (.*)$", rule)
        return (m.group(2), f"{m.group(1)}|{m.group(3)}") if m else ("", rule)
    (sa, ra), (sb, rb) = split(a), split(b)
    opposite = {("always", "never"), ("never", "always"), ("must", "must not"), ("must not", "must"),
                ("do not", ""), ("don t", "")}
    return ra == rb and bool(sa or sb) and ((sa, sb) in opposite or (sb, sa) in opposite)


def _markdown(lines: list[str], start: int, path: str) -> list[Finding]:
    found, opened, level = [], None, 0
    for number, line in enumerate(lines[start:], start + 1):
        fence = _FENCE.match(line)
        if fence:
            opened = None if opened else (number, fence.group(1)[0])
            continue
        heading = _HEADING.match(line) if opened is None else None
        if heading is None:
            continue
        depth = len(heading.group(1))
        if not heading.group(3).strip():
            found.append(Finding("markdown", WARNING, path, number, "an empty heading"))
        elif level and depth > level + 1:
            found.append(Finding("markdown", NOTICE, path, number,
                                 f"a level-{depth} heading under a level-{level} one (a level is skipped)"))
        level = depth
    if opened:
        found.append(Finding("markdown", ERROR, path, opened[0],
                             "a code fence opened here is never closed: everything after it reads as code"))
    return found


def _size(text: str, base_text: str | None, path: str, limit: int) -> list[Finding]:
    found = []
    tokens = estimate_tokens(text)
    if tokens > limit:
        found.append(Finding("size", WARNING, path, None, f"about {tokens:,} tokens, over the limit of {limit:,}: "
                                                           "every rollout that reads the skill pays for all of it"))
    if base_text is not None:
        before = estimate_tokens(base_text)
        change = tokens - before
        if before and abs(change) >= SHARP_TOKENS and abs(change) / before >= SHARP:
            how = "grew" if change > 0 else "shrank"
            found.append(Finding("size", NOTICE, path, None, f"the skill {how} from about {before:,} to {tokens:,} "
                                                              f"tokens ({change / before:+.0%}) against the base"))
    return found
