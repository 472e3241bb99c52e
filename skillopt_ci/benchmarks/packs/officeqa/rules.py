"""OfficeQA's official answer matching, written from the rules of the benchmark's ``reward.py``.

``official_match(gold, answer, tolerance)`` decides whether an already extracted answer is right
and says why. It is pure and never raises: anything that cannot be read is a wrong answer.

1. **Direct answer.** The answer must be one non-empty line of at most 250 characters. When the
   gold has numbers, the answer must carry as many (year-like numbers 1900–2100 left out unless the
   gold is a year or has words in it; a bracketed gold list also accepts an answer that splits into
   that many items at commas) and no ``<markup>``. When the gold has no number, the answer may
   have none, and must equal the gold once lower-cased, quotes and ``(parentheticals)`` dropped.
2. **Numbers.** Unicode minus becomes ``-``, ``(1,234)`` and ``($5)`` are negative (``(1977)``
   stays a year), currency signs go, thousands commas go, then every ``-?\\d+\\.?\\d*%?`` is a
   number. ``%`` is ignored: ``5%`` equals ``5``. A number's unit is the first of trillion,
   billion (or a lone ``b``), million (``m``), thousand (``k``) found within 20 characters either
   side; values are compared as written (``543 million`` equals ``543``), and two units must be
   equal when both are present. Two values match when ``|gold - answer| / |gold| <= tolerance``
   (a zero gold needs a zero answer).
3. **Matching.** A bracketed gold list ``[a, b, c]`` is compared item by item in order. Other
   golds with several numbers need every number somewhere in the answer; a single number needs
   one matching answer number. Where the gold has words (``March 1977``), the words must also
   appear in the answer (or the answer's words in the gold's). A gold without numbers, or an
   answer without, is compared as text: the cleaned gold must occur in the cleaned answer.
   An answer containing "unable to determine" is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

MAX_ANSWER_CHARS = 250
CONTEXT_CHARS = 20
_CURRENCY = "$£€¥₹¢₩₽"
_AMOUNT = r"\d{1,3}(?:,\d{3})*(?:\.\d+)?|\d+(?:\.\d+)?"
_BRACKETED_AMOUNT = re.compile(rf"\(\s*([{_CURRENCY}])?\s*({_AMOUNT})\s*\)")
_THOUSANDS = re.compile(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d)")
_NUMBER = re.compile(r"-?\d+\.?\d*%?")
_LIST_ITEM = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?%?")
_ONE_LIST = re.compile(r"\[([^\[\]]+)\]")
_MARKUP = re.compile(r"<[^>]*>")
_PARENTHETICAL = re.compile(r"\([^)]*\)")
_UNITS = (
    ("trillion", re.compile(r"\btrillions?\b")),
    ("billion", re.compile(r"\bbillions?\b|\bb\b")),
    ("million", re.compile(r"\bmillions?\b|\bm\b")),
    ("thousand", re.compile(r"\bthousands?\b|\bk\b")),
)
_UNIT_WORDS = re.compile(r"\b(?:trillions?|billions?|millions?|thousands?|hundreds?|percent|percentage)\b|\b%\b")


@dataclass(frozen=True)
class Number:
    """A number as written in a text, with the lower-cased text around it (for its unit)."""

    value: float
    context: str = ""

    @property
    def unit(self) -> str | None:
        return next((name for name, pattern in _UNITS if pattern.search(self.context)), None)


def squash(text: str) -> str:
    """Unicode minus as ``-``, whitespace runs as one space, ends trimmed."""
    return re.sub(r"\s+", " ", text.replace("\u2212", "-")).strip()


def is_year(value: float) -> bool:
    return value == int(value) and 1900 <= value <= 2100


def _signed_amounts(text: str) -> str:
    """Accounting negatives ``(1,234)`` -> ``-1,234`` (a bare year in brackets is left alone),
    then currency signs removed."""

    def negative(match: re.Match[str]) -> str:
        amount = match.group(2)
        if match.group(1) is None and is_year(float(amount.replace(",", ""))):
            return match.group(0)
        return "-" + amount

    return re.sub(f"[{_CURRENCY}]", "", _BRACKETED_AMOUNT.sub(negative, text))


def numbers_in(text: str) -> list[Number]:
    """Every number of ``text`` in order, with its context (rule 2)."""
    flat = _THOUSANDS.sub(lambda m: m.group().replace(",", ""), _signed_amounts(squash(text)))
    found = []
    for match in _NUMBER.finditer(flat):
        start, end = max(0, match.start() - CONTEXT_CHARS), match.end() + CONTEXT_CHARS
        found.append(Number(float(match.group().rstrip("%")), flat[start:end].lower()))
    return found


def words_of(text: str) -> str:
    """What is left of ``text`` once numbers, unit words and punctuation are removed."""
    cleaned = _NUMBER.sub("", squash(text).lower()).replace(",", "")
    cleaned = re.sub(r"[^\w\s]", " ", _UNIT_WORDS.sub("", cleaned))
    return " ".join(cleaned.split())


def has_words(text: str) -> bool:
    return len(words_of(text)) >= 2


def words_agree(gold: str, answer: str) -> bool:
    """The gold's words appear in the answer (or the answer's in the gold's); trivially true for a
    gold of bare numbers."""
    if not gold or not answer:
        return False
    if not has_words(gold):
        return True
    if not has_words(answer):
        return False
    g, a = words_of(gold), words_of(answer)
    return g in a or a in g


def values_match(gold: Number, answer: Number, tolerance: float) -> bool:
    """Same unit (or one without), and within the relative tolerance."""
    g_unit, a_unit = gold.unit, answer.unit
    if g_unit is not None and a_unit is not None and g_unit != a_unit:
        return False
    if gold.value == 0:
        return answer.value == 0
    return abs(gold.value - answer.value) / abs(gold.value) <= tolerance


def drop_years(golds: Sequence[Number], answers: Sequence[Number], gold_text: str) -> list[Number]:
    """The answer's numbers without incidental years, unless the gold is (or names) a year."""
    if not golds:
        return list(answers)
    if len(golds) == 1:
        keep_years = is_year(golds[0].value) or has_words(gold_text)
    else:
        keep_years = any(is_year(g.value) for g in golds)
    return list(answers) if keep_years else [a for a in answers if not is_year(a.value)]


