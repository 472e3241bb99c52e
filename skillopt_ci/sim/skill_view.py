"""The skill as the simulated optimizer reads and edits it: each line classified with the
simulated target's grammar (:class:`Rule`, :func:`classify`), and :class:`SkillView`, the rule
lines outside protected regions with the edits the simulation may propose against them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.skill import find_protected
from skillopt_ci.sim import analyst
from skillopt_ci.sim.triage import REFERENCE_SKILL, parse_rules

REFERENCE_RULES = tuple(line for line in REFERENCE_SKILL.splitlines() if line.strip())
SECTIONS = {"category": "category", "otherwise": "category", "priority": "priority",
             "default_priority": "priority", "category_priority": "priority", "enterprise": "priority",
             "format": "format", **{kind: "data" for kind in (*analyst.TRAPS, "rounding")}}
BULLET = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+")


@dataclass(frozen=True)
class Rule:
    """A line of a skill read with the simulated target's grammar."""

    line: str
    kind: str
    value: str = ""
    terms: tuple[str, ...] = ()

    @property
    def section(self) -> str:
        return SECTIONS[self.kind]

    def same_slot(self, other: Rule) -> bool:
        """Two rules that decide the same thing (so one should replace the other)."""
        if self.kind != other.kind:
            return False
        if self.kind in ("category", "priority"):
            return self.value == other.value and bool(set(self.terms) & set(other.terms))
        if self.kind == "category_priority":
            return self.value.split(":")[0] == other.value.split(":")[0]
        return True

    def matches(self, ticket: str) -> bool:
        text = ticket.lower()
        return any(t in text for t in self.terms)


def classify(line: str) -> Rule | None:
    r = parse_rules(line)
    if r.category_terms:
        return Rule(line, "category", r.category_terms[0][1], r.category_terms[0][0])
    if r.priority_terms:
        return Rule(line, "priority", r.priority_terms[0][1], r.priority_terms[0][0])
    if r.default_category:
        return Rule(line, "otherwise", r.default_category)
    if r.default_priority:
        return Rule(line, "default_priority", r.default_priority)
    if r.category_priority:
        (category, priority), = r.category_priority.items()
        return Rule(line, "category_priority", f"{category}:{priority}")
    if r.enterprise_raise:
        return Rule(line, "enterprise")
    if r.answer_format:
        return Rule(line, "format")
    if (trap := analyst.rule_of(line)) is not None:
        return Rule(line, trap)
    return None


REFERENCE = tuple(rule for rule in map(classify, REFERENCE_RULES) if rule is not None)


def norm(line: str) -> str:
    return " ".join(BULLET.sub("", line).split()).lower().rstrip(".")


class SkillView:
    """The skill as the simulation edits it: rule lines outside protected regions."""

    def __init__(self, text: str):
        self.text = text
        outside = text
        try:
            for region in reversed(find_protected(text)):
                outside = outside[: region.start] + outside[region.end :]
        except InputError:
            pass
        self.lines = [line for line in outside.splitlines() if line.strip()]
        self.rules = [rule for rule in map(classify, self.lines) if rule is not None]
        self.normalized = {norm(line) for line in text.splitlines() if line.strip()}  # protected too
        self.bulleted = any(BULLET.match(line) for line in self.lines)
        self.domain = "sales" if "sales.csv" in text.lower() else "triage"

    def last_bullet_under(self, word: str) -> str | None:
        """The last unique bullet line of the first section whose heading contains ``word``."""
        found, inside = None, False
        for line in self.lines:
            if line.lstrip().startswith("#"):
                if inside:
                    break
                inside = word in line.lower()
            elif inside and BULLET.match(line) and self.unique(line):
                found = line
        return found

    def has(self, line: str) -> bool:
        return norm(line) in self.normalized

    def unique(self, line: str) -> bool:
        return self.text.count(line) == 1

    def styled(self, rule_text: str, like: str | None = None) -> str:
        if like is not None:
            m = BULLET.match(like)
            return (m.group(0) if m else "") + rule_text
        return ("- " if self.bulleted else "") + rule_text

    def edit_to_add(self, ref: Rule, seen: str) -> dict[str, str] | None:
        """``replace`` a rule of the same slot, else ``insert_after`` the last rule of the
        section, else ``append``; ``None`` when the skill already has the rule. ``seen`` is the
        evidence quoted in the rationale."""
        if self.has(ref.line):
            return None
        why = f"No rule covers this ({seen})."
        for rule in self.rules:
            if rule.same_slot(ref) and self.unique(rule.line):
                return {"op": "replace", "anchor": rule.line, "text": self.styled(ref.line, rule.line),
                        "rationale": f"The existing rule misses this case ({seen})."}
        same = [r for r in self.rules if r.section == ref.section and self.unique(r.line)]
        if ref.kind == "category":
            same = [r for r in same if r.kind == "category"] or same
        # Prefer a complete rule as the anchor: an incomplete one may be replaced in the same
        # step, and an insertion after a replaced line would be a conflict.
        same = [r for r in same if is_reference(r.line)] or same
        anchor = same[-1].line if same else self.last_bullet_under("data") if ref.section == "data" else None
        if anchor is not None:
            return {"op": "insert_after", "anchor": anchor, "text": self.styled(ref.line, anchor), "rationale": why}
        return {"op": "append", "text": self.styled(ref.line), "rationale": why}


def is_reference(line: str) -> bool:
    return any(norm(line) == norm(ref) for ref in (*REFERENCE_RULES, *analyst.REFERENCE_RULES.values()))
