"""The skill-off baseline (``--baseline none``) as an evaluation: the same plan with no skill.

The no-skill run is an ordinary evaluation through the session (same cache, same sample
indices, same budgets) into its own run directory beside the main one, ``<run>-no-skill``, so it
resumes and re-runs from the cache like any run. :func:`measure_worth` pairs it with the skill's
results (:func:`skillopt_ci.core.baseline.skill_worth`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from skillopt_ci.core.baseline import BASELINES, SkillWorth, skill_worth
from skillopt_ci.core.compare import ComparePolicy
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.paths import display_path
from skillopt_ci.core.skill import NO_SKILL_NAME, no_skill
from skillopt_ci.engine.runner import EvalOutcome, EvalPlan

NO_SKILL_SUFFIX = "-no-skill"


def check_baseline(value: str | None) -> bool:
    """Whether ``--baseline`` asks for the no-skill run; raises :class:`InputError` (exit 2) on an
    unknown value."""
    if value is None:
        return False
    if value not in BASELINES:
        raise InputError(f"--baseline {value!r} is not known", hint=f"use --baseline {' or '.join(BASELINES)}")
    return True


def no_skill_dir(out: Path) -> Path:
    """The no-skill run directory beside ``out``."""
    return out.with_name(out.name + NO_SKILL_SUFFIX)


def measure_worth(session: Any, plan: EvalPlan, outcome: EvalOutcome, *, fresh: bool = False,
                  label: str | None = None, policy: ComparePolicy | None = None,
                  out: Path | None = None) -> SkillWorth:
    """Evaluate ``plan``'s tasks with no skill (into ``out``, default beside ``outcome.run_dir``)
    and pair them with ``outcome``'s results."""
    none_plan = replace(plan, skill=no_skill())
    where = out or no_skill_dir(outcome.run_dir)
    none = session.evaluate(none_plan, where, fresh=fresh, label=label or f"eval {NO_SKILL_NAME}/{plan.split}")
    return skill_worth(outcome.results, none.results, [t.id for t in plan.tasks], none.summary,
                       policy or ComparePolicy(), run_dir=display_path(where))
