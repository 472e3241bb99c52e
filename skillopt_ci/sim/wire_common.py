"""Pieces the scripted server's wire formats share: request errors, text flattening, images
(decoded and checked like the real APIs do) and scripted tool calls. No I/O happens here."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from skillopt_ci.inputs.images import image_type as sniff

IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
_DATA_URL = re.compile(r"^data:([^;,]+);base64,(.*)$", re.DOTALL)


class RequestError(Exception):
    """A request the real provider would refuse; ``status`` is the HTTP status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class ScriptedToolCall:
    """One tool call in a scripted reply. ``arguments`` is an object or JSON text (sent as is, so
    a test can script invalid JSON on the OpenAI routes). ``id`` defaults to one derived from the
    request, so the same request always gets the same ids. ``kind`` "custom" makes it a Responses
    ``custom_tool_call`` (a freeform tool such as Codex's ``apply_patch``): ``arguments`` is then
    the raw input string, sent as is."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None
    kind: str = "function"

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False)

    def arguments_object(self) -> dict[str, Any]:
        """The arguments as an object (Anthropic's ``input``); ``ValueError`` if they are not one."""
        if isinstance(self.arguments, dict):
            return self.arguments
        value = json.loads(self.arguments or "{}")
        if not isinstance(value, dict):
            raise ValueError(f"tool call {self.name!r}: arguments must be a JSON object")
        return value

    def call_id(self, body: Any, index: int, prefix: str) -> str:
        if self.id:
            return self.id
        seed = json.dumps(body, sort_keys=True, default=str) + f"#{index}"
        return prefix + hashlib.sha256(seed.encode()).hexdigest()[:24]


def flatten_content(content: Any) -> str:
    """Text of a message content: a string, or a list of text parts/blocks joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for t in (flatten_content(part) for part in content) if t)
    if isinstance(content, dict):
        if isinstance(content.get("text"), str):
            return content["text"]
        return flatten_content(content.get("content"))
    return str(content)


def decode_image(media_type: str, encoded: str, where: str) -> dict[str, Any]:
    """``{"media_type", "sha256", "bytes"}`` for a base64 image; :class:`RequestError` (400) when
    the type is unsupported, the base64 is broken or the bytes are not an image of that type."""
    if media_type not in IMAGE_TYPES:
        raise RequestError(400, f"{where}: unsupported image media type {media_type!r}; "
                                f"supported: {', '.join(IMAGE_TYPES)}")
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise RequestError(400, f"{where}: the image is not valid base64") from None
    found = sniff(data)
    if found is None:
        raise RequestError(400, f"{where}: could not process image (the data is not a "
                                f"png, jpeg, gif or webp image)")
    if found != media_type:
        raise RequestError(400, f"{where}: the image was specified using the {media_type} media type, "
                                f"but the image appears to be a {found} image")
    return {"media_type": media_type, "sha256": hashlib.sha256(data).hexdigest(), "bytes": data}


def decode_data_url(url: Any, where: str) -> dict[str, Any]:
    """An image given as a ``data:<type>;base64,<data>`` URL (the only kind served here)."""
    match = _DATA_URL.match(url) if isinstance(url, str) else None
    if match is None:
        raise RequestError(400, f"{where}: invalid image URL; ScriptedModelServer accepts images only "
                                "as data:<media type>;base64,<data> URLs")
    return decode_image(match.group(1), match.group(2), where)


def reply_tokens(text: str, calls: tuple[ScriptedToolCall, ...]) -> int:
    """Default output token count: whitespace tokens of the text and of each call's arguments."""
    return len(text.split()) + sum(len(c.arguments_json().split()) for c in calls)
