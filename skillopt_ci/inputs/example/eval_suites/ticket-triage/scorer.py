"""Scorer for the ticket-triage suite: half a point for the category, half for the priority.

The feedback says what was wrong, so an optimizer reading failed tasks can learn the rule.
"""

import re

ANSWER_RE = re.compile(r"^\s*`?([a-z-]+)\s*/\s*(p[1-4])`?\s*\.?\s*$", re.IGNORECASE)


def score(output, task):
    want_category, want_priority = task.expected.split("/")
    match = ANSWER_RE.match(output)
    if match is None:
        return {
            "value": 0.0,
            "feedback": f'answer must be exactly "category/priority" (here "{task.expected}"), got "{output.strip()[:80]}"',
        }
    category, priority = match.group(1).lower(), match.group(2).upper()
    problems = []
    if category != want_category:
        problems.append(f"category should be {want_category}, not {category}")
    if priority != want_priority:
        problems.append(f"priority should be {want_priority}, not {priority}")
    value = 1.0 - 0.5 * len(problems)
    return {"value": value, "passed": not problems, "feedback": "; ".join(problems) or "correct"}
