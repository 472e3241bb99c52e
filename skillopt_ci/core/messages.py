"""What a model call carries: messages with text, images, tool calls and tool results.

Provider-neutral records; each backend translates them to its wire format (Chat Completions,
Responses, Anthropic Messages). A plain text message is ``Message(role, "text")`` and serializes
exactly as before tools existed, so the cache keys of text-only calls never change.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from skillopt_ci.core.codec import Record


@dataclass(frozen=True)
class ImagePart:
    """An image sent to the model: raw bytes and their media type (``image/png``…)."""

    media_type: str
    data: bytes = field(repr=False)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")

    @property
    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.base64}"


Part = str | ImagePart  # a text part or an image part


@dataclass(frozen=True)
class ToolSpec(Record):
    """A tool the model may call: its name, a description and a JSON Schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True)
class ToolCall(Record):
    """One call the model asked for. ``arguments`` is the JSON text exactly as the model wrote it
    (it may be invalid: the environment reports that back to the model)."""

    id: str
    name: str
    arguments: str = ""

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as an object; ``ValueError`` with a readable message when they are not one."""
        try:
            value = json.loads(self.arguments or "{}")
        except json.JSONDecodeError as exc:
            raise ValueError(f"arguments are not valid JSON: {exc.msg} at column {exc.colno}") from None
        if not isinstance(value, dict):
            raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")
        return value


@dataclass(frozen=True)
class Message:
    """One turn. ``role`` is ``system``, ``user``, ``assistant`` or ``tool``.

    ``content`` is a string, or a tuple of parts (strings and :class:`ImagePart`) for a message
    with images. An assistant turn may carry ``tool_calls``; a ``tool`` turn answers the call
    ``tool_call_id`` (of tool ``name``) and says whether the tool failed (``is_error``).
    """

    role: str
    content: str | tuple[Part, ...]
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False

    @property
    def text(self) -> str:
        """The text parts joined (images left out)."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p for p in self.content if isinstance(p, str))

    @property
    def images(self) -> tuple[ImagePart, ...]:
        return () if isinstance(self.content, str) else tuple(p for p in self.content if isinstance(p, ImagePart))

    @property
    def plain(self) -> bool:
        """A text-only message with no tool calls: what every message was before tools."""
        return isinstance(self.content, str) and not self.tool_calls and self.tool_call_id is None

    def to_dict(self) -> dict[str, Any]:
        """Plain messages give ``{"role", "content"}`` (the Chat Completions shape, unchanged);
        others add their parts (images by media type and sha256), calls and call id."""
        if self.plain:
            return {"role": self.role, "content": self.content}
        data: dict[str, Any] = {"role": self.role, "content": _parts_key(self.content)}
        if self.tool_calls:
            data["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
            data["name"] = self.name
            data["is_error"] = self.is_error
        return data

    def cache_form(self) -> list[Any]:
        """What the response cache hashes: ``[role, content]`` for a plain message (the key every
        text-only call had before tools), else ``[role, content, extras]`` with image hashes."""
        if self.plain:
            return [self.role, self.content]
        data = self.to_dict()
        return [self.role, data.pop("content"), {k: v for k, v in data.items() if k != "role"}]


def _parts_key(content: str | tuple[Part, ...]) -> Any:
    if isinstance(content, str):
        return content
    return [p if isinstance(p, str) else {"image": p.media_type, "sha256": p.sha256} for p in content]
