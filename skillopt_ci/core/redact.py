"""Secrets never leave the process, and untrusted text never becomes a workflow command.

Contract:
- The process keeps one registry of secret values (:data:`SECRETS`): every key a model endpoint
  is resolved with, the GitHub token, every environment variable whose name ends in ``KEY``,
  ``TOKEN``, ``SECRET`` or ``PASSWORD``, and the user-info of configured base URLs. Values shorter
  than :data:`MIN_SECRET_LENGTH` are not registered (they would blank ordinary words).
- :func:`redact` replaces every registered value, in any of the forms text gives it on the way
  out (base64, percent-, JSON-, HTML- and backslash-escaped, wrapped over lines: see
  :mod:`skillopt_ci.core.secret_forms`), and credentials in well-known shapes (an
  ``Authorization:`` header echoed by a server, ``sk-…``/``ghp_…`` tokens), with ``***``.
- Redaction happens at the source and again at every sink. At the source: provider errors
  (:class:`~skillopt_ci.core.errors.ProviderError` redacts its message), completions before the
  response cache stores them, the batch journal, and every helper that escapes or cuts text
  (``clip``, the markdown escapers, the viewer) redacts *before* it escapes or cuts, so no
  escape splits a key and no cut keeps a prefix of one. At the sinks: the run-directory writers
  (:mod:`skillopt_ci.engine.rundir`), the runner's files (outputs, job summary), the console
  streams (:class:`SafeStream`, installed by the CLI entry point) and everything sent to GitHub
  (:func:`redact_args` on the publisher's methods).
- :func:`defuse_commands` makes sure no printed line is a workflow command: a line whose first
  non-blank characters are ``::`` gets a zero-width space in front (the runner trims only
  whitespace before matching, and a line for it ends at LF, CR or CRLF: ``\\r::error::`` is a
  line too), and ``##[`` anywhere becomes ``##\\u200b[``. The Action's own
  commands go through :meth:`SafeStream.command`, which redacts but does not defuse.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any, TextIO, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

from skillopt_ci.core.secret_forms import find_spans, mask_spans, needles, needs_single_lenses

MIN_SECRET_LENGTH = 8
MASK = "***"
ZWSP = "\u200b"

_SECRET_ENV_SUFFIXES = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIALS")
# Credentials in shapes we recognise even when we never saw the value: an echoed Authorization
# or api-key header, and the token formats of the providers and GitHub. Each shape has a cheap
# substring test first (redaction runs on every result line; most lines hold none of them).
_SHAPES: tuple[tuple[tuple[str, ...], bool, re.Pattern[str]], ...] = (
    (("authorization",), True, re.compile(
        r"(?i)(\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:bearer|token|basic)\s+)[^\s\"',;]+")),
    (("api-key",), True, re.compile(r"(?i)(\b(?:x-)?api-key[\"']?\s*[:=]\s*[\"']?)[^\s\"',;]+")),
    (("sk-",), False, re.compile(r"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}")),
    (("ghp_", "gho_", "ghs_", "ghu_", "ghr_", "github_pat_"), False,
     re.compile(r"gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}")),
)
# The runner reads lines as .NET's ReadLine does (a line ends at LF, CR or CRLF) and trims every
# Unicode blank before matching ``::``; the separators are Python's ``splitlines`` set (a superset)
# and the blanks ``\s`` (also a superset: a zero-width space too many is harmless).
_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_COMMAND_AFTER_BREAK = re.compile(rf"(?<=[{_LINE_BREAKS}])(?=[^\S{_LINE_BREAKS}]*::)")
_COMMAND_AT_START = re.compile(rf"(?=[^\S{_LINE_BREAKS}]*::)")


class SecretRegistry:
    """The secret values of this process. Thread-safe; values only accumulate.

    Each value's forms (:func:`~skillopt_ci.core.secret_forms.needles`) are computed once, when
    it is added; :meth:`redact` then finds them through every encoding the text may carry."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: set[str] = set()
        self._needles: tuple[str, ...] = ()
        self._singly = False

    def __bool__(self) -> bool:
        """Whether any value is registered (an empty registry lets callers skip the work)."""
        return bool(self._needles)

    def add(self, value: str | None) -> None:
        value = (value or "").strip()
        if len(value) < MIN_SECRET_LENGTH:
            return
        with self._lock:
            if value in self._values:
                return
            self._values.add(value)
            # Longest first: a secret inside a longer one must not leave the rest of the longer.
            self._needles = tuple(sorted(set(self._needles) | set(needles(value)), key=len, reverse=True))
            self._singly = needs_single_lenses(self._needles)

    def add_env(self, environ: Mapping[str, str]) -> None:
        """Register every variable that by its name holds a credential."""
        for name, value in environ.items():
            if name.upper().endswith(_SECRET_ENV_SUFFIXES):
                self.add(value)

    def add_url(self, url: str | None) -> None:
        """Register the user-info (``user:password@``) of a URL."""
        parts = _split(url)
        if parts is None or "@" not in parts.netloc:
            return
        userinfo = parts.netloc.rpartition("@")[0]
        user, _, password = userinfo.partition(":")
        for value in (userinfo, password, unquote(password), user if password else ""):
            self.add(value)

    def redact(self, text: str) -> str:
        wanted = self._needles
        if wanted:
            spans = find_spans(text, wanted, singly=self._singly)
            if spans:
                text = mask_spans(text, spans, MASK)
        lowered = None
        for needles_, anycase, shape in _SHAPES:
            if anycase:
                lowered = text.lower() if lowered is None else lowered
                if not any(n in lowered for n in needles_):
                    continue
            elif not any(n in text for n in needles_):
                continue
            text = shape.sub(_mask_shape, text)
            lowered = None
        return text


