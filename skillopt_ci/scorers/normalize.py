"""Text normalisation and number parsing: plain functions, no scorer state."""

from __future__ import annotations

import re
import string
import unicodedata
from typing import Literal

_TYPOGRAPHY = str.maketrans(
    {
        "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'",
        "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"',
        "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-",
        "\u2212": "-",
        "\u200b": None, "\u200c": None, "\u200d": None, "\ufeff": None,
    }
)  # fmt: skip
_ARTICLES = re.compile(r"\b(?:a|an|the)\b", re.IGNORECASE)
_ASCII_PUNCT = set(string.punctuation)


def normalize_text(
    s: str,
    *,
    case: bool = False,
    whitespace: bool = True,
    punctuation: bool = False,
    articles: bool = False,
    unicode: bool = True,
) -> str:
    """Normalise ``s``; each flag switches one step on.

    - ``unicode``: NFKC, curly quotes to straight, dashes and the minus sign to ``-``,
      zero-width characters removed;
    - ``case``: fold case (``"Paris"`` → ``"paris"``);
    - ``punctuation``: remove punctuation and ASCII symbols (SQuAD style: ``"U.S."`` → ``"US"``);
    - ``articles``: remove the English articles *a*, *an*, *the*;
    - ``whitespace``: collapse whitespace runs to one space and trim the ends.
    """
    if unicode:
        s = unicodedata.normalize("NFKC", s).translate(_TYPOGRAPHY)
    if case:
        s = s.casefold()
    if punctuation:
        s = "".join(
            ch
            for ch in s
            if ch not in _ASCII_PUNCT and not unicodedata.category(ch).startswith("P")
        )
    if articles:
        s = _ARTICLES.sub(" ", s)
    if whitespace:
        s = " ".join(s.split())
    return s


def tokens(s: str) -> list[str]:
    """SQuAD-style tokens: case folded, punctuation and articles removed, split on whitespace."""
    return normalize_text(s, case=True, punctuation=True, articles=True).split()


_NUMBER = re.compile(
    r"""
    (?<![^\W_]|\.)                   # not glued to a preceding letter, digit or dot
    (?P<sign>[-+])?
    (?:[$€£¥₹]\s?(?P<sign2>[-+])?)?  # currency symbol, e.g. -$5 or $-5
    (?P<num>
        \d{1,3}(?:,\d{3})+(?:\.\d+)?  # 1,234,567.89
      | \d+(?:\.\d+)?
      | \.\d+
    )
    (?:[eE](?P<exp>[-+]?\d+))?
    (?:\s?/\s?(?P<den>\d+)(?![.,]?\d))?
    """,
    re.VERBOSE,
)


def find_numbers(s: str) -> list[float]:
    """Every number in ``s``, in order (see :func:`parse_number` for what counts)."""
    text = normalize_text(s, whitespace=False)
    found = []
    for m in _NUMBER.finditer(text):
        exponent = f"e{m['exp']}" if m["exp"] is not None else ""
        value = float(m["num"].replace(",", "") + exponent)  # 1e999 is inf, not OverflowError
        if m["den"] is not None and "." not in m["num"] and m["exp"] is None:
            if int(m["den"]) == 0:
                continue
            value /= int(m["den"])
        if "-" in (m["sign"] or "") + (m["sign2"] or ""):
            value = -value
        found.append(value)
    return found


def parse_number(s: str | int | float, which: Literal["last", "first"] = "last") -> float | None:
    """The last (or first) number in ``s``, or ``None`` when there is none.

    Understands signs (including the Unicode minus), currency symbols (``$1,234.50``), thousands
    separators (``1,234,567``), decimals (``.5``), scientific notation (``6.02e23``) and simple
    fractions (``3/4`` → 0.75). Units and a percent sign are ignored: ``"45%"`` → 45.0,
    ``"12 kg"`` → 12.0. A number glued to a letter (``"x2"``, ``"H2O"``) is not a number.
    A ``-`` followed by a space is a list bullet, not a sign.
    """
    if isinstance(s, bool):
        return None
    if isinstance(s, (int, float)):
        return float(s)
    numbers = find_numbers(s)
    if not numbers:
        return None
    return numbers[-1] if which == "last" else numbers[0]
