"""``eval`` end to end: load inputs, check them, run the evaluation, write the run directory.

Everything that can be wrong with the input is found before the run directory is created, so bad
input never leaves a half-written run behind.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from skillopt_ci.cache import ResponseCache
from skillopt_ci.config import Config, ModelSpec
from skillopt_ci.errors import EXIT_FAILED, EXIT_OK, EXIT_RUNTIME, InputError
from skillopt_ci.models.base import Backend
from skillopt_ci.models.pool import ModelPool
from skillopt_ci.paths import display_path
from skillopt_ci.progress import Progress
from skillopt_ci.records import EvalSummary
from skillopt_ci.report import eval_report
from skillopt_ci.rundir import RunDir
from skillopt_ci.runner import ErrorPolicy, EvalOutcome, EvalPlan, evaluate
from skillopt_ci.scorers import build_scorer
from skillopt_ci.skill import load_skill
from skillopt_ci.suite import load_suite

MIN_COVERAGE = 0.8


@dataclass(frozen=True)
class EvalRequest:
    skill: Path
    suite: Path
    split: str = "val"
    repeats: int | None = None
    out: Path | None = None
    fresh: bool = False
    threshold: float | None = None
    cache_mode: str | None = None


def default_run_dir(config: Config, plan: EvalPlan) -> Path:
    """Deterministic per (skill, suite, split, repeats, model): the same command resumes."""
    ident = json.dumps(plan.manifest(config.models["target"].to_dict()), sort_keys=True)
    key = hashlib.sha256(ident.encode()).hexdigest()[:10]
    return config.runs_dir / f"eval-{plan.skill.name}-{plan.split}-{key}"


def prepare(config: Config, request: EvalRequest) -> EvalPlan:
    """Load and check the skill and the suite split; raises :class:`InputError`."""
    skill = load_skill(request.skill, display=display_path(request.skill))
    suite = load_suite(request.suite, display=display_path(request.suite))
    tasks = suite.tasks(request.split)
    if not tasks:
        raise InputError(f"the {request.split!r} split has no tasks", where=suite.split_files.get(request.split, suite.display))
    return EvalPlan(skill=skill, suite=suite, split=request.split, tasks=tasks, repeats=request.repeats or suite.repeats)


def check_budgets(config: Config, pool: ModelPool, roles: tuple[str, ...]) -> None:
    if config.budgets.max_dollars is None:
        return
    for role in roles:
        spec = pool.spec(role)
        if pool.price(spec) is None:
            raise InputError(
                f"budgets.max_dollars is set but the price of {spec.model!r} is unknown",
                where=config.file,
                hint=f"add pricing: {{{spec.model}: {{input: …, output: …}}}} in USD per million tokens",
            )


def run_eval(
    config: Config,
    request: EvalRequest,
    *,
    stream: TextIO | None = None,
    show_progress: bool = True,
    env: Mapping[str, str] | None = None,
    backend_factory: Callable[[ModelSpec, Mapping[str, str]], Backend] | None = None,
) -> EvalOutcome:
    """Evaluate and write ``results.jsonl``, ``summary.json``, ``report.md`` and ``skill.md``."""
    plan = prepare(config, request)
    scorer = build_scorer(dict(plan.suite.scorer), plan.suite.path)
    roles = ("target", "judge") if plan.suite.scorer.get("type") == "llm_judge" else ("target",)
    cache = ResponseCache(config.cache.path, request.cache_mode or config.cache.mode)
    pool = ModelPool(config, cache, env=env, backend_factory=backend_factory)
    try:
        for role in roles:
            pool.spec(role)
        pool.check_credentials(*roles)
        check_budgets(config, pool, roles)
        run = RunDir(request.out or default_run_dir(config, plan))
        units = len(plan.tasks) * plan.repeats
        progress = Progress(units, f"eval {plan.skill.name}/{plan.split}", stream=stream, enabled=show_progress)
        outcome = asyncio.run(
            _evaluate_and_close(plan, pool, scorer, run, config, progress, request.fresh)
        )
    finally:
        cache.close()
    run.write_text("skill.md", plan.skill.text)
    run.write_json("summary.json", outcome.summary.to_dict())
    run.write_text("report.md", eval_report(outcome.summary, outcome.results, threshold=request.threshold))
    return outcome


async def _evaluate_and_close(plan, pool, scorer, run, config, progress, fresh) -> EvalOutcome:  # type: ignore[no-untyped-def]
    try:
        return await evaluate(
            plan,
            pool,
            scorer,
            run,
            budgets=config.budgets,
            errors=ErrorPolicy(config.max_error_rate, config.min_attempts),
            progress=progress,
            fresh=fresh,
        )
    finally:
        await pool.aclose()


def threshold_verdict(summary: EvalSummary, threshold: float | None) -> tuple[int, str]:
    """Exit code and one line for an eval-only check. Too little data is inconclusive (exit 3),
    never a silent pass."""
    if not summary.complete:
        return EXIT_RUNTIME, f"incomplete: {summary.stopped}; re-run the same command to resume"
    if summary.coverage < MIN_COVERAGE or summary.mean is None:
        return EXIT_RUNTIME, (
            f"inconclusive: only {summary.n_tasks_scored} of {summary.n_tasks} tasks were measured "
            f"({summary.n_errors} errored rollouts)"
        )
    if threshold is None:
        return EXIT_OK, f"score {summary.mean:.3f}"
    if summary.mean < threshold:
        return EXIT_FAILED, f"score {summary.mean:.3f} is below the threshold {threshold:.3f}"
    return EXIT_OK, f"score {summary.mean:.3f} meets the threshold {threshold:.3f}"
