"""The scorers of three chat benchmarks, written from their evaluators' published rules.

Each reports two numbers per answer, as the benchmark does: ``hard`` (pass/fail) and ``soft``
(partial credit). ``Score.passed`` is always ``hard``; ``Score.value`` is ``hard`` (0 or 1) by
default and ``soft`` with the option ``report: soft``. The feedback names both.

- ``searchqa``: the answer is the text of the **last** ``<answer>…</answer>`` (any case, may span
  lines), else the last non-empty line, else the whole reply. SQuAD normalisation (lower-case,
  ASCII punctuation deleted, the words a/an/the replaced by a space, whitespace collapsed);
  hard = exact match with any gold, soft = SQuAD token F1, the best over the golds (no common
  token, or an empty side, is F1 0, as in the SQuAD v1.1 / MRQA evaluation).
- ``livemath``, ``variant: reference`` (the default; the method's ``<answer>`` protocol, which the
  imported suites' prompt asks for): the label is read from the last ``<answer>`` (else the last
  non-empty line), upper-cased with trailing ``.``, ``)`` and ``:`` stripped; a valid label is taken
  as is, else an option whose text equals the answer (ignoring case), else the first token if it
  is a valid label. ``variant: official`` (the authors' ``\boxed{X}`` protocol): the **first**
  match of, in order, ``\boxed{X}``, ``boxed{X}``, ``answer is X`` (any case), ``Answer X`` /
  ``Answer: (X)`` (capital A, as the authors match it), and a lone letter ending the reply
  (``Final: A``, ``(A)``, ``A.``); X is one of A–E in any case. The task carries its options
  (``choices``: ``[{label, text}]``); hard = soft = the label matches.
- ``docvqa``: the answer is the text between the last ``<answer>`` and the last ``</answer>``, the
  tags matched in any case (by last-occurrence positions: when the last opening tag comes after
  the last closing one there is no pair), else the last non-empty line. ``variant: official`` (the
  default; the Robust Reading Competition's ANLS script): both sides lower-cased, trimmed and
  whitespace-collapsed for the edit distance, which is divided by the longer of the normalised
  gold and the answer **as given**; the similarity ``1 - NL`` is kept unless it is below
  ``1 - tau`` (so exactly half the characters wrong still scores 0.5). ``variant: reference`` (the
  method's evaluator): the distance is divided by the longer normalised side and an answer scores
  0 when ``NL >= tau``; two empty strings score 1, one empty side 0. The best over the golds;
  hard = ANLS >= 0.999.

All functions here are pure; a task without golds is an ``InputError`` at the task's source.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.task import Task
from skillopt_ci.core.text import quote
from skillopt_ci.scorers.base import Score, Scorer, describe_expected, expected_strings
from skillopt_ci.scorers.match import levenshtein

REPORTS = ("hard", "soft")
HARD_ANLS = 0.999

_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)
_SQUAD_PUNCT = frozenset(string.punctuation)
_SQUAD_ARTICLES = re.compile(r"\b(a|an|the)\b")


def last_line(text: str) -> str:
    """The last non-empty line of ``text``, trimmed ("" when there is none)."""
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()
    return ""


# --- SearchQA ------------------------------------------------------------------------------------


def searchqa_answer(text: str) -> str:
    """The last ``<answer>`` tag's text (trimmed), else the last non-empty line, else ``text``."""
    found = _ANSWER_TAG.findall(text)
    if found:
        return found[-1].strip()
    return last_line(text) or text


def squad_normalize(s: str) -> str:
    """SQuAD's answer normalisation: lower-case, ASCII punctuation out, articles out, spaces collapsed."""
    s = "".join(ch for ch in s.lower() if ch not in _SQUAD_PUNCT)
    s = _SQUAD_ARTICLES.sub(" ", s)
    return " ".join(s.split())


