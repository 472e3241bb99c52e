"""Token usage read from a model response as it streams through the forwarder.

:class:`UsageMeter` is fed the response body chunk by chunk (never holding an SSE stream whole)
and says at the end what the provider reported: ``input_tokens`` and ``output_tokens``, either
``None`` when the response carried no ``usage``. It reads the three shapes the agent CLIs meet:
Chat Completions (``usage.prompt_tokens`` / ``completion_tokens``, the final chunk of a stream),
the Responses API (``usage`` or, streamed, ``response.completed``'s ``response.usage``) and
Anthropic Messages (``usage``; streamed, ``message_start``'s ``message.usage`` then the
cumulative ``message_delta`` usage). Anthropic's cache reads and writes are counted as input, as
the CLIs' own reports count them. For each field the last figure seen wins: every shape reports
a running or final total, never a per-event increment. Malformed bodies count nothing.
"""

from __future__ import annotations

import json
from typing import Any

JSON_CAP = 8_000_000  # bytes of a plain JSON body kept to read its usage; past it, none is read
LINE_CAP = 4_000_000  # bytes of one SSE line kept; a longer line is skipped


class UsageMeter:
    """Reads ``usage`` from one response body; see the module docstring."""

    def __init__(self, content_type: str) -> None:
        self.stream = "text/event-stream" in content_type.lower()
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self._buffer = bytearray()
        self._overflow = False

    def feed(self, chunk: bytes) -> None:
        if not self.stream:
            if len(self._buffer) + len(chunk) > JSON_CAP:
                self._overflow = True
            elif not self._overflow:
                self._buffer += chunk
            return
        self._buffer += chunk
        while True:
            end = self._buffer.find(b"\n")
            if end < 0:
                if len(self._buffer) > LINE_CAP:
                    self._buffer.clear()
                    self._overflow = True  # the rest of this line is dropped, up to its newline
                return
            line = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
            if self._overflow:
                self._overflow = False
                continue
            self._line(line)

    def finish(self) -> tuple[int | None, int | None]:
        """The usage reported: ``(input_tokens, output_tokens)``."""
        if self.stream:
            if self._buffer and not self._overflow:
                self._line(bytes(self._buffer))
        elif not self._overflow:
            self._read(bytes(self._buffer))
        self._buffer.clear()
        return self.input_tokens, self.output_tokens

    def _line(self, line: bytes) -> None:
        if line.startswith(b"data:") and b'"usage"' in line:
            self._read(line[5:])

    def _read(self, data: bytes) -> None:
        try:
            event = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            return
        usage = _usage_in(event)
        if usage is None:
            return
        read_in, read_out = read_usage(usage)
        if read_in is not None:
            self.input_tokens = read_in
        if read_out is not None:
            self.output_tokens = read_out


def _usage_in(event: Any) -> dict[str, Any] | None:
    if not isinstance(event, dict):
        return None
    for holder in (event, event.get("response"), event.get("message")):
        if isinstance(holder, dict) and isinstance(holder.get("usage"), dict):
            return holder["usage"]
    return None


def read_usage(usage: dict[str, Any]) -> tuple[int | None, int | None]:
    """``(input, output)`` tokens of one ``usage`` object in any of the three shapes."""
    given = _count(usage.get("input_tokens"))
    if given is None:
        given = _count(usage.get("prompt_tokens"))
    cached = [_count(usage.get(k)) for k in ("cache_read_input_tokens", "cache_creation_input_tokens")]
    if given is not None and any(c is not None for c in cached):
        given += sum(c for c in cached if c is not None)  # Anthropic counts these apart from input_tokens
    output = _count(usage.get("output_tokens"))
    if output is None:
        output = _count(usage.get("completion_tokens"))
    return given, output


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
