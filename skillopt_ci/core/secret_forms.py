"""Where a secret hides in text on its way out, and how to find every place. Pure.

A key that a model, a provider or a tool echoes rarely stays in its own spelling: a JSON writer
escapes it (``\\/``, ``\\u0073``), a markdown or HTML renderer escapes it (``\\_``, ``&amp;``), a
URL carries it percent-encoded (``%2F``, ``+``), a log or a MIME encoder wraps it over lines with
indentation, and base64 hides it entirely. Two halves find all of those:

- :func:`needles` (once per secret, when it is registered): the literal strings that stand for
  the secret once text is decoded. The secret itself with any line break removed (and with
  ``+`` for each space, as form-encoding writes it), and the stable
  inner part of its base64 encodings: standard and URL-safe alphabets, and each of the three
  alignments the secret can have inside a longer base64 stream (0, 1 or 2 bytes before it). The
  characters that depend on the neighbouring bytes are left out, so the needle matches whatever
  surrounds the secret.
- :func:`find_spans` (on every text): the text is read through each *lens* whose marker it holds
  (backslash escapes, HTML character references, percent-encoding) and through all of them in a
  row, each view with its line breaks and indentation removed, and every needle is looked for in
  every view. A hit is mapped back to the characters of the original text it came from, so
  masking replaces exactly the encoded secret (escapes and inserted line breaks included).

Cost: a view is built with its offset map only for a text that has a hit; texts without one cost
a few decoding passes and substring searches. Nothing here knows which secrets exist (see
:mod:`skillopt_ci.core.redact`).
"""

from __future__ import annotations

import base64
import functools
import html.entities
import re
from collections.abc import Callable, Iterable, Sequence

# Python's ``str.splitlines`` separators: a superset of those a log, a terminal or the runner
# breaks lines at. Indentation around a break is part of it (a folded or wrapped line).
_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_BREAK = re.compile(rf"(?:[ \t]*(?:\r\n|[{_BREAKS}])[ \t]*)+")

_BACKSLASH = re.compile(r"\\(?:u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2})|(.))", re.DOTALL)
_CONTROL = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}
_ASIDE = "\ue000\ue001\ue002\ue003\U000f0000"  # private-use: one is missing from any real text
_COMMON = (("\\n", "\n"), ('\\"', '"'), ("\\t", "\t"), ("\\r", "\r"), ("\\/", "/"))
_ENTITY = re.compile(r"&(?:#([0-9]{1,7});?|#[xX]([0-9a-fA-F]{1,6});?|([A-Za-z][A-Za-z0-9]{1,31};))")
# One percent-encoded character: an ASCII byte, or a UTF-8 lead byte with its continuation bytes.
# (``+`` for a space is a needle instead: base64 streams are full of ``+`` and mean no space.)
_PERCENT = re.compile(r"%(?:[0-7][0-9a-fA-F]|[c-fC-F][0-9a-fA-F](?:%[89abAB][0-9a-fA-F]){1,3})")

Span = tuple[int, int]
WINDOW = 1 << 16
OVERLAP = 1 << 12  # longer than any encoded form of a key (a key fully \u-escaped is 6 × its length)


