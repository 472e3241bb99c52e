"""A simulated optimizer model for the bundled ticket-triage example.

Like :mod:`skillopt_ci.sim.triage` (the simulated target), it is honest about being a
simulation: it does not reason, it pattern-matches. It recognises which of our prompt templates
it was sent by their first line, reads the current skill and the scorer feedback of the
trajectories (``category should be security, not question``, ``priority should be P1, not P3``,
``answer must be exactly "category/priority"``), and answers in the JSON format of the template:

* **failure reflection** — for each failed trajectory, the rules of
  :data:`~skillopt_ci.sim.triage.REFERENCE_SKILL` that decide its correct answer (found from
  the ticket text, the plan and the expected answer), minus those the skill already has. A rule
  the skill states partially (same category, other words; another default priority) is
  *replaced*; a missing one is inserted after the last rule line of its section (category,
  priority, answer format) or appended. A non-reference rule that caused the wrong answer is
  *deleted*. Needs shared by more trajectories come first; at most L edits.
  **One group in** ``bad_every`` **(3 by default)** — decided by a hash of the prompt, so
  deterministic — also gets a *harmful* edit (a catch-all keyword rule, a wrong default
  priority, or the deletion of a correct rule; see :data:`HARMFUL_RULES`), replacing the last
  good edit when L is full. The validation gate is what keeps those out; a harmful edit already
  listed as rejected in the prompt's buffer is not proposed again (good ones are, as long as
  failures call for them).
* **trigger reflection** — description edits from the missed and false triggers shown
  (:func:`skillopt_ci.sim.trigger_sim.reflect_triggers`).
* **success reflection** — no edits, or (one prompt in three) a harmless consolidating line that
  the simulated target ignores.
* **slow update** — a few general lines of durable guidance the target ignores.
* **meta skill** — two or three lines summarising which kinds of edits were accepted (edits
  dropped unmeasured teach nothing and are not counted).

The sales-analysis example (a ``tools`` suite, target :mod:`skillopt_ci.sim.analyst`) goes
through the same steps: its scorer's feedback names the trap a failed answer fell into
(``refunded orders were counted``), which becomes an edit adding that trap's rule of
:data:`analyst.REFERENCE_RULES` after the last bullet of the skill's "Data" section; its harmful
edit rounds every amount to whole dollars or deletes a needed data rule. A skill that mentions
``sales.csv`` is a sales skill (its consolidating and durable lines are about data, not tickets).

Anything it cannot parse gets a valid JSON answer with no edits. ``OptimizerSim(malformed=True)``
answers prose instead of JSON, for failure-mode tests. The policy is a pure function of the
request (thread-safe). Serve it with ``python -m skillopt_ci.sim.server --policy
skillopt_ci.sim.optimizer_sim:policy``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from skillopt_ci.sim import analyst
from skillopt_ci.sim.reflection_prompt import (
    Trajectory,
    between,
    count_items,
    digest,
    fenced_after,
    find_prompt,
    max_edits,
    parse_trajectories,
)
from skillopt_ci.sim.skill_view import (
    BULLET,
    REFERENCE,
    REFERENCE_RULES,
    SkillView,
    classify,
    is_reference,
)
from skillopt_ci.sim.trigger_sim import reflect_triggers

FORMAT_RULE = next(line for line in REFERENCE_RULES if "category/priority" in line)
HARMFUL_RULES = (
    'If the ticket mentions "error", the category is billing.',
    'If the ticket mentions "page" or "email", the priority is P1.',
    "The default priority is P2.",
)
CONSOLIDATION = "Apply the rules above in the order they are written; the first rule that matches decides."
PROSE = (
    "Looking at these tickets, I think the skill should say more about security problems and "
    "about outages. I would add a rule for breaches and make outages urgent."
)
SALES_CONSOLIDATION = "Before submitting, check that the number answers the question asked: revenue, a count or an average."
class OptimizerSim:
    """A scripted-server policy ``(request) -> str`` playing the optimizer model."""

    def __init__(self, *, malformed: bool = False, bad_every: int = 3):
        self.malformed = malformed
        self.bad_every = bad_every

    def __call__(self, request: Any) -> str:
        prompt, kind = find_prompt(request)
        if self.malformed:
            return PROSE
        try:
            answer = {"failure": self.reflect_failures, "success": self.reflect_successes,
                      "trigger": lambda p: reflect_triggers(p, self.bad_every),
                      "slow_update": self.slow_update, "meta": self.meta}[kind](prompt)
        except Exception as exc:  # a simulation that cannot read its prompt still answers validly
            answer = _empty(kind, f"could not read the prompt ({type(exc).__name__})")
        return "```json\n" + json.dumps(answer, indent=2, ensure_ascii=False) + "\n```"

    # ---- reflections -------------------------------------------------------------------------

    def reflect_failures(self, prompt: str) -> dict[str, Any]:
        text, trajectories = fenced_after(prompt, "## Current skill"), parse_trajectories(prompt)
        if text is None or not trajectories:
            return _empty("failure", "could not find the skill or the trajectories in the prompt")
        skill = SkillView(text)
        limit = max_edits(prompt)
        needs: Counter[tuple[str, str]] = Counter()
        evidence: dict[tuple[str, str], str] = {}
        for t in trajectories:
            for action, line, piece in needs_of(t, skill):
                evidence.setdefault((action, line), f"{t.task_id or 'a task'}: {piece}")
                needs[(action, line)] += 1
        edits = []
        for (action, line), count in sorted(needs.items(), key=lambda kv: -kv[1]):  # stable: first seen on ties
            seen = f"{count} failed trajector{'y' if count == 1 else 'ies'}, e.g. {evidence[(action, line)]}"
            if action == "delete":
                edits.append({"op": "delete", "anchor": line, "rationale": f"This rule gives wrong answers ({seen})."})
            elif (rule := classify(line)) and (edit := skill.edit_to_add(rule, seen)):
                edits.append(edit)
        edits = edits[:limit]
        if self.bad_every and digest(prompt) % self.bad_every == 0 and limit > 0:
            memory = between(prompt, "## Memory of this epoch", "## What has helped before")
            bad = harmful_edit(skill, digest(prompt) // self.bad_every, avoid=memory)
            if bad is not None:
                edits = [*edits[: limit - 1], bad]
        analysis = (f"{_count(len(trajectories), 'failed trajectory', 'failed trajectories')}; "
                    f"{len(needs)} distinct fixes needed, {len(edits)} proposed.")
        return {"analysis": analysis, "edits": edits}

    def reflect_successes(self, prompt: str) -> dict[str, Any]:
        text, trajectories = fenced_after(prompt, "## Current skill"), parse_trajectories(prompt)
        if text is None or not trajectories:
            return _empty("success", "could not find the skill or the trajectories in the prompt")
        skill = SkillView(text)
        used = [r.line for r in skill.rules if any(r.kind == "format" or r.matches(t.ticket) for t in trajectories)]
        shown = "; ".join(BULLET.sub("", line) for line in used) or "the defaults"
        analysis = (f"{_count(len(trajectories), 'successful trajectory', 'successful trajectories')} "
                    f"rely on these rules, which must be kept: {shown}")
        edits = []
        line = SALES_CONSOLIDATION if skill.domain == "sales" else CONSOLIDATION
        if digest(prompt) % 3 == 1 and not skill.has(line) and max_edits(prompt) > 0:
            edits.append({"op": "append", "text": skill.styled(line),
                          "rationale": "The successful tasks all followed the first matching rule; say so."})
        return {"analysis": analysis, "edits": edits}

    # ---- epoch boundary ----------------------------------------------------------------------

    def slow_update(self, prompt: str) -> dict[str, Any]:
        counts = {name: count_items(prompt, heading) for name, heading in (
            ("improved", "Improved"), ("regressed", "Regressed"), ("still_failing", "Still failing"))}
        current = fenced_after(prompt, "## The block ") or ""
        lines = [line.strip() for line in current.splitlines() if line.strip()]
        wanted = _durable_guidance("sales" if "sales.csv" in prompt.lower() else "triage", counts)
        block = list(dict.fromkeys(lines + [f"- {w}" for w in wanted]))[:8]
        analysis = (f"{counts['improved']} tasks improved, {counts['regressed']} regressed, "
                    f"{counts['still_failing']} still fail.")
        return {"analysis": analysis, "block": "\n".join(block)}

    def meta(self, prompt: str) -> dict[str, Any]:
        log = fenced_after(prompt, "Each line says whether") or ""
        entries = re.findall(r"^- (accepted|rejected|measured and lost): (\w+)", log, re.M)
        accepted = Counter(op for verdict, op in entries if verdict == "accepted")
        rejected = Counter(op for verdict, op in entries if verdict != "accepted")  # dropped unmeasured: no lesson
        adds = ("append", "insert", "replace")
        lines = [f"Adding or completing a rule backed by several failures was accepted "
                 f"{sum(accepted[o] for o in adds)} times and rejected {sum(rejected[o] for o in adds)} times."]
        if rejected["delete"] or accepted["delete"]:
            lines.append(f"Deleting a rule was accepted {accepted['delete']} times and rejected {rejected['delete']} times; "
                         "delete only rules that failures show are wrong.")
        if rejected:
            lines.append("Rules keyed on common words were rejected: prefer specific words.")
        return {"meta_skill": "\n".join(lines)}


def needs_of(t: Trajectory, skill: SkillView) -> list[tuple[str, str, str]]:
    """What one failed trajectory needs, each once: ``("add", reference line, evidence)`` or
    ``("delete", skill line, evidence)``; the evidence is the feedback that calls for it."""
    out: list[tuple[str, str, str]] = []
    feedback = t.feedback
    out += [("add", analyst.REFERENCE_RULES[trap], phrase) for trap, phrase in analyst.FEEDBACK.items() if phrase in feedback]
    if m := re.search(r'answer must be exactly "category/priority"', feedback):
        out.append(("add", FORMAT_RULE, m.group(0)))
    expected_category = t.expected.split("/")[0].strip().lower() if "/" in t.expected else ""
    if m := re.search(r"category should be ([\w-]+), not ([\w-]+)", feedback):
        want, got = m.group(1).lower(), m.group(2).lower()
        expected_category = want
        out += [("delete", r.line, m.group(0)) for r in skill.rules
                if r.kind == "category" and r.value == got and r.matches(t.ticket) and not is_reference(r.line)]
        ref = next((r for r in REFERENCE if r.kind == "category" and r.matches(t.ticket)), None)
        if ref is not None and ref.value == want:
            out.append(("add", ref.line, m.group(0)))
        elif ref is None and want == "question":
            out.append(("add", next(r.line for r in REFERENCE if r.kind == "otherwise"), m.group(0)))
    if m := re.search(r"priority should be (P[1-4]), not (P[1-4])", feedback):
        got = m.group(2)
        out += [("delete", r.line, m.group(0)) for r in skill.rules
                if r.kind == "priority" and r.value == got and r.matches(t.ticket) and not is_reference(r.line)]
        out += [("add", line, m.group(0)) for line in _priority_derivation(t, expected_category)]
    unique: dict[tuple[str, str], str] = {}
    for action, line, piece in out:
        unique.setdefault((action, line), piece)
    return [(action, line, piece) for (action, line), piece in unique.items()]


def _priority_derivation(t: Trajectory, category: str) -> list[str]:
    """The reference rules that decide the priority of ``t``'s ticket."""
    keyword = next((r for r in REFERENCE if r.kind == "priority" and r.matches(t.ticket)), None)
    by_category = next((r for r in REFERENCE if r.kind == "category_priority" and r.value.startswith(f"{category}:")), None)
    default = next(r for r in REFERENCE if r.kind == "default_priority")
    lines = [(keyword or by_category or default).line]
    if t.plan.lower() == "enterprise":
        lines.append(next(r.line for r in REFERENCE if r.kind == "enterprise"))
    return lines