def _mask_shape(match: re.Match[str]) -> str:
    if match.re.groups:  # a header: keep its name, mask its value
        return match.group(1) + MASK
    start = match.start()
    if start and (match.string[start - 1].isalnum() or match.string[start - 1] in "_-"):
        return match.group(0)  # inside a longer word ("task-…"): not a token
    return MASK


def _split(url: str | None) -> Any:
    if not url:
        return None
    try:
        return urlsplit(url)
    except ValueError:
        return None


SECRETS = SecretRegistry()


def redact(text: str) -> str:
    """``text`` with every known secret and credential-shaped string replaced by ``***``."""
    return SECRETS.redact(text)


def redact_obj(value: Any) -> Any:
    """:func:`redact` applied to every string inside lists, tuples, dicts and dataclass records."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {redact_obj(k): redact_obj(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_obj(v) for v in value]
    if isinstance(value, tuple):
        return tuple(redact_obj(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: redact_obj(getattr(value, f.name))
                                            for f in dataclasses.fields(value) if f.init})
    return value


F = TypeVar("F", bound=Callable[..., Any])


def redact_args(fn: F) -> F:
    """Decorate a function that sends its string arguments out of the process (to GitHub)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*(redact_obj(a) for a in args), **{k: redact_obj(v) for k, v in kwargs.items()})

    return wrapper  # type: ignore[return-value]  # functools.wraps: fn's own signature


def strip_userinfo(url: str | None) -> str | None:
    """``https://user:pw@host/v1`` → ``https://host/v1``; anything else unchanged."""
    parts = _split(url)
    if parts is None or "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def defuse_commands(text: str, *, line_start: bool = True) -> str:
    """``text`` with no line that the Actions runner would read as a workflow command.

    ``line_start`` says whether ``text`` begins a line (a stream writes lines in pieces)."""
    text = text.replace("##[", f"##{ZWSP}[")
    if "::" not in text:
        return text
    text = _COMMAND_AFTER_BREAK.sub(ZWSP, text)
    if line_start and _COMMAND_AT_START.match(text):
        text = ZWSP + text
    return text


def ends_line(text: str) -> bool:
    """Whether what is written after ``text`` starts a new line for the runner."""
    return text.endswith(tuple(_LINE_BREAKS))


class SafeStream(io.TextIOBase):
    """A text stream that redacts secrets and defuses workflow commands in what is written.

    :meth:`command` writes a workflow command the tool means to issue (redacted, not defused)."""

    def __init__(self, raw: TextIO, *, defuse: bool = True):
        self.raw = raw
        self.defuse = defuse
        self._line_start = True

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # click probes for binary streams with write(b"")
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if not text:
            return 0
        safe = redact(text)
        if self.defuse:
            safe = defuse_commands(safe, line_start=self._line_start)
        self._line_start = ends_line(safe)
        self.raw.write(safe)
        return len(text)

    def command(self, line: str) -> None:
        if not self._line_start:
            self.raw.write("\n")
        self.raw.write(redact(line))
        self._line_start = ends_line(line)

    def flush(self) -> None:
        self.raw.flush()

    def isatty(self) -> bool:
        return self.raw.isatty()

    def fileno(self) -> int:
        return self.raw.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]  # read-only here, as on a real text stream
        return getattr(self.raw, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]  # read-only here, as on a real text stream
        return getattr(self.raw, "errors", None)


def write_command(stream: TextIO, line: str) -> None:
    """Issue a workflow command line on ``stream`` (through :meth:`SafeStream.command` if it is one)."""
    if isinstance(stream, SafeStream):
        stream.command(line)
    else:
        stream.write(redact(line))
