"""The action an ``interactive`` environment reads from a model reply, by the suite's ``variant``.

- ``variant: strict`` (the default): the ``action`` rule reads it (``tag``: the text of the last
  ``<action_tag>…</action_tag>``, any case; ``last_line``: the last non-empty line); with
  ``require_tags`` the reply must also hold those tags and with ``reject_cjk`` no CJK character
  (:func:`~skillopt_ci.envs.turn_prompt.reply_problem`), or it has no action; ``lowercase``
  lowercases the action. A reply without an action is not sent to the world.
- ``variant: reference``: the method's ALFWorld handling (its rollout loop, then its
  ``alfworld_projection``), for reproducing its numbers. Every reply sends an action: an empty
  reply, or one without an ``<action>…</action>`` pair written in lower case, sends ``look``;
  otherwise the reply is lowercased and the action is what lies between the *first* ``<action>``
  and the *first* ``</action>``, stripped (empty when the first ``</action>`` comes before the
  first ``<action>``). A missing ``<think>`` or a CJK character only sets the method's validity
  flag, which nothing reads: the action is sent all the same. ``require_tags``, ``reject_cjk``
  and ``lowercase`` do not apply (they still shape the instruction line of the prompt).

The projection's own fallback for a reply without both tags (its last 30 characters) is never
reached in the method: its rollout has already replaced such a reply by one acting ``look``.
Pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from skillopt_ci.envs.turn_prompt import reply_problem

VARIANTS = ("strict", "reference")
NO_ACTION = "No action found in your reply."
REFERENCE_PAIR = re.compile(r"<action>(.*?)</action>", re.S)  # the method's check: case-sensitive
REFERENCE_FALLBACK = "look"


def parse_action(text: str, rule: str, tag: str = "action") -> str | None:
    """The action in a model reply by the ``action`` rule, or ``None`` when the reply has none."""
    if rule == "tag":
        found = re.findall(rf"<{re.escape(tag)}>(.*?)</{re.escape(tag)}>", text, re.S | re.I)
        action = found[-1].strip() if found else ""
    else:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        action = lines[-1] if lines else ""
    return action or None


def reference_action(text: str) -> str:
    """The action the method sends for ``text`` (see the module doc)."""
    reply = text.strip()
    if not reply or not REFERENCE_PAIR.search(reply):
        return REFERENCE_FALLBACK
    lowered = reply.lower()
    start, end = lowered.find("<action>"), lowered.find("</action>")
    return lowered[start + len("<action>"):end].strip()


def variant_problem(variant: str, rule: str, tag: str) -> str | None:
    """What is wrong with the ``variant`` option beside ``action`` and ``action_tag``, or ``None``."""
    if variant not in VARIANTS:
        return f'option "variant" of environment interactive must be one of {", ".join(VARIANTS)}, got {variant!r}'
    if variant == "reference" and (rule, tag) != ("tag", "action"):
        return ('option "variant" reference reads <action> as the method does: leave "action" at tag '
                f'and "action_tag" at action (got {rule!r} and {tag!r})')
    return None


def read_action(text: str, *, variant: str, rule: str, tag: str, require_tags: Sequence[str],
                reject_cjk: bool, lowercase: bool) -> tuple[str | None, str]:
    """``(action, "")``, or ``(None, why)`` when the reply has no action the world may see."""
    if variant == "reference":
        return reference_action(text), ""
    action = parse_action(text, rule, tag)
    problem = NO_ACTION if action is None else reply_problem(text, require_tags, reject_cjk)
    if action is None or problem:
        return None, problem or NO_ACTION
    return (action.lower() if lowercase else action), ""
