"""What a task's image really is, from its first bytes (no image library).

Model APIs take PNG, JPEG, GIF and WebP. A file's name can lie (a ``.png`` that is a JPEG, a
screenshot saved as text): the media type sent with an image is the one its signature says, and
a file with none of these signatures is no image a model API accepts. Pure functions.
"""

from __future__ import annotations

HEAD_BYTES = 12  # enough for every signature below (WebP's is at bytes 8-11)
KNOWN = "PNG, JPEG, GIF or WebP"


def image_type(head: bytes) -> str | None:
    """``image/png``, ``image/jpeg``, ``image/gif`` or ``image/webp`` by the signature at the start
    of ``head``; ``None`` for anything else."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(head) >= HEAD_BYTES and head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def describe_head(head: bytes) -> str:
    """A short, printable account of what a non-image starts with (for the error line)."""
    if not head:
        return "it is empty"
    if all(32 <= b < 127 or b in (9, 10, 13) for b in head):
        return "it starts with text"
    return f"its first bytes are {head[:8].hex(' ')}"