def squad_f1(prediction: str, gold: str) -> float:
    """SQuAD v1.1 token F1 of two answers after :func:`squad_normalize`."""
    pred, ref = squad_normalize(prediction).split(), squad_normalize(gold).split()
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def searchqa_scores(answer: str, golds: Sequence[str]) -> tuple[bool, float]:
    """(exact match with any gold, best token F1) of an extracted answer."""
    norm = squad_normalize(answer)
    hard = any(norm == squad_normalize(g) for g in golds)
    return hard, max(squad_f1(answer, g) for g in golds)


# --- LiveMathematicianBench ----------------------------------------------------------------------


def livemath_answer(text: str) -> str:
    """The last ``<answer>`` tag's text (trimmed), else the last non-empty line."""
    found = _ANSWER_TAG.findall(text)
    return found[-1].strip() if found else last_line(text)


_OFFICIAL_LABEL = (
    re.compile(r"\\boxed\{([A-Ea-e])\}"),
    re.compile(r"boxed\{([A-Ea-e])\}"),
    re.compile(r"answer is[:\s]*([A-Ea-e])", re.IGNORECASE),
    re.compile(r"Answer[:\s]*\(?([A-Ea-e])\)?"),
)
_OFFICIAL_LAST = re.compile(r"\b([A-Ea-e])\b\s*[.)]?\s*$")


def livemath_official_label(text: str) -> str | None:
    """The label the authors' protocol reads from a whole reply (module docstring), or None."""
    for pattern in _OFFICIAL_LABEL:
        found = pattern.search(text)
        if found:
            return found.group(1).upper()
    found = _OFFICIAL_LAST.search(text.strip())
    return found.group(1).upper() if found else None


def _label_form(s: str) -> str:
    return s.strip().upper().rstrip(".):").strip()


def livemath_label(answer: str, options: Sequence[tuple[str, str]]) -> str | None:
    """The option label ``answer`` (already extracted) names, or ``None``.

    ``options`` are ``(label, text)`` pairs. In order: the answer itself as a label (upper-cased,
    trailing ``.``, ``)``, ``:`` stripped); an option whose text equals the answer ignoring case;
    the answer's first token as a label.
    """
    labels = {label.upper(): label for label, _ in options}
    form = _label_form(answer)
    if form in labels:
        return labels[form]
    wanted = answer.strip().casefold()
    for label, text in options:
        if wanted and text.strip().casefold() == wanted:
            return label
    first = answer.split()
    if first and _label_form(first[0]) in labels:
        return labels[_label_form(first[0])]
    return None


# --- DocVQA --------------------------------------------------------------------------------------


def docvqa_answer(text: str) -> str:
    """The text between the last ``<answer>`` and the last ``</answer>`` (either in any case)
    when the opening tag comes first, else the last non-empty line."""
    lower = text.lower()  # ASCII tags: lower() keeps every position of ``text``'s tags
    start, end = lower.rfind("<answer>"), lower.rfind("</answer>")
    if start != -1 and end > start:
        return text[start + len("<answer>"):end].strip()
    return last_line(text)


def docvqa_normalize(s: str) -> str:
    """DocVQA's normalisation: lower-case, trim, collapse whitespace; punctuation is kept."""
    return " ".join(s.lower().split())


def anls_score(prediction: str, gold: str, tau: float = 0.5, variant: str = "official") -> float:
    """One answer's normalised Levenshtein similarity, by ``variant`` (see the module docstring)."""
    a, b = docvqa_normalize(prediction), docvqa_normalize(gold)
    if variant == "official":
        longest = max(len(b), len(prediction))
        similarity = 1.0 if longest == 0 else 1.0 - levenshtein(a, b) / longest
        return 0.0 if similarity < 1.0 - tau else similarity
    longest = max(len(a), len(b))
    if longest == 0:
        return 1.0
    distance = levenshtein(a, b) / longest
    return 0.0 if distance >= tau else 1.0 - distance


# --- scorers -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReportOptions:
    report: str = "hard"  # the value a Score carries: hard (0/1) or soft (partial credit)


VARIANTS = ("official", "reference")


