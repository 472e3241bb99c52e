"""A simulated target model for the bundled sales-analysis example (a ``tools`` suite).

Like :mod:`skillopt_ci.sim.triage`, it is honest about being a simulation: it does not
understand the data, it writes one fixed analysis script and adapts it only to the rules the
skill states. So the score of a skill on the example suite is decided by which rules it has.

A rollout takes two model calls:

1. no tool result yet → a ``python`` tool call whose code reads ``sales.csv`` and prints
   ``answer: <number>``. The question (first user message) picks the metric: total revenue,
   revenue of one region, number of orders, average order value.
2. after the tool result → ``submit_answer`` with the number the script printed (or, when it
   printed none, a plain text reply saying so, which ends the rollout).

Rules it understands (case-insensitive, one per line, anywhere in the system prompt), each the
trap of the suite's data it takes care of:

- ``duplicates``: a line with "duplicate" and "order_id" → keep the first row of each order id;
- ``refunds``: a line with "refunded" and "exclude"/"skip"/"drop" → leave refunded orders out;
- ``cents``: a line with "cents" and "100" → divide an ``amount_cents`` column by 100;
- ``currency``: a line with "rates.csv" → convert amounts to USD with ``rates.csv``;
- ``rounding`` (a harmful rule): a line with "round" and "whole dollars" → round each amount.

Without a rule the script falls into the trap, as a naive analysis would. The policy is a pure
function of the request.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from skillopt_ci.sim.protocols import ScriptedReply, ScriptedRequest, ScriptedToolCall

TRAPS = ("duplicates", "refunds", "cents", "currency")

# What a perfect skill says: one rule per trap of the example data.
REFERENCE_RULES = {
    "duplicates": "Keep each order_id once: the export can repeat an order, so drop duplicate rows before anything else.",
    "refunds": "Exclude orders whose status is refunded: they are neither revenue nor sales.",
    "cents": "A column named amount_cents holds cents: divide it by 100 to get dollars.",
    "currency": "When sales.csv has a currency column, convert each amount to USD with rates.csv "
                "(multiply by usd_per_unit) before adding amounts up.",
}
HARMFUL_RULE = "Round each amount to whole dollars before adding amounts up, so totals are easy to read."

# The scorer's feedback for each trap (eval_suites/sales-analysis/scorer.py): what the simulated
# optimizer reads to find the rule a failure calls for.
FEEDBACK = {
    "duplicates": "duplicate order ids were counted more than once",
    "refunds": "refunded orders were counted",
    "cents": "amount_cents was read as dollars",
    "currency": "amounts in other currencies were added without converting them to USD",
}

_ANSWER_RE = re.compile(r"answer:\s*(-?\d+(?:\.\d+)?)")
_REGION_RE = re.compile(r"revenue of the (\w+) region", re.I)


@dataclass(frozen=True)
class AnalysisRules:
    """Which traps the skill tells the model about, and whether it says to round amounts."""

    handled: frozenset[str] = frozenset()
    rounding: bool = False


def rule_of(line: str) -> str | None:
    """The trap (or ``"rounding"``) a skill line is a rule for, or ``None``."""
    text = line.lower()
    if "duplicate" in text and "order_id" in text:
        return "duplicates"
    if "refunded" in text and any(w in text for w in ("exclude", "skip", "drop")):
        return "refunds"
    if "cents" in text and "100" in text:
        return "cents"
    if "rates.csv" in text:
        return "currency"
    if "round" in text and "whole dollars" in text:
        return "rounding"
    return None


def parse_rules(skill_text: str) -> AnalysisRules:
    found = {rule for rule in map(rule_of, skill_text.splitlines()) if rule is not None}
    return AnalysisRules(frozenset(found & set(TRAPS)), "rounding" in found)


@dataclass(frozen=True)
class Question:
    metric: str  # total | region | count | average
    region: str | None = None


def parse_question(text: str) -> Question:
    lowered = text.lower()
    if m := _REGION_RE.search(text):
        return Question("region", m.group(1))
    if "how many orders" in lowered:
        return Question("count")
    if "average order value" in lowered:
        return Question("average")
    return Question("total")


def analysis_code(rules: AnalysisRules, question: Question) -> str:
    """The script the simulated analyst runs: the same steps every time, a trap handled only
    when the skill has its rule."""
    handled = rules.handled
    lines = ["import csv, os", "",
             'with open("sales.csv", newline="", encoding="utf-8") as f:',
             "    rows = list(csv.DictReader(f))"]
    if "duplicates" in handled:
        lines += ["seen = set()", 'rows = [r for r in rows if not (r["order_id"] in seen or seen.add(r["order_id"]))]']
    if "refunds" in handled:
        lines += ['rows = [r for r in rows if r.get("status") != "refunded"]']
    if question.region:
        lines += [f"rows = [r for r in rows if r.get('region') == {question.region!r}]"]
    if "currency" in handled:
        lines += ["rates = {}", 'if os.path.exists("rates.csv"):',
                  '    with open("rates.csv", newline="", encoding="utf-8") as f:',
                  '        rates = {r["currency"]: float(r["usd_per_unit"]) for r in csv.DictReader(f)}']
    lines += ["amounts = []", "for r in rows:",
              '    amount = float(r["amount"] if "amount" in r else r["amount_cents"])']
    if "cents" in handled:
        lines += ['    if "amount_cents" in r:', '        amount = float(r["amount_cents"]) / 100']
    if "currency" in handled:
        lines += ['    if r.get("currency"):', '        amount *= rates[r["currency"]]']
    if rules.rounding:
        lines += ["    amount = round(amount)"]
    lines += ["    amounts.append(amount)"]
    lines += [{"count": 'print("answer:", len(amounts))',
               "average": 'print("answer:", round(sum(amounts) / len(amounts), 2))'}.get(
        question.metric, 'print("answer:", round(sum(amounts), 2))')]
    return "\n".join(lines) + "\n"


def printed_answer(tool_output: str) -> str | None:
    """The number after the last ``answer:`` the script printed, or ``None``."""
    found = _ANSWER_RE.findall(tool_output)
    return found[-1] if found else None


class AnalystPolicy:
    """A scripted-server policy ``(request) -> ScriptedReply`` playing the analyst model."""

    def __call__(self, request: ScriptedRequest) -> ScriptedReply:
        tools = {t["name"]: t for t in request.tools}
        results = request.tool_results
        if results:
            number = printed_answer("\n".join(str(r.get("content", "")) for r in results))
            if number is None or "submit_answer" not in tools:
                return ScriptedReply(f"I could not compute the answer: the script printed no number.\n{number or ''}".strip())
            return _call(tools, "submit_answer", "answer", number)
        if "python" not in tools:
            return ScriptedReply("I need the python tool to answer this question.")
        question = parse_question(_first_user(request))
        return _call(tools, "python", "code", analysis_code(parse_rules(request.system), question))


def _call(tools: dict[str, Any], name: str, preferred: str, value: str) -> ScriptedReply:
    return ScriptedReply("", tool_calls=(ScriptedToolCall(name, {_argument(tools[name], preferred): value}),))


def _argument(tool: dict[str, Any], preferred: str) -> str:
    """The name of the tool's (first) string argument, ``preferred`` when it has one by that name."""
    params = tool.get("parameters") or {}
    if isinstance(params, str):
        params = json.loads(params)
    props = params.get("properties") or {}
    if preferred in props or not props:
        return preferred
    required = params.get("required") or []
    return required[0] if required else next(iter(props))


def _first_user(request: ScriptedRequest) -> str:
    return next((m["content"] for m in request.messages if m.get("role") == "user"), "")


policy = AnalystPolicy()
