"""The ``searchqa`` scorer, written from the evaluator's published rules (hard and soft,
:mod:`skillopt_ci.scorers.hard_soft`).

The answer is the text of the **last** ``<answer>…</answer>`` (any case, may span lines), else the
last non-empty line, else the whole reply. SQuAD normalisation (lower-case, ASCII punctuation
deleted, the words a/an/the replaced by a space, whitespace collapsed); hard = exact match with
any gold, soft = SQuAD token F1, the best over the golds (no common token, or an empty side, is
F1 0, as in the SQuAD v1.1 / MRQA evaluation). Pure; a task without golds is an ``InputError``.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

from skillopt_ci.core.task import Task
from skillopt_ci.core.text import quote
from skillopt_ci.scorers.base import Score, describe_expected, expected_strings
from skillopt_ci.scorers.hard_soft import ANSWER_TAG, HardSoft, last_line
from skillopt_ci.scorers.match import overlap_f1

_SQUAD_PUNCT = frozenset(string.punctuation)
_SQUAD_ARTICLES = re.compile(r"\b(a|an|the)\b")


def searchqa_answer(text: str) -> str:
    """The last ``<answer>`` tag's text (trimmed), else the last non-empty line, else ``text``."""
    found = ANSWER_TAG.findall(text)
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
    return overlap_f1(squad_normalize(prediction).split(), squad_normalize(gold).split())


def searchqa_scores(answer: str, golds: Sequence[str]) -> tuple[bool, float]:
    """(exact match with any gold, best token F1) of an extracted answer."""
    norm = squad_normalize(answer)
    hard = any(norm == squad_normalize(g) for g in golds)
    return hard, max(squad_f1(answer, g) for g in golds)


class SearchQAScorer(HardSoft):
    """SearchQA: exact match after SQuAD normalisation (hard), token F1 (soft)."""

    name = "searchqa"

    def score(self, output: str, task: Task) -> Score:
        golds = expected_strings(task, self.name)
        answer = searchqa_answer(output)
        hard, soft = searchqa_scores(answer, golds)
        if hard:
            return self.result(hard, soft, f"answered {quote(answer)}")
        return self.result(hard, soft, f"{describe_expected(golds)}, answered {quote(answer)}")