@dataclass(frozen=True)
class LivemathOptions:
    report: str = "hard"
    variant: str = "reference"  # reference (the method's <answer> protocol) | official (\boxed{X})


@dataclass(frozen=True)
class DocvqaOptions:
    report: str = "hard"
    tau: float = 0.5  # normalised edit distance past which an answer scores 0 (see the variants)
    variant: str = "official"  # official (the RRC ANLS script) | reference (the method's evaluator)


class _HardSoft(Scorer):
    """A scorer with a hard and a soft number; ``report`` picks the one ``value`` carries."""

    Options: ClassVar[type] = ReportOptions  # or a subclass's options with a ``report`` field

    def setup(self) -> None:
        if self.options.report not in REPORTS:
            raise self.error(f'option "report" must be hard or soft, got {self.options.report!r}')
        variant = getattr(self.options, "variant", "official")
        if variant not in VARIANTS:
            raise self.error(f'option "variant" must be official or reference, got {variant!r}')

    def result(self, hard: bool, soft: float, detail: str) -> Score:
        value = soft if self.options.report == "soft" else float(hard)
        return Score(value, hard, f"hard {int(hard)}, soft {soft:.2f}: {detail}")


class SearchQAScorer(_HardSoft):
    """SearchQA: exact match after SQuAD normalisation (hard), token F1 (soft)."""

    name = "searchqa"

    def score(self, output: str, task: Task) -> Score:
        golds = expected_strings(task, self.name)
        answer = searchqa_answer(output)
        hard, soft = searchqa_scores(answer, golds)
        if hard:
            return self.result(hard, soft, f"answered {quote(answer)}")
        return self.result(hard, soft, f"{describe_expected(golds)}, answered {quote(answer)}")


class LiveMathScorer(_HardSoft):
    """LiveMathematicianBench: the chosen option label equals the expected one."""

    name = "livemath"
    Options = LivemathOptions

    def score(self, output: str, task: Task) -> Score:
        options = task_options(task, self.name)
        expected = expected_strings(task, self.name)[0]
        if expected not in {label for label, _ in options}:
            raise InputError(f'task "{task.id}": expected {quote(expected)} is not one of the option labels '
                             f"{[label for label, _ in options]}", where=task.source or None)
        if self.options.variant == "official":
            answer = output
            got = livemath_official_label(output)
        else:
            answer = livemath_answer(output)
            got = livemath_label(answer, options)
        ok = got == expected
        if got is None:
            detail = f"no option label in the answer {quote(answer)}; expected {expected}"
        else:
            detail = f"answered {got}, expected {expected}"
        return self.result(ok, float(ok), detail)


def task_options(task: Task, scorer: str) -> list[tuple[str, str]]:
    """The task's ``choices`` as (label, text) pairs; ``InputError`` when missing or malformed."""
    raw: Any = task.fields.get("choices")
    ok = isinstance(raw, list) and raw and all(
        isinstance(c, dict) and isinstance(c.get("label"), str) and isinstance(c.get("text"), str) for c in raw
    )
    if not ok:
        raise InputError(f'task "{task.id}": scorer "{scorer}" needs "choices", a list of {{label, text}} objects',
                         where=task.source or None)
    return [(c["label"], c["text"]) for c in raw]


class DocVQAScorer(_HardSoft):
    """DocVQA: ANLS (soft), ANLS >= 0.999 (hard)."""

    name = "docvqa"
    Options = DocvqaOptions

    def setup(self) -> None:
        super().setup()
        if not 0.0 < self.options.tau <= 1.0:
            raise self.error(f"tau must be in (0, 1], got {self.options.tau}")

    def score(self, output: str, task: Task) -> Score:
        golds = expected_strings(task, self.name)
        answer = docvqa_answer(output)
        soft, best = max((anls_score(answer, g, self.options.tau, self.options.variant), g) for g in golds)
        hard = soft >= HARD_ANLS
        return self.result(hard, soft, f"ANLS against {quote(best)}, answered {quote(answer)}")
