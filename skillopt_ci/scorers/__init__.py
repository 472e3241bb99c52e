"""Scorers by name: ``build_scorer({"type": "exact", ...options}, suite_dir)``.

Each scorer declares its options as a frozen dataclass (``Scorer.Options``); unknown keys and
wrong value types are ``InputError``\\s naming the option and the allowed ones.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.options import options_to_dict, parse_options
from skillopt_ci.scorers.base import Score, Scorer
from skillopt_ci.scorers.benchmarks_text import DocVQAScorer, LiveMathScorer, SearchQAScorer
from skillopt_ci.scorers.json_scorer import JsonScorer
from skillopt_ci.scorers.judge import Judge
from skillopt_ci.scorers.numeric import Numeric
from skillopt_ci.scorers.officeqa import OfficeQAScorer
from skillopt_ci.scorers.python_scorer import PythonScorer
from skillopt_ci.scorers.reward import RewardScorer
from skillopt_ci.scorers.spreadsheet import SpreadsheetScorer
from skillopt_ci.scorers.text import Anls, Choice, Contains, Exact, Regex, TokenF1
from skillopt_ci.scorers.verify import VerifyScorer

SCORERS: dict[str, type[Scorer]] = {
    cls.name: cls
    for cls in (
        Exact,
        Contains,
        Regex,
        TokenF1,
        Anls,
        Choice,
        Numeric,
        JsonScorer,
        PythonScorer,
        Judge,
        RewardScorer,
        VerifyScorer,
        OfficeQAScorer,
        SearchQAScorer,
        LiveMathScorer,
        DocVQAScorer,
        SpreadsheetScorer,
    )
}
SCORER_NAMES: tuple[str, ...] = tuple(SCORERS)


def scorer_options(name: str) -> dict[str, Any]:
    """The option names of scorer ``name`` with their defaults (a required option maps to ...)."""
    return {
        f.name: f.default if f.default is not dataclasses.MISSING else ...
        for f in dataclasses.fields(SCORERS[name].Options)
    }


def build_scorer(
    spec: dict[str, Any] | str, suite_dir: Path | str, *, where: str | None = None
) -> Scorer:
    """Build the scorer ``spec["type"]`` with the other keys of ``spec`` as its options.

    A bare string is shorthand for ``{"type": name}``. ``suite_dir`` anchors relative paths
    (``schema_file``, python scorer files, ``template_file``). ``where`` (e.g.
    ``"eval_suites/x/suite.yaml"``) is attached to option errors. Raises ``InputError`` for an
    unknown type or option, a wrong option type, or an unusable option value or file.
    """
    if isinstance(spec, str):
        spec = {"type": spec}
    if not isinstance(spec, dict):
        raise InputError(
            f"a scorer must be a mapping with a type, got {type(spec).__name__}", where=where
        )
    options = dict(spec)
    kind = options.pop("type", None)
    if kind not in SCORERS:
        what = f'unknown scorer type "{kind}"' if kind is not None else "scorer has no type"
        raise InputError(f"{what}; known types: {', '.join(SCORER_NAMES)}", where=where)
    cls = SCORERS[kind]
    return cls(parse_options(cls.Options, options, kind, where=where), Path(suite_dir))


__all__ = [
    "SCORERS",
    "SCORER_NAMES",
    "Score",
    "Scorer",
    "build_scorer",
    "options_to_dict",
    "scorer_options",
]
