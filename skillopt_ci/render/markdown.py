"""Safe markdown for untrusted text (model output, task data) in reports, comments and summaries.

Everything that did not come from us is escaped: no raw HTML, no ``@mentions`` (which would
notify people), no forged hidden markers (HTML comments), no table breakage, bounded length.
Each helper redacts its input first (:mod:`skillopt_ci.core.redact`): an escape inside a key
(``\\_``, ``&amp;``) or a cut through one would leave parts that redaction afterwards could miss.
"""

from __future__ import annotations

import html
import re

from skillopt_ci.core.redact import redact

ZWSP = "\u200b"
_MENTION_RE = re.compile(r"@(?=[A-Za-z0-9_-])")


def truncate(text: str, limit: int, note: str = "…") -> str:
    """``text``, redacted, cut to at most ``limit`` characters, marking the cut."""
    return _cut(redact(text), limit, note)


def _cut(text: str, limit: int, note: str = "…") -> str:
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(note))] + note


def neutralize_mentions(text: str) -> str:
    """``@name`` → ``@`` + zero-width space + ``name``: reads the same, notifies nobody."""
    return _MENTION_RE.sub("@" + ZWSP, text)


def escape_inline(text: str, limit: int = 200) -> str:
    """Untrusted text as one line of inline markdown, safe inside a table cell, that renders as
    exactly that text. Only what would change the rendering there is escaped, so the raw file stays
    readable too: HTML (``<``, ``>``, ``&``), code spans, emphasis and strikethrough, link and
    image openers, table pipes, issue references (``#12``), a block marker at the very start, a
    backslash that would escape what follows. Parentheses, ``{}``, ``!``, ``+`` and ``_`` inside a
    word need nothing."""
    text = _cut(" ".join(redact(str(text)).split()), limit)
    text = html.escape(text, quote=False)
    text = _INLINE_RE.sub(_escape_match, text)
    text = _BLOCK_START_RE.sub(r"\1\\\2", text)
    return neutralize_mentions(text)


# ``_`` emphasises only at a word boundary (CommonMark's flanking rules): ``snake_case`` is left as is;
# ``[`` opens a link, image or footnote only if a ``]`` follows.
_INLINE_RE = re.compile(r"\\(?=[!-/:-@\[-`{-~]|$)|[`*~|]|\[(?=.*\])|(?<![^\W_])_|_(?![^\W_])|#(?=\d)")
_BLOCK_START_RE = re.compile(r"^(\d{1,9})([.)])(?=\s|$)|^(?=[-+=>#])")


def _escape_match(match: re.Match[str]) -> str:
    return "\\" + match.group(0)


def code_span(text: str, limit: int = 200) -> str:
    """Untrusted text as an inline code span: shown verbatim (a backslash or ``&lt;`` inside a
    code span is literal, so nothing is escaped), fenced by more backticks than any run inside."""
    text = _cut(" ".join(redact(str(text)).split()), limit)
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{neutralize_mentions(defuse_comments(text))}{pad}{fence}"


def defuse_comments(text: str) -> str:
    """``<!--`` → ``<!`` + zero-width space + ``--``: untrusted text can never carry an HTML
    comment, so it can never forge our hidden markers, even inside a code block."""
    return text.replace("<!--", "<!" + ZWSP + "--")


def code_block(text: str, limit: int = 2000, lang: str = "text") -> str:
    """Untrusted text as a fenced code block: a fence longer than any backtick run inside, so the
    text cannot close it; mentions neutralised (GitHub does not notify from code, but be safe);
    HTML comment openers defused."""
    text = defuse_comments(truncate(str(text), limit, "\n… (truncated)"))
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{neutralize_mentions(text)}\n{fence}"
