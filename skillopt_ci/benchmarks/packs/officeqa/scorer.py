"""The ``officeqa`` scorer: the benchmark's official rules, or the reference system's exact match.

Options: ``variant`` (``official``, the default, or ``reference``), ``tolerance`` (official only:
the relative difference two numbers may have, a fraction in [0, 1]; 0 by default, the paper also
reports 0.001–0.05), ``answer_tag`` (the tag the prompt asks for, ``answer``) and ``report``
(``hard``, the default, or ``soft``: which number ``Score.value`` carries; ``passed`` is always
hard). The feedback names both numbers.

- ``official``: the answer is the text of the **last** ``<FINAL_ANSWER>…</FINAL_ANSWER>`` (the
  official tag, any case), else of the last ``<answer_tag>`` pair (our prompt's tag), else the
  whole reply; it is judged by :func:`~skillopt_ci.benchmarks.packs.officeqa.rules.official_match` (numbers
  with units, tolerance, lists, text). hard = soft = that 0/1 verdict.
- ``reference``: the answer is the text of the **first** ``<answer_tag>`` pair, else the last
  non-empty line. Both sides are normalised (lower-case; commas removed; ASCII punctuation deleted
  except ``.``, ``-`` and ``%``; the words million(s), billion(s), dollar(s) and nominal removed;
  whitespace collapsed). hard = exact match, soft = token F1 (two empty answers score 1).

The two disagree: ``12.50`` vs gold ``12.5`` and ``5.2`` vs ``5.2%`` pass officially and fail the
exact match; ``$1.2 billion`` vs gold ``1.2`` passes both; ``1,2`` vs gold ``12`` passes the exact
match (commas are deleted) and fails officially. An empty output (a rollout that ended without an
answer) scores 0 in both.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, replace

from skillopt_ci.benchmarks.packs.officeqa.rules import official_match
from skillopt_ci.core.task import Task
from skillopt_ci.core.text import quote
from skillopt_ci.scorers.base import Score, expected_strings
from skillopt_ci.scorers.hard_soft import HardSoft, last_line
from skillopt_ci.scorers.match import overlap_f1

_FINAL_ANSWER = re.compile(r"<FINAL_ANSWER>\s*(.*?)\s*</FINAL_ANSWER>", re.IGNORECASE | re.DOTALL)
_KEEP = frozenset("0123456789.-%")
_DROP = frozenset(string.punctuation) - _KEEP
_REFERENCE_WORDS = re.compile(r"\b(?:millions?|billions?|dollars?|nominal)\b")


def _tag(name: str) -> re.Pattern[str]:
    return re.compile(rf"<{re.escape(name)}>(.*?)</{re.escape(name)}>", re.IGNORECASE | re.DOTALL)


def official_answer(text: str, answer_tag: str = "answer") -> str:
    """The last ``<FINAL_ANSWER>`` text, else the last ``<answer_tag>`` text, else ``text``."""
    found = _FINAL_ANSWER.findall(text) or [m.strip() for m in _tag(answer_tag).findall(text)]
    return found[-1].strip() if found else text


def reference_answer(text: str, answer_tag: str = "answer") -> str:
    """The first ``<answer_tag>`` text (trimmed), else the last non-empty line, else ``text`` trimmed."""
    found = _tag(answer_tag).search(text)
    if found:
        return found.group(1).strip()
    return last_line(text) or text.strip()


def reference_normalize(text: str) -> str:
    """The reference system's normalisation (see the module docstring)."""
    kept = "".join(ch for ch in text.lower().strip().replace(",", "") if ch not in _DROP)
    return " ".join(_REFERENCE_WORDS.sub(" ", kept).split())


def reference_scores(answer: str, gold: str) -> tuple[bool, float]:
    """(normalised exact match, token F1) of an extracted answer."""
    pred, ref = reference_normalize(answer), reference_normalize(gold)
    p_tokens, r_tokens = pred.split(), ref.split()
    if not p_tokens or not r_tokens:
        return pred == ref, float(p_tokens == r_tokens)
    return pred == ref, overlap_f1(p_tokens, r_tokens)


@dataclass(frozen=True)
class OfficeQAOptions:
    variant: str = "official"  # official (reward.py's rules) | reference (normalised EM / token F1)
    tolerance: float = 0.0  # official: allowed relative difference of numbers, a fraction in [0, 1]
    answer_tag: str = "answer"  # the tag the suite's prompt asks the answer to be in
    report: str = "hard"  # the value a Score carries: hard (0/1) or soft


class OfficeQAScorer(HardSoft):
    """OfficeQA: ``variant: official`` (default) or ``variant: reference``."""

    name = "officeqa"
    Options = OfficeQAOptions

    def setup(self) -> None:
        super().setup()
        o = self.options
        if not 0.0 <= o.tolerance <= 1.0:
            raise self.error(f'option "tolerance" must be a fraction in [0, 1] (0.01 is 1 %), got {o.tolerance}')
        if o.tolerance and o.variant == "reference":
            raise self.error('option "tolerance" applies to variant official only')
        if not re.fullmatch(r"[A-Za-z_][\w-]*", o.answer_tag):
            raise self.error(f'option "answer_tag" must be a tag name such as answer, got {o.answer_tag!r}')

    def score(self, output: str, task: Task) -> Score:
        gold = expected_strings(task, self.name)[0]
        if self.options.variant == "official":
            answer = official_answer(output, self.options.answer_tag)
            ok, why = official_match(gold, answer, self.options.tolerance)
            hard, soft = ok, float(ok)
            detail = f"{why}: answered {quote(answer)}, expected {quote(gold)}"
        else:
            answer = reference_answer(output, self.options.answer_tag)
            hard, soft = reference_scores(answer, gold)
            detail = f"answered {quote(answer)}, expected {quote(gold)}"
        if not output.strip():
            detail = f"no answer (the rollout ended without one); expected {quote(gold)}"
        score = self.result(hard, soft, detail)
        return replace(score, feedback=f"{self.options.variant}: {score.feedback}")