def harmful_edit(skill: SkillView, pick: int, avoid: str = "") -> dict[str, str] | None:
    """One of the harmful edits that applies to this skill, chosen by ``pick``; those quoted in
    ``avoid`` (the buffer of rejected edits) are not proposed again."""
    if skill.domain == "sales":
        return _pick(_sales_harmful_edits(skill), pick, avoid)
    options: list[dict[str, str]] = []
    categories = [r for r in skill.rules if r.kind == "category" and skill.unique(r.line)]
    priorities = [r for r in skill.rules if r.section == "priority" and skill.unique(r.line)]
    defaults = [r for r in priorities if r.kind == "default_priority" and r.value != "P2"]
    if categories and not skill.has(HARMFUL_RULES[0]):
        anchor = categories[0].line
        options.append({"op": "insert_after", "anchor": anchor, "text": skill.styled(HARMFUL_RULES[0], anchor),
                        "rationale": "Several failed tickets mention an error while paying; errors are billing problems."})
    if not skill.has(HARMFUL_RULES[1]):
        edit = {"op": "append", "text": skill.styled(HARMFUL_RULES[1]),
                "rationale": "Tickets about pages or emails affect many users and are urgent."}
        if priorities:
            edit = {"op": "insert_after", "anchor": priorities[-1].line,
                    "text": skill.styled(HARMFUL_RULES[1], priorities[-1].line), "rationale": edit["rationale"]}
        options.append(edit)
    if defaults:
        options.append({"op": "replace", "anchor": defaults[0].line, "text": skill.styled(HARMFUL_RULES[2], defaults[0].line),
                        "rationale": "Most tickets deserve a faster answer than P3."})
    if categories:
        options.append({"op": "delete", "anchor": categories[0].line,
                        "rationale": "This rule is redundant: the model recognises these tickets without it."})
    return _pick(options, pick, avoid)


