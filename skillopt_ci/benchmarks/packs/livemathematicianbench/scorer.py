"""The ``livemath`` scorer, written from the published rules (hard and soft,
:mod:`skillopt_ci.scorers.hard_soft`; here they are equal: the label matches).

``variant: reference`` (the default; the method's ``<answer>`` protocol, which the imported
suites' prompt asks for): the label is read from the last ``<answer>`` (else the last non-empty
line), upper-cased with trailing ``.``, ``)`` and ``:`` stripped; a valid label is taken as is,
else an option whose text equals the answer (ignoring case), else the first token if it is a valid
label. ``variant: official`` (the authors' ``\\boxed{X}`` protocol): the **first** match of, in
order, ``\\boxed{X}``, ``boxed{X}``, ``answer is X`` (any case), ``Answer X`` / ``Answer: (X)``
(capital A, as the authors match it), and a lone letter ending the reply (``Final: A``, ``(A)``,
``A.``); X is one of A–E in any case. The task carries its options (``choices``:
``[{label, text}]``). Pure; a task without golds or choices is an ``InputError``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.task import Task
from skillopt_ci.core.text import quote
from skillopt_ci.scorers.base import Score, expected_strings
from skillopt_ci.scorers.hard_soft import ANSWER_TAG, HardSoft, last_line


def livemath_answer(text: str) -> str:
    """The last ``<answer>`` tag's text (trimmed), else the last non-empty line."""
    found = ANSWER_TAG.findall(text)
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


@dataclass(frozen=True)
class LivemathOptions:
    report: str = "hard"
    variant: str = "reference"  # reference (the method's <answer> protocol) | official (\boxed{X})


class LiveMathScorer(HardSoft):
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