def needles(secret: str) -> tuple[str, ...]:
    """The literal strings that stand for ``secret`` in decoded, joined text (see module doc)."""
    joined = _BREAK.sub("", secret)
    found = [joined, joined.replace(" ", "+")]  # form-encoding writes a space as "+"
    data = joined.encode("utf-8")
    for before in (0, 1, 2):
        encoded = base64.b64encode(b"\0" * before + data).decode("ascii")
        # Character i of the stream holds bits [6i, 6i+6): keep those wholly inside the secret.
        inner = encoded[-(-8 * before // 6): 8 * (before + len(data)) // 6]
        found += [inner, inner.replace("+", "-").replace("/", "_")]
    return tuple(dict.fromkeys(n for n in found if n))


def _unbackslash(match: re.Match[str]) -> str:
    hex4, hex2, char = match.groups()
    if hex4 or hex2:
        return chr(int(hex4 or hex2, 16))
    return _CONTROL.get(char, char)


def _unbackslash_fast(text: str) -> str:
    """``_BACKSLASH.sub(_unbackslash, text)``, mostly in C: a JSON line holds an escape for each
    quote and line break of its strings. Escaped backslashes are set aside first (a run of
    backslashes pairs up from its left, as the tokenizer pairs them); then every backslash left
    starts an escape."""
    aside = next((c for c in _ASIDE if c not in text), None)
    if aside is None:  # a text made to hold them all
        return _BACKSLASH.sub(_unbackslash, text)
    text = text.replace("\\\\", aside)
    for escape, char in _COMMON:
        text = text.replace(escape, char)
    if "\\" in text:  # rarer escapes (\u0073): decoded piece by piece, they may spell ``aside``
        return "\\".join(_BACKSLASH.sub(_unbackslash, piece) for piece in text.split(aside))
    return text.replace(aside, "\\")


def _unentity(match: re.Match[str]) -> str:
    decimal, hexa, name = match.groups()
    if name:
        return html.entities.html5.get(name, match.group(0))
    code = int(decimal, 10) if decimal else int(hexa, 16)
    return chr(code) if code <= 0x10FFFF else match.group(0)


def _unpercent(match: re.Match[str]) -> str:
    return _percent_token(match.group(0))


@functools.lru_cache(maxsize=4096)
def _percent_token(token: str) -> str:
    return bytes.fromhex(token.replace("%", "")).decode("utf-8", "replace")


Lens = tuple[str, re.Pattern[str], Callable[[re.Match[str]], str], Callable[[str], str]]
# (marker, token pattern, token decoder, the same decoding of a whole text), in the order they
# compose: escapes are undone outside in.
_LENSES: tuple[Lens, ...] = (
    ("\\", _BACKSLASH, _unbackslash, _unbackslash_fast),
    ("&", _ENTITY, _unentity, lambda text: _ENTITY.sub(_unentity, text)),
    ("%", _PERCENT, _unpercent, lambda text: _PERCENT.sub(_unpercent, text)),
)


def _chains(text: str, singly: bool) -> list[tuple[Lens, ...]]:
    """The lens sequences worth reading ``text`` through: none, all whose marker it holds, and
    (``singly``) each of those alone."""
    present = tuple(lens for lens in _LENSES if lens[0] in text)
    if not present:
        return [()]
    if singly and len(present) > 1:
        return [(), *((lens,) for lens in present), present]
    return [(), present]


def needs_single_lenses(wanted: Iterable[str]) -> bool:
    """Whether a needle holds a lens marker: then decoding another lens's tokens could spell it
    differently, and each lens is also read alone. Keys rarely do; the common case reads a text
    twice (as it is, and with everything decoded), not five times."""
    return any(lens[0] in needle for needle in wanted for lens in _LENSES)


def _join(text: str) -> str:
    """``_BREAK.sub("", text)`` up to blanks at the ends of ``text`` (which no needle has), in C:
    ``splitlines`` breaks at exactly the characters ``_BREAK`` removes."""
    lines = text.splitlines()
    if len(lines) <= 1:
        return lines[0] if lines else text
    return "".join([line.strip(" \t") for line in lines])


def _view(text: str, chain: Sequence[Lens]) -> str:
    for lens in chain:
        text = lens[3](text)
    return _join(text)


def find_spans(text: str, wanted: Iterable[str], *, singly: bool = True) -> list[Span]:
    """The spans of ``text`` (start, end), merged and in order, that read as one of ``wanted``
    through some view of it. ``singly=False`` (see :func:`needs_single_lenses`) skips reading
    through each lens alone. A long text (an HTML report's data) is read in overlapping windows,
    so that mapping a hit back never needs an index per character of the whole text."""
    wanted = tuple(wanted)
    if len(text) <= WINDOW + OVERLAP:
        return _find(text, wanted, singly)
    spans: list[Span] = []
    for start in range(0, len(text), WINDOW):
        found = _find(text[start:start + WINDOW + OVERLAP], wanted, singly)
        spans += [(begin + start, end + start) for begin, end in found]
    return _merge(spans)


def _find(text: str, wanted: tuple[str, ...], singly: bool) -> list[Span]:
    spans: list[Span] = []
    for chain in _chains(text, singly):
        view = _view(text, chain)
        hits = [n for n in wanted if n in view]
        if hits:
            spans += _spans_in(text, chain, hits)
    return _merge(spans)


def _mapped_view(text: str, chain: Sequence[Lens]) -> tuple[str, list[int], list[int]]:
    """:func:`_view` with, for each character of the view, the span of ``text`` it comes from."""
    view, starts, ends = text, list(range(len(text))), list(range(1, len(text) + 1))
    for _, pattern, decode, _whole in chain:
        view, starts, ends = _mapped(view, starts, ends, pattern, decode)
    return _mapped_join(view, starts, ends)


def _spans_in(text: str, chain: Sequence[Lens], hits: Sequence[str]) -> list[Span]:
    """The original spans of every occurrence of ``hits`` in the view ``chain`` gives."""
    view, starts, ends = _mapped_view(text, chain)
    found = []
    for needle in hits:
        at = view.find(needle)
        while at >= 0:
            found.append((starts[at], ends[at + len(needle) - 1]))
            at = view.find(needle, at + 1)
    return found


def _mapped(text: str, starts: list[int], ends: list[int], pattern: re.Pattern[str],
            decode: Callable[[re.Match[str]], str]) -> tuple[str, list[int], list[int]]:
    """``pattern.sub(decode, text)`` with, for each character out, the span of the original text
    it comes from (``starts``/``ends`` give that span for each character of ``text``)."""
    out: list[str] = []
    new_starts: list[int] = []
    new_ends: list[int] = []
    pos = 0
    for match in pattern.finditer(text):
        begin, end = match.span()
        out.append(text[pos:begin])
        new_starts += starts[pos:begin]
        new_ends += ends[pos:begin]
        decoded = decode(match)
        out.append(decoded)
        new_starts += [starts[begin]] * len(decoded)
        new_ends += [ends[end - 1]] * len(decoded)
        pos = end
    out.append(text[pos:])
    new_starts += starts[pos:]
    new_ends += ends[pos:]
    return "".join(out), new_starts, new_ends


def _mapped_join(text: str, starts: list[int], ends: list[int]) -> tuple[str, list[int], list[int]]:
    """:func:`_join` with the map of :func:`_mapped` (line by line: a regex for blanks around
    breaks would try every position)."""
    out: list[str] = []
    new_starts: list[int] = []
    new_ends: list[int] = []
    pos = 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip(_BREAKS)  # splitlines ends each line at exactly one break (or CRLF)
        begin = pos + len(body) - len(body.lstrip(" \t"))
        kept = body.strip(" \t")
        out.append(kept)
        new_starts += starts[begin:begin + len(kept)]
        new_ends += ends[begin:begin + len(kept)]
        pos += len(line)
    return "".join(out), new_starts, new_ends


def open_tail(text: str, wanted: Iterable[str], *, singly: bool = True, reach: int = OVERLAP) -> int:
    """Where the end of ``text`` may be the beginning of one of ``wanted``, in some view of it:
    the start of the longest proper prefix of a needle that a view ends with (line breaks and
    blanks after it included, a wrapped key goes on on the next line), or of an escape that is
    not finished yet (``\\u00``, ``%c3``, ``&#1``). ``len(text)`` when nothing is open. Only the
    last ``reach`` characters are read: no needle in any encoding is longer."""
    start = max(0, len(text) - reach)
    region = text[start:]
    body = region[:_unfinished_at(region)]
    found = len(body)
    index = _prefix_index(tuple(wanted))
    for chain in _chains(body, singly):
        cheap = _view(body, chain).rstrip(" \t")  # the mapped view's end, without the map
        if _open_at(cheap, index) is None:
            continue
        view, starts, _ = _mapped_view(body, chain)
        at = _open_at(view, index)
        if at is not None:
            found = min(found, starts[at])
    return start + found


# An escape a later write may finish (generous: holding a finished one back only delays it).
_UNFINISHED = re.compile(r"\\(?:[ux][0-9a-fA-F]{0,3})?|(?:%[0-9a-fA-F]{0,2})+|&#?[xX]?[0-9A-Za-z]{0,31}")


def _unfinished_at(text: str) -> int:
    """Where an escape that the next characters may finish starts at the end of ``text``."""
    tail = max(0, len(text) - 40)
    marks = [at for at in (text.rfind(m, tail) for m in "\\%&") if at >= 0]
    for at in sorted(marks) if marks else ():
        if _UNFINISHED.fullmatch(text, at):
            return at
    return len(text)


def _open_at(view: str, index: dict[str, tuple[str, ...]]) -> int | None:
    """The earliest index from which ``view``'s end is a proper prefix of a needle."""
    for prefix in index.get(view[-1], ()) if view else ():
        if view.endswith(prefix):
            return len(view) - len(prefix)
    return None


@functools.lru_cache(maxsize=64)
def _prefix_index(wanted: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Every proper prefix of every needle, by its last character, longest first: a view can
    only end with a prefix whose last character is its own."""
    found: dict[str, set[str]] = {}
    for needle in wanted:
        for k in range(1, len(needle)):
            found.setdefault(needle[k - 1], set()).add(needle[:k])
    return {char: tuple(sorted(prefixes, key=len, reverse=True)) for char, prefixes in found.items()}


def _merge(spans: list[Span]) -> list[Span]:
    merged: list[Span] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def mask_spans(text: str, spans: Sequence[Span], mask: str) -> str:
    """``text`` with each (merged, ordered) span replaced by ``mask``."""
    out, pos = [], 0
    for start, end in spans:
        out += [text[pos:start], mask]
        pos = end
    out.append(text[pos:])
    return "".join(out)
