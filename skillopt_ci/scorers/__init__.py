"""Scorers by name: ``build_scorer({"type": "exact", ...options}, suite_dir)``, the built-ins and
plug-ins from the ``skillopt_ci.scorers`` entry-point group (:mod:`skillopt_ci.core.registry`).

Each scorer declares its options as a frozen dataclass (``Scorer.Options``); unknown keys and
wrong value types are ``InputError``\\s naming the option and the allowed ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.options import parse_options
from skillopt_ci.core.registry import Registry, subclass_of
from skillopt_ci.scorers.base import Score, Scorer

ENTRY_POINT_GROUP = "skillopt_ci.scorers"
# The built-ins, imported only when a suite uses them; a plug-in registers a Scorer subclass in
# the entry-point group (its ``name`` is the entry point's name).
BUILTIN: dict[str, str] = {
    "exact": "skillopt_ci.scorers.text:Exact",
    "contains": "skillopt_ci.scorers.text:Contains",
    "regex": "skillopt_ci.scorers.text:Regex",
    "token_f1": "skillopt_ci.scorers.text:TokenF1",
    "anls": "skillopt_ci.scorers.text:Anls",
    "choice": "skillopt_ci.scorers.text:Choice",
    "numeric": "skillopt_ci.scorers.numeric:Numeric",
    "json": "skillopt_ci.scorers.json_scorer:JsonScorer",
    "python": "skillopt_ci.scorers.python_scorer:PythonScorer",
    "llm_judge": "skillopt_ci.scorers.judge:Judge",
    "reward": "skillopt_ci.scorers.reward:RewardScorer",
    "verify": "skillopt_ci.scorers.verify:VerifyScorer",
    "trigger": "skillopt_ci.scorers.trigger:TriggerScorer",
}
# A benchmark's own scorers are in its pack (skillopt_ci/benchmarks/packs/<name>/), read only for
# a name not above.
SCORERS = Registry("scorer", ENTRY_POINT_GROUP, BUILTIN, subclass_of(Scorer), "skillopt_ci.benchmarks:pack_entries")


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
    if not isinstance(kind, str) or not kind:
        raise InputError(f"scorer has no type; known: {', '.join(SCORERS.names())}", where=where)
    cls = SCORERS.load(kind, where)
    return cls(parse_options(cls.Options, options, kind, where=where), Path(suite_dir))


__all__ = [
    "BUILTIN",
    "SCORERS",
    "Score",
    "Scorer",
    "build_scorer",
]
