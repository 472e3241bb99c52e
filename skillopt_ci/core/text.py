"""Small text helpers shared by scorers, the optimizer and the reports. Pure.

- :func:`fence` puts untrusted text in a backtick fence that no backtick run inside it can close,
  so a model's output cannot end its fence and pose as instructions.
- :func:`as_text` shows any task value as text: strings as they are, anything else as JSON.
- :func:`clip`, :func:`cut` and :func:`quote` shorten text to one line for feedback and error messages; they
  redact it first (:mod:`skillopt_ci.core.redact`), so that neither flattening its line breaks
  nor the cut can leave a part of a key that redaction later would not recognise.
"""

from __future__ import annotations

import json
import re
from typing import Any

from skillopt_ci.core.redact import redact


def fraction(hits: int, of: int) -> str:
    """"5/6 (83%)", or "—" when there is nothing to count."""
    return f"{hits}/{of} ({100 * hits / of:.0f}%)" if of else "—"


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
    """``text``, redacted, on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(redact(str(text)).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def cut(text: Any, limit: int) -> str:
    """``text``, redacted, then cut to at most ``limit`` characters (an error snippet)."""
    return redact(str(text))[:limit]


def quote(text: Any, limit: int = 60) -> str:
    """A short double-quoted snippet for feedback: ``"Paris"``."""
    return '"' + clip(str(text), limit) + '"'
