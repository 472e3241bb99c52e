"""The ``docvqa`` scorer, written from the evaluators' published rules (hard and soft,
:mod:`skillopt_ci.scorers.hard_soft`).

The answer is the text between the last ``<answer>`` and the last ``</answer>``, the tags matched
in any case (by last-occurrence positions: when the last opening tag comes after the last closing
one there is no pair), else the last non-empty line. ``variant: official`` (the default; the
Robust Reading Competition's ANLS script): both sides lower-cased, trimmed and
whitespace-collapsed for the edit distance, which is divided by the longer of the normalised gold
and the answer **as given**; the similarity ``1 - NL`` is kept unless it is below ``1 - tau`` (so
exactly half the characters wrong still scores 0.5). ``variant: reference`` (the method's
evaluator): the distance is divided by the longer normalised side and an answer scores 0 when
``NL >= tau``; two empty strings score 1, one empty side 0. The best over the golds; hard = ANLS
>= 0.999. Pure; a task without golds is an ``InputError``.
"""

from __future__ import annotations

from dataclasses import dataclass

from skillopt_ci.core.task import Task
from skillopt_ci.core.text import quote
from skillopt_ci.scorers.base import Score, expected_strings
from skillopt_ci.scorers.hard_soft import HardSoft, last_line
from skillopt_ci.scorers.match import levenshtein

HARD_ANLS = 0.999


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


@dataclass(frozen=True)
class DocvqaOptions:
    report: str = "hard"
    tau: float = 0.5  # normalised edit distance past which an answer scores 0 (see the variants)
    variant: str = "official"  # official (the RRC ANLS script) | reference (the method's evaluator)


class DocVQAScorer(HardSoft):
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