# --- bracketed lists -----------------------------------------------------------------------------


def list_body(text: str) -> str | None:
    """The inside of the text's only ``[...]`` when nothing outside it has a digit."""
    flat = squash(text)
    found = list(_ONE_LIST.finditer(flat))
    if len(found) != 1:
        return None
    outside = flat[: found[0].start()] + flat[found[0].end():]
    return None if re.search(r"\d", outside) else found[0].group(1)


def _list_item(raw: str) -> float | None:
    item = raw.strip()
    if not item or ("," in item and re.search(r"\s,|,\s", item)):
        return None
    item = _signed_amounts(squash(item))
    if not _LIST_ITEM.fullmatch(item):
        return None
    return float(item.rstrip("%").replace(",", ""))


def list_readings(text: str, count: int) -> list[list[float]]:
    """Every way to read ``text`` (or its bracketed body) as ``count`` numbers by joining
    neighbouring comma-separated pieces: ``8,152,260`` as two items is ``[8, 152260]`` or
    ``[8152, 260]``. Distinct readings in order; none for fewer than two items."""
    if count < 2:
        return []
    body = list_body(text) or squash(text)
    pieces = body.split(",")
    if len(pieces) < count:
        return []
    bounds, at = [], 0
    for piece in pieces:
        bounds.append((at, at + len(piece)))
        at += len(piece) + 1
    memo: dict[tuple[int, int], list[list[float]]] = {}

    def read_from(first: int, left: int) -> list[list[float]]:
        if left == 0:
            return [[]] if first == len(pieces) else []
        if (first, left) not in memo:
            out = []
            for last in range(first, len(pieces) - left + 1):
                value = _list_item(body[bounds[first][0]:bounds[last][1]])
                if value is not None:
                    out += [[value, *rest] for rest in read_from(last + 1, left - 1)]
            memo[(first, left)] = out
        return memo[(first, left)]

    distinct: list[list[float]] = []
    for reading in read_from(0, count):
        if reading not in distinct:
            distinct.append(reading)
    return distinct


