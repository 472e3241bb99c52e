"""How the simulated optimizer reads the real reflection prompts: which of the four requests a
prompt is (:data:`HEADERS`, the first line of each template in ``skillopt_ci/prompts/``), the
trajectories it shows, field by field from their fences, and the fenced blocks and counts the
other requests carry. Pure functions of the prompt text."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

HEADERS = {
    "# Skill optimization: reflect on failures": "failure",
    "# Skill optimization: reflect on successes": "success",
    "# Skill optimization: reflect on triggering": "trigger",
    "# Skill optimization: slow update of a protected block": "slow_update",
    "# Skill optimization: update the meta skill": "meta",
}
_TOKEN = re.compile(
    r"^(`{3,})text\n(?:.*?\n)?\1$|^### Trajectory [^\n]*$|^## [^\n]*$"
    r"|^(?:Input the model was given|The model's output|Expected answer|Scorer feedback):$",
    re.MULTILINE | re.DOTALL,
)
_FENCE = re.compile(r"(`{3,})text\n(?:(.*?)\n)?\1$", re.M | re.S)
_FIELDS = {"Input the model was given:": "input", "The model's output:": "output",
           "Expected answer:": "expected", "Scorer feedback:": "feedback"}
@dataclass(frozen=True)
class Trajectory:
    task_id: str = ""
    input: str = ""
    output: str = ""
    expected: str = ""
    feedback: str = ""

    @property
    def plan(self) -> str:
        m = re.search(r"^Plan:\s*(\S+)", self.input, re.M)
        return m.group(1) if m else ""

    @property
    def ticket(self) -> str:
        m = re.search(r"^Ticket:\s*\n(.*)", self.input, re.S | re.M)
        return m.group(1) if m else self.input


def between(prompt: str, start: str, end: str) -> str:
    at = prompt.find("\n" + start)
    if at < 0:
        return ""
    stop = prompt.find("\n" + end, at)
    return prompt[at : stop if stop >= 0 else len(prompt)]


def parse_trajectories(prompt: str) -> list[Trajectory]:
    """The trajectories of a reflection prompt, read field by field from their fences."""
    found: list[dict[str, str]] = []
    label = None
    inside = False
    for m in _TOKEN.finditer(prompt):
        token = m.group(0)
        if token.startswith("## "):
            inside = token.rstrip() in ("## Failed trajectories", "## Successful trajectories")
            continue
        if not inside:
            continue
        if token.startswith("### Trajectory"):
            heading = re.match(r"### Trajectory \d+: task (\S+)", token)
            found.append({"task_id": heading.group(1) if heading else ""})
        elif token in _FIELDS:
            label = _FIELDS[token]
        elif found and label:
            found[-1][label] = unfence(token)
            label = None
    return [Trajectory(**fields) for fields in found]


def find_prompt(request: Any) -> tuple[str, str]:
    for message in request.messages:
        if message["role"] != "user":
            continue
        first = message["content"].lstrip().split("\n", 1)[0].strip()
        if first in HEADERS:
            return message["content"], HEADERS[first]
    return request.last_user, "unknown"


def fenced_after(prompt: str, heading: str) -> str | None:
    """The content of the fence that directly follows the line starting with ``heading``."""
    at = prompt.find("\n" + heading)
    if at < 0:
        return None
    end = prompt.find("\n", at + 1)
    m = _FENCE.match(prompt, end + 1) if end >= 0 else None
    if m is None:
        m = _FENCE.match(prompt, end + 2) if prompt[end + 1 : end + 2] == "\n" else None
    return (m.group(2) or "") if m else None


def unfence(token: str) -> str:
    body = token.split("\n", 1)[1]
    return body[: body.rfind("\n")] if "\n" in body else ""


def count_items(prompt: str, heading: str) -> int:
    block = fenced_after(prompt, f"{heading} (") or ""
    return sum(1 for line in block.splitlines() if line.startswith("- "))


def max_edits(prompt: str) -> int:
    m = re.search(r"Propose at most (\d+) edits", prompt)
    return int(m.group(1)) if m else 3


def digest(prompt: str) -> int:
    return int.from_bytes(hashlib.sha256(prompt.encode("utf-8")).digest()[:8], "big")
