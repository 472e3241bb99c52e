"""Numeric scorer: the last number in the output is close to the expected number."""

from __future__ import annotations

import math
from dataclasses import dataclass

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.task import Task
from skillopt_ci.core.text import quote
from skillopt_ci.scorers.base import Score, Scorer, require_expected
from skillopt_ci.scorers.normalize import parse_number


@dataclass(frozen=True)
class NumericOptions:
    tolerance: float = 1e-6  # absolute
    relative_tolerance: float = 0.0  # fraction of |expected|; the looser of the two wins


def format_number(x: float) -> str:
    """``42`` rather than ``42.0``; full precision otherwise."""
    if x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(x)


class Numeric(Scorer):
    """Passes when ``|got - expected| <= max(tolerance, relative_tolerance * |expected|)``.

    ``got`` is the last number in the output (see :func:`parse_number`: units, currency,
    thousands separators and ``%`` are ignored). ``expected`` is a number, a string holding one,
    or a list of acceptable values.
    """

    name = "numeric"
    Options = NumericOptions

    def setup(self) -> None:
        o = self.options
        if o.tolerance < 0 or o.relative_tolerance < 0:
            raise self.error("tolerance and relative_tolerance must be >= 0")

    def _expected(self, task: Task) -> list[float]:
        raw = require_expected(task, self.name)
        values = []
        for item in raw if isinstance(raw, list) else [raw]:
            value = parse_number(item) if isinstance(item, (str, int, float)) else None
            if value is None or not math.isfinite(value):
                raise InputError(
                    f'task "{task.id}": expected {quote(repr(item))} is not a number',
                    where=task.source or None,
                )
            values.append(value)
        if not values:
            raise InputError(
                f'task "{task.id}": expected is an empty list', where=task.source or None
            )
        return values

    def score(self, output: str, task: Task) -> Score:
        expected = self._expected(task)
        got = parse_number(output)
        want = " or ".join(format_number(x) for x in expected[:3])
        if got is None:
            return Score.binary(
                False, f"expected {want}, found no number in output {quote(output)}"
            )
        o = self.options
        for value in expected:
            if abs(got - value) <= max(o.tolerance, o.relative_tolerance * abs(value)):
                return Score.binary(True, f"got {format_number(got)} as expected")
        return Score.binary(
            False, f"expected {want}, got {format_number(got)} (last number in {quote(output)})"
        )
