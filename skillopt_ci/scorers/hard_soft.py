"""What the benchmarks' scorers share: two numbers per answer, as the benchmarks report them.

``hard`` is pass/fail, ``soft`` partial credit. ``Score.passed`` is always ``hard``;
``Score.value`` is ``hard`` (0 or 1) by default and ``soft`` with the option ``report: soft``. The
feedback names both. Answers are read from the reply by the plain functions below.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from skillopt_ci.scorers.base import Score, Scorer

REPORTS = ("hard", "soft")
VARIANTS = ("official", "reference")
ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)


def last_line(text: str) -> str:
    """The last non-empty line of ``text``, trimmed ("" when there is none)."""
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()
    return ""


@dataclass(frozen=True)
class ReportOptions:
    report: str = "hard"  # the value a Score carries: hard (0/1) or soft (partial credit)


class HardSoft(Scorer):
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
