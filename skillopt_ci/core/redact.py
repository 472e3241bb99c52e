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
  streams (:class:`SafeStream`, installed by the CLI entry point; a key split over two writes is
  masked too, :meth:`SecretRegistry.final_upto`) and everything sent to GitHub
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

from skillopt_ci.core.secret_forms import (
    find_spans,
    mask_spans,
    needles,
    needs_single_lenses,
    open_tail,
)

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
        self._reach = 0

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
            # The longest spelling of a needle: every character as an HTML reference (``&#NNNNNNN;``).
            self._reach = 10 * len(self._needles[0]) + 64

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

    def final_upto(self, text: str) -> int:
        """How much of ``text`` can be redacted and written now when more text may follow it:
        everything before the start of a possible secret at its end (a needle's beginning in some
        view, a credential shape still open) and before any secret that runs across that point."""
        end = _open_shape(text)
        wanted = self._needles
        if wanted:
            end = min(end, open_tail(text, wanted, singly=self._singly, reach=self._reach))
            end = _before_spans(end, find_spans(text, wanted, singly=self._singly))
        lowered = text.lower()
        for needles_, anycase, shape in _SHAPES:
            if any(n in (lowered if anycase else text) for n in needles_):
                end = _before_spans(end, [m.span() for m in shape.finditer(text, max(0, end - 4096))])
        return end

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


# The end of a text that a credential shape may go on from: a header's value, a token, or the
# beginning of a token's prefix (``s``, ``gh``) that the next write may continue.
_OPEN_HEADER = re.compile(
    r"(?i)\b(?:(?:proxy-)?authorization|(?:x-)?api-key)[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|token|basic)\s+)?[^\s\"',;]*\Z")
_WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_TOKEN_STARTS = ("sk-", "ghp_", "gho_", "ghs_", "ghu_", "ghr_", "github_pat_")


def _open_shape(text: str) -> int:
    end = len(text)
    tail = text[-4096:].lower()
    if "authorization" in tail or "api-key" in tail:
        header = _OPEN_HEADER.search(text, max(0, end - 4096))
        end = header.start() if header else end
    start = len(text)
    while start and text[start - 1] in _WORD:
        start -= 1
    word = text[start:]
    if word and any(word.startswith(s) or s.startswith(word) for s in _TOKEN_STARTS):
        end = min(end, start)
    return end


def _before_spans(end: int, spans: list[tuple[int, int]]) -> int:
    """``end`` moved back before every span that runs across it."""
    for start, stop in sorted(spans, reverse=True):
        if start < end < stop:
            end = start
    return end


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

    A write is not redacted alone: a secret split over two writes (a key printed in pieces, a
    wrapped key written line by line) must still be found. The stream holds back the end of
    what was written while it may be the beginning of a secret (:meth:`SecretRegistry.final_upto`)
    or of a workflow command (``::`` at a line start, ``##[``), and writes it once what follows
    settles it, or at :meth:`release` (the CLI entry point releases on its way out) and
    :meth:`close`. :meth:`flush` does not release it: ``click.echo`` and ``logging`` flush after
    every write. :meth:`command` writes a workflow command the tool means to issue (redacted,
    not defused), after everything written before it."""

    def __init__(self, raw: TextIO, *, defuse: bool = True):
        self.raw = raw
        self.defuse = defuse
        self._line_start = True
        self._pending = ""
        self._lock = threading.RLock()

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # click probes for binary streams with write(b"")
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if not text:
            return 0
        with self._lock:
            self._pending += text
            end = SECRETS.final_upto(self._pending)
            if self.defuse:
                end = _before_command(self._pending, end, self._line_start)
            self._emit(end)
        return len(text)

    def _emit(self, end: int) -> None:
        chunk, self._pending = self._pending[:end], self._pending[end:]
        if not chunk:
            return
        safe = redact(chunk)
        if self.defuse:
            safe = defuse_commands(safe, line_start=self._line_start)
        self._line_start = ends_line(safe)
        self.raw.write(safe)

    def release(self) -> None:
        """Write what is held back: nothing more will follow it."""
        with self._lock:
            self._emit(len(self._pending))

    def command(self, line: str) -> None:
        with self._lock:
            self._emit(len(self._pending))
            if not self._line_start:
                self.raw.write("\n")
            self.raw.write(redact(line))
            self._line_start = ends_line(line)

    def close(self) -> None:
        self.release()
        super().close()

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


def _before_command(text: str, end: int, line_start: bool) -> int:
    """``end`` moved back before what a later write may turn into a workflow command: blanks and
    at most one ``:`` at a line start, or ``#``/``##`` (``##[`` anywhere)."""
    if text.endswith("#", 0, end):
        return end - (2 if text.endswith("##", 0, end) else 1)
    start = end - 1 if text.endswith(":", 0, end) else end
    while start and text[start - 1].isspace() and text[start - 1] not in _LINE_BREAKS:
        start -= 1
    if start == end or (start == 0 and not line_start) or (start and text[start - 1] not in _LINE_BREAKS):
        return end
    return start


def write_command(stream: TextIO, line: str) -> None:
    """Issue a workflow command line on ``stream`` (through :meth:`SafeStream.command` if it is one)."""
    if isinstance(stream, SafeStream):
        stream.command(line)
    else:
        stream.write(redact(line))
