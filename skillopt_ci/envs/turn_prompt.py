"""The turn message of the ``interactive`` environment when a suite sets ``turn_prompt``, and the
checks a reply must pass beyond the action rule (``require_tags``, ``reject_cjk``). Pure.

A turn prompt is a ``{{ placeholder }}`` template (:mod:`skillopt_ci.core.template`) of the
whole user message of a turn. Its placeholders:

- ``prompt``: the suite's prompt filled for the task;
- ``objective``: the goal as the world states it (its optional ``objective()`` method, asked
  after ``reset``), else the prompt;
- ``step``: the turns taken so far (0 on the first turn); ``max_steps``;
- ``history``: the last ``history`` (observation, action) pairs, oldest first: the observation
  the model saw and the action it answered with (``(no valid action)`` for a reply that had
  none), numbered by step; ``none`` before the first step; ``history_count``: how many it shows;
- ``observation``: the current observation;
- ``admissible``: the actions the world admits now (its optional ``admissible_actions()``
  method), one per line; ``none listed`` when the world gives none;
- ``instruction``: how to answer (the tags, and the CJK rule when it is on).

An unknown placeholder is an input error when the environment is built.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from skillopt_ci.core.template import placeholders, render

TURN_PLACEHOLDERS = ("prompt", "objective", "step", "max_steps", "history", "history_count",
                     "observation", "admissible", "instruction")
# Hiragana, Katakana, CJK punctuation, CJK ideographs (and extension A, compatibility), Hangul
# syllables, full-width forms: a reply holding any of them is not an action when reject_cjk is on.
CJK_RE = re.compile("[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")
NO_ACTION = "(no valid action)"


def unknown_placeholders(template: str) -> list[str]:
    return [name for name in placeholders(template) if name not in TURN_PLACEHOLDERS]


def reply_problem(text: str, require_tags: Sequence[str], reject_cjk: bool) -> str | None:
    """Why the reply cannot count as an action whatever its action tag holds, or ``None``."""
    for tag in require_tags:
        if not re.search(rf"<{re.escape(tag)}>.*?</{re.escape(tag)}>", text, re.S | re.I):
            return f"Your reply has no <{tag}></{tag}> part."
    if reject_cjk and CJK_RE.search(text):
        return "Your reply contains CJK characters."
    return None


def instruction(rule: str, tag: str, require_tags: Sequence[str], reject_cjk: bool) -> str:
    """The line saying how to answer; without the extra checks it is the original wording."""
    if rule == "tag":
        text = f"Reply with your next action inside <{tag}></{tag}>."
    else:
        text = "Reply with your next action alone on the last line of your answer."
    if require_tags:
        parts = " and ".join(f"<{t}></{t}>" for t in require_tags)
        text = f"Write {parts} first, then r{text[1:]}"
    if reject_cjk:
        text += " Use no Chinese, Japanese or Korean characters."
    return text


def render_history(pairs: Sequence[tuple[str, str | None]], first_step: int) -> str:
    """(observation, action) pairs as numbered lines; ``first_step`` is the number of the first."""
    if not pairs:
        return "none"
    lines = []
    for number, (observation, action) in enumerate(pairs, first_step):
        lines += [f"Observation {number}: {observation}", f"Action {number}: {action or NO_ACTION}"]
    return "\n".join(lines)


def render_turn(template: str, *, prompt: str, objective: str, step: int, max_steps: int,
                pairs: Sequence[tuple[str, str | None]], history: int, observation: str,
                admissible: Sequence[str], instruction_line: str) -> str:
    """The user message of one turn. ``pairs`` are all (observation, action) pairs so far."""
    shown = list(pairs[-history:]) if history else []
    return render(template, {
        "prompt": prompt.rstrip(), "objective": objective or prompt.rstrip(), "step": step,
        "max_steps": max_steps, "history": render_history(shown, len(pairs) - len(shown) + 1),
        "history_count": len(shown), "observation": observation,
        "admissible": "\n".join(admissible) if admissible else "none listed",
        "instruction": instruction_line,
    })
