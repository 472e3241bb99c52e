"""Matching functions behind the text scorers: plain, pure, reusable."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from skillopt_ci.scorers.normalize import normalize_text, tokens


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions each cost 1)."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def overlap_f1(pred: Sequence[str], ref: Sequence[str]) -> float:
    """Token F1 of two token lists: the harmonic mean of the shared tokens' precision and recall
    (0 when they share none, so also when a side is empty). Each scorer tokenises its own way."""
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def f1(prediction: str, reference: str) -> float:
    """SQuAD token F1 after :func:`tokens` normalisation; two empty strings score 1."""
    pred, ref = tokens(prediction), tokens(reference)
    return overlap_f1(pred, ref) if pred and ref else float(pred == ref)


def anls(prediction: str, reference: str, tau: float = 0.5) -> float:
    """DocVQA's normalised Levenshtein similarity: ``1 - NL`` when ``NL < tau``, else 0.

    Both sides are case-folded with whitespace collapsed, as in the DocVQA evaluation.
    """
    a = normalize_text(prediction, case=True)
    b = normalize_text(reference, case=True)
    longest = max(len(a), len(b))
    if longest == 0:
        return 1.0
    if abs(len(a) - len(b)) / longest >= tau:  # the distance is at least the length gap
        return 0.0
    nl = levenshtein(a, b) / longest
    return 1.0 - nl if nl < tau else 0.0


_DECORATION = "*_`'\"()[]{}.:;!,? \t\n"
_OPEN = "*_`'\"(["


def extract_choice(text: str, labels: Sequence[str]) -> str | None:
    """The multiple-choice label ``text`` answers with, as spelled in ``labels``, or ``None``.

    In order of trust: the whole output is a label (``"B"``, ``"(b)"``, ``"**D**"``); the
    last answer phrase (``"Answer: C"``, ``"the answer is B"``, ``"the correct option is (B)"``); a label opening the
    output (``"B) Paris"``, ``"C. ..."``); the last marked label (``(b)``, ``[B]``, ``**B**``);
    a single distinct bare label written in its own case. A bare one-letter label in the wrong
    case is not a label (``"a"`` is an article) unless it is the whole output or marked.
    """
    canon = {label.casefold(): label for label in labels}
    whole = text.strip().strip(_DECORATION)
    if whole.casefold() in canon:
        return canon[whole.casefold()]
    alt = "|".join(re.escape(x) for x in sorted(labels, key=len, reverse=True))
    label = rf"(?<!\w)(?P<label>{alt})(?!\w)"

    def pick(m: re.Match[str], marked: bool) -> str | None:
        found = m["label"]
        if marked or found in labels or len(found) > 1:  # only one letter can be an article
            return canon[found.casefold()]
        return None

    answer = re.compile(
        rf"(?:\banswer\b(?:\s+is)?|\b(?:option|choice)\s+is)\s*[:=\-]?\s*"
        rf"(?P<open>[*_`'\"(\[]*)\s*{label}",
        re.IGNORECASE,
    )
    for m in reversed(list(answer.finditer(text))):
        if (found := pick(m, bool(m["open"]))) is not None:
            return found
    start = re.compile(rf"^\s*[*_(\[]*\s*{label}\s*[*_)\].:]", re.IGNORECASE)
    if head := start.match(text):
        return canon[head["label"].casefold()]
    marked = re.compile(
        rf"\(\s*(?P<p>{alt})\s*\)|\[\s*(?P<b>{alt})\s*\]|\*\*\s*(?P<s>{alt})\s*\*\*",
        re.IGNORECASE,
    )
    hits = [m["p"] or m["b"] or m["s"] for m in marked.finditer(text)]
    if hits:
        return canon[hits[-1].casefold()]
    bare = {m["label"] for m in re.finditer(label, text)} & set(labels)
    return bare.pop() if len(bare) == 1 else None
