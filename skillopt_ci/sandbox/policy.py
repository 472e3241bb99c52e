"""When commands may run without isolation: refused on untrusted input, else only by opt-in.

A command runs *isolated* only under bubblewrap (``isolation() == "bwrap"``, docs/sandbox.md).
Where that is not available (no bwrap, user namespaces forbidden, ``SKILLOPT_SANDBOX=none``):

- after ``mark_untrusted(reason)`` (process-wide; the Action calls it for a fork's pull request),
  every code-running command is refused: ``require_isolation`` raises ``IsolationRefused``;
- otherwise it runs only when ``SKILLOPT_ALLOW_UNISOLATED=1`` is set, and ``unisolated_note()``
  then returns the one line the comment and the job summary must show.

``IsolationRefused`` is a ``RuntimeFailure`` (exit 3): nothing in the config or the input is
wrong and the same run passes on a machine with a working bubblewrap; it is the host that lacks
what the run needs. It aborts the run instead of becoming a tool result the model reads.
"""

from __future__ import annotations

import os
import threading

from skillopt_ci.core.errors import RuntimeFailure

OPT_IN = "SKILLOPT_ALLOW_UNISOLATED"
_lock = threading.Lock()
_state: dict[str, str] = {}


class IsolationRefused(RuntimeFailure):
    """A command would run without isolation where that is not allowed."""


def mark_untrusted(reason: str) -> None:
    """From now on (in this process) never run a command without isolation; ``reason`` is shown."""
    with _lock:
        _state["untrusted"] = reason


def untrusted_reason() -> str | None:
    return _state.get("untrusted")


def opted_in() -> bool:
    return os.environ.get(OPT_IN, "").strip().lower() in ("1", "true", "yes")


def require_isolation(what: str) -> str:
    """``"bwrap"`` when ``what`` runs isolated; ``"none"`` when it may run without (opted in, and
    the input is trusted), which ``unisolated_note`` then reports; else ``IsolationRefused``."""
    from skillopt_ci.sandbox.isolation import isolation, why_not_isolated

    how = isolation()
    if how == "bwrap":
        return how
    why = why_not_isolated()
    reason = untrusted_reason()
    if reason is not None:
        raise IsolationRefused(
            f"{what}: refused: the input is untrusted ({reason}) and commands cannot be isolated "
            f"on this machine ({why})", hint="run on a host where bubblewrap works (docs/sandbox.md)")
    if not opted_in():
        raise IsolationRefused(
            f"{what}: refused: commands cannot be isolated on this machine ({why})",
            hint=f"install bubblewrap and allow user namespaces (docs/sandbox.md), or set {OPT_IN}=1 "
                 "to run them without isolation on trusted input")
    with _lock:
        _state["unisolated"] = what
    return "none"


def unisolated_note() -> str | None:
    """The line for the comment and the summary when a command ran without isolation, else None."""
    what = _state.get("unisolated")
    if what is None:
        return None
    return (f"⚠️ Ran without a sandbox ({OPT_IN}=1): commands such as {what} had this machine's files "
            "and network; only trusted input was run.")


def reset() -> None:
    """Forget ``mark_untrusted`` and the unisolated use (tests, and one process per run)."""
    with _lock:
        _state.clear()
