"""A simulated target model for the bundled ticket-triage example.

It is honest about being a simulation: it does not understand language, it follows the rules the
skill states, in a small fixed grammar, and nothing else. So the score of a skill on the example
suite is decided by which rules the skill contains — exactly the property a skill optimizer needs
to be demonstrated and tested offline.

Rules it understands (case-insensitive, one per line, anywhere in the system prompt):

- ``If the ticket mentions "a", "b" or "c", the category is X.``
- ``If the ticket mentions "a", "b" or "c", the priority is P1.``
- ``Otherwise the category is X.`` / ``The default priority is P3.``
- ``X tickets have priority P2.``
- ``If the customer is on the Enterprise plan, raise the priority by one level.``
- a line containing ``category/priority`` (the output format: answer ``category/priority`` only)

Keyword rules are tried in the order written; the first that matches decides. Without the
format rule it answers in a chatty sentence, as an untrained model would.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from skillopt_ci.sim.protocols import ScriptedRequest

_MENTIONS_RE = re.compile(r"if the ticket mentions (?P<terms>.+?),\s*the (?P<what>category|priority) is (?P<value>[\w-]+)", re.I)
_OTHERWISE_RE = re.compile(r"otherwise,? the category is ([\w-]+)", re.I)
_DEFAULT_PRIORITY_RE = re.compile(r"default priority is (P[1-4])", re.I)
_CATEGORY_PRIORITY_RE = re.compile(r"([\w-]+) tickets have priority (P[1-4])", re.I)
_ENTERPRISE_RE = re.compile(r"enterprise plan, raise the priority by one level", re.I)
_QUOTED_RE = re.compile(r'"([^"]+)"')


@dataclass(frozen=True)
class TriageRules:
    """What a skill tells the simulated model, parsed from its text."""

    category_terms: tuple[tuple[tuple[str, ...], str], ...] = ()
    priority_terms: tuple[tuple[tuple[str, ...], str], ...] = ()
    default_category: str | None = None
    default_priority: str | None = None
    category_priority: dict[str, str] = field(default_factory=dict)
    enterprise_raise: bool = False
    answer_format: bool = False


def parse_rules(skill_text: str) -> TriageRules:
    cats: list[tuple[tuple[str, ...], str]] = []
    pris: list[tuple[tuple[str, ...], str]] = []
    default_cat = default_pri = None
    by_cat: dict[str, str] = {}
    enterprise = fmt = False
    for line in skill_text.splitlines():
        if m := _MENTIONS_RE.search(line):
            terms = tuple(t.lower() for t in _QUOTED_RE.findall(m.group("terms")))
            target = cats if m.group("what").lower() == "category" else pris
            target.append((terms, m.group("value").lower() if target is cats else m.group("value").upper()))
        elif m := _OTHERWISE_RE.search(line):
            default_cat = m.group(1).lower()
        if m := _DEFAULT_PRIORITY_RE.search(line):
            default_pri = m.group(1).upper()
        if m := _CATEGORY_PRIORITY_RE.search(line):
            by_cat[m.group(1).lower()] = m.group(2).upper()
        enterprise = enterprise or bool(_ENTERPRISE_RE.search(line))
        fmt = fmt or "category/priority" in line.lower()
    return TriageRules(tuple(cats), tuple(pris), default_cat, default_pri, by_cat, enterprise, fmt)


def triage(rules: TriageRules, ticket: str, plan: str) -> tuple[str, str]:
    """Apply ``rules`` to a ticket: (category, priority). Unknowns fall back to a guess an
    untrained model might make ("question", "P3")."""
    text = ticket.lower()
    category = next((c for terms, c in rules.category_terms if any(t in text for t in terms)), None)
    category = category or rules.default_category or "question"
    priority = next((p for terms, p in rules.priority_terms if any(t in text for t in terms)), None)
    priority = priority or rules.category_priority.get(category) or rules.default_priority or "P3"
    if rules.enterprise_raise and plan.lower() == "enterprise" and priority != "P1":
        priority = f"P{int(priority[1]) - 1}"
    return category, priority


# The rules the example suite's expected answers follow: what a perfect skill would say.
REFERENCE_SKILL = """\
If the ticket mentions "breach", "hacked", "leaked" or "phishing", the category is security.
If the ticket mentions "invoice", "refund", "charged" or "receipt", the category is billing.
If the ticket mentions "password", "log in", "2fa" or "locked out", the category is account.
If the ticket mentions "crash", "error", "broken" or "freezes", the category is bug.
Otherwise the category is question.
If the ticket mentions "breach", "hacked", "leaked" or "phishing", the priority is P1.
If the ticket mentions "outage", "down for everyone" or "all users", the priority is P1.
Bug tickets have priority P2.
The default priority is P3.
If the customer is on the Enterprise plan, raise the priority by one level.
Answer with only category/priority.
"""

_PLAN_RE = re.compile(r"^Plan:\s*(\S+)", re.M)
_TICKET_RE = re.compile(r"^Ticket:\s*\n(.*)", re.S | re.M)


class TriagePolicy:
    """A scripted-server policy: reads the skill (system) and the ticket (user), answers.

    ``flip`` is the probability that an answer is replaced by a wrong one (a noisy model, for
    statistics tests); ``seed`` makes that noise reproducible.
    """

    def __init__(self, flip: float = 0.0, seed: int = 0):
        self.flip = flip
        self._rng = random.Random(seed)
        self._parsed: dict[str, TriageRules] = {}

    def __call__(self, request: ScriptedRequest) -> str:
        rules = self._parsed.get(request.system)
        if rules is None:
            rules = self._parsed[request.system] = parse_rules(request.system)
        user = request.last_user
        plan = (m.group(1) if (m := _PLAN_RE.search(user)) else "")
        ticket = m.group(1) if (m := _TICKET_RE.search(user)) else user
        category, priority = triage(rules, ticket, plan)
        if self.flip and self._rng.random() < self.flip:
            category = "question" if category != "question" else "bug"
        if rules.answer_format:
            return f"{category}/{priority}"
        return f"Thanks for the ticket! I would file this under {category} with priority {priority}."
