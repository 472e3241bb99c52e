"""Typed errors. Library code raises these; the CLI turns them into one line and an exit code.

Exit codes (DESIGN section 9): 0 success, 1 a gate or threshold failed, 2 bad usage, config or
input, 3 runtime failure (provider unreachable, budget exhausted, too many errors).
"""

from __future__ import annotations

from skillopt_ci.core.redact import redact

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INPUT = 2
EXIT_RUNTIME = 3


class SkilloptError(Exception):
    """Base class. ``where`` names the file (and line or path inside it); ``hint`` says what to do."""

    exit_code = EXIT_RUNTIME

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.where = where
        self.hint = hint

    def __str__(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        if self.hint:
            text += f" ({self.hint})"
        return text


class InputError(SkilloptError):
    """Bad usage, config, suite, task, skill or scorer definition: the user must change something."""

    exit_code = EXIT_INPUT


class RuntimeFailure(SkilloptError):
    """The run could not complete: provider unreachable, too many errors, budget exhausted."""

    exit_code = EXIT_RUNTIME


class ProviderError(Exception):
    """One model call failed after its retries. Becomes an errored result, never a crash.

    ``kind`` is a short machine-readable class: ``rate_limit``, ``server``, ``timeout``,
    ``connection``, ``malformed``, ``auth``, ``bad_request``, ``replay_miss``. The message is
    redacted here, at the source: a provider's error text may quote the key it was sent.
    """

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ):
        message = redact(message)
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


class ScoringError(Exception):
    """A scorer could not produce a measurement for one output (e.g. an unparseable judge verdict).

    Recorded as an errored result (missing data), never as a zero. ``usage`` counts the tokens a
    model-based scorer spent on the way (they were paid for even though no score came out).
    """

    def __init__(self, message: str, *, usage: object | None = None):
        super().__init__(message)
        self.usage = usage


class ScorerCrash(InputError):
    """User scorer code raised: a bug in the suite. Aborts the run with exit 2."""