def gold_list(gold: str, golds: Sequence[Number]) -> list[Number] | None:
    """The gold's numbers when the gold is one bracketed list of at least two numbers."""
    body = list_body(gold)
    if body is None or len(golds) < 2:
        return None
    wanted = [g.value for g in golds]
    return list(golds) if wanted in list_readings(body, len(golds)) else None


def in_order(golds: Sequence[Number], answers: Sequence[Number], tolerance: float) -> bool:
    return len(golds) == len(answers) and all(values_match(g, a, tolerance) for g, a in zip(golds, answers, strict=True))


# --- the decision --------------------------------------------------------------------------------


def _plain(text: str) -> str:
    """Lower-cased, quotes and ``(parentheticals)`` dropped, whitespace collapsed."""
    cleaned = text.strip().lower().strip('"').strip("'")
    return " ".join(_PARENTHETICAL.sub("", cleaned).split())


def not_direct(gold: str, answer: str) -> str | None:
    """Why ``answer`` is not a direct answer of the gold's shape (rule 1), or ``None``."""
    answer = answer.strip()
    if not answer:
        return "the answer is empty"
    if len([line for line in answer.splitlines() if line.strip()]) > 1:
        return "the answer spans several lines"
    if len(answer) > MAX_ANSWER_CHARS:
        return f"the answer is longer than {MAX_ANSWER_CHARS} characters"
    golds, answers = numbers_in(gold), numbers_in(answer)
    if golds:
        answers = drop_years(golds, answers, gold)
        if len(answers) != len(golds):
            listed = gold_list(gold, golds)
            if listed is None or not list_readings(answer, len(listed)):
                return f"the answer has {len(answers)} numbers, the gold {len(golds)}"
        return "the answer has markup around its value" if _MARKUP.search(answer) else None
    if answers:
        return "the answer has numbers, the gold none"
    return None if _plain(gold) == _plain(answer) else "the text differs"


def _list_match(gold: str, answer: str, listed: list[Number], answers: list[Number], tolerance: float) -> bool:
    for reading in list_readings(answer, len(listed)):
        if in_order(listed, [Number(v) for v in reading], tolerance):
            return True
    return in_order(listed, drop_years(listed, answers, gold), tolerance)


def _all_found(gold: str, answer: str, golds: list[Number], answers: list[Number], tolerance: float) -> bool:
    if not any(is_year(g.value) for g in golds):
        answers = [a for a in answers if not is_year(a.value)]
    agree = words_agree(gold, answer)
    return agree and all(any(values_match(g, a, tolerance) for a in answers) for g in golds)


def _one_found(gold: str, answer: str, number: Number, answers: list[Number], tolerance: float) -> bool:
    if not (is_year(number.value) or has_words(gold)):
        answers = [a for a in answers if not is_year(a.value)]
    return any(values_match(number, a, tolerance) for a in answers) and words_agree(gold, answer)


def fuzzy_match(gold: str, answer: str, tolerance: float) -> bool:
    """Rule 3 on a direct answer."""
    if not answer or "unable to determine" in answer.lower():
        return False
    golds, answers = numbers_in(gold), numbers_in(answer)
    if golds and answers:
        listed = gold_list(gold, golds)
        if listed is not None:
            return _list_match(gold, answer, listed, answers, tolerance)
        if len(golds) > 1:
            return _all_found(gold, answer, golds, answers, tolerance)
        return _one_found(gold, answer, golds[0], answers, tolerance)
    return _plain(gold) in _plain(answer)


def official_match(gold: str, answer: str, tolerance: float = 0.0) -> tuple[bool, str]:
    """Whether ``answer`` (the text inside the answer tags) is right for ``gold``, and why not."""
    if not gold.strip():
        return False, "the gold answer is empty"
    problem = not_direct(gold, answer)
    if problem is not None:
        return False, problem
    if fuzzy_match(gold, answer.strip(), tolerance):
        return True, "matches"
    return False, "no match" if numbers_in(gold) else "the text differs"