def _pick(options: list[dict[str, str]], pick: int, avoid: str) -> dict[str, str] | None:
    options = [o for o in options if not _quoted_in(avoid, o)]
    return options[pick % len(options)] if options else None


def _sales_harmful_edits(skill: SkillView) -> list[dict[str, str]]:
    """Rounding every amount (answers drift by cents), or deleting a data rule that is needed."""
    options: list[dict[str, str]] = []
    rules = [r for r in skill.rules if r.kind in analyst.TRAPS and skill.unique(r.line)]
    if not skill.has(analyst.HARMFUL_RULE):
        why = "Several answers were off by cents; whole-dollar amounts avoid that noise."
        anchor = rules[-1].line if rules else skill.last_bullet_under("data")
        options.append({"op": "insert_after", "anchor": anchor, "text": skill.styled(analyst.HARMFUL_RULE, anchor),
                        "rationale": why} if anchor else {"op": "append", "text": skill.styled(analyst.HARMFUL_RULE),
                                                          "rationale": why})
    if rules:
        options.append({"op": "delete", "anchor": rules[0].line,
                        "rationale": "This rule is redundant: the data in the failures did not need it."})
    return options


def _durable_guidance(domain: str, counts: dict[str, int]) -> list[str]:
    """The lines a slow update writes (the simulated targets ignore them)."""
    if domain == "sales":
        wanted = ["Look at the header and a few rows of every file before computing anything."]
        if counts["improved"]:
            wanted.append("Keep the data-cleaning rules that fixed answers; apply them before aggregating.")
        if counts["regressed"]:
            wanted.append("Do not transform amounts beyond what the data calls for.")
        if counts["still_failing"]:
            wanted.append("When an answer is off by a factor, check the units of the amounts.")
        return wanted
    wanted = ["Check security and outage words before anything else."]
    if counts["improved"]:
        wanted.append("Keep the keyword rules that fixed tickets; extend their word lists before adding new rules.")
    if counts["regressed"]:
        wanted.append("Prefer narrow keywords: a common word can pull tickets into the wrong queue.")
    if counts["still_failing"]:
        wanted.append("When no rule matches, fall back to the defaults instead of guessing.")
    wanted.append("Read the customer's plan before settling the priority.")
    return wanted


def _quoted_in(memory: str, edit: dict[str, str]) -> bool:
    if edit["op"] == "delete":
        return f'delete "{" ".join(edit["anchor"].split())}"' in memory
    return f'"{" ".join(edit["text"].split())}"' in memory


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _empty(kind: str, why: str) -> dict[str, Any]:
    if kind == "slow_update":
        return {"analysis": why, "block": "- Check security and outage words before anything else."}
    if kind == "meta":
        return {"meta_skill": "Nothing learned this epoch."}
    return {"analysis": why, "edits": []}


policy = OptimizerSim()
malformed_policy = OptimizerSim(malformed=True)
