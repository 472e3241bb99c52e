"""Small text helpers shared by scorers, the optimizer and the reports. Pure.

- :func:`fence` puts untrusted text in a backtick fence that no backtick run inside it can close,
  so a model's output cannot end its fence and pose as instructions.
- :func:`as_text` shows any task value as text: strings as they are, anything else as JSON.
- :func:`clip` and :func:`quote` shorten text to one line for feedback and error messages.
"""

from __future__ import annotations

import json
import re
from typing import Any


def fence(text: str) -> str:
    """``text`` in a backtick fence that no backtick run inside it can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    bar = "`" * max(3, longest + 1)
    return f"{bar}text\n{text}\n{bar}"


def as_text(value: Any) -> str:
    """Strings as they are; any other value as indented JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2)


def clip(text: str, limit: int = 60) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def quote(text: Any, limit: int = 60) -> str:
    """A short double-quoted snippet for feedback: ``"Paris"``."""
    return '"' + clip(str(text), limit) + '"'
