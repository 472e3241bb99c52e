"""``skillopt-ci validate``: every problem with the config, its suites and its skills, at once.

Errors and warnings (``Problem.level``) come from the same checks ``eval``, ``gate`` and
``train`` run before they spend anything (:mod:`skillopt_ci.inputs.preflight`), so what validate passes,
they accept. It sits in the engine layer, not with the inputs it reads, because checking a suite
builds its scorer (:mod:`skillopt_ci.scorers`, a layer above the inputs).
"""

from __future__ import annotations

from pathlib import Path

from skillopt_ci.core.errors import InputError
from skillopt_ci.inputs.config import Config, check_config
from skillopt_ci.inputs.yamlfile import Problem


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def validate_project(config_path: Path, display: str | None = None) -> tuple[Config | None, list[Problem]]:
    """Check the config, then each configured skill and suite (including its scorer). Never
    raises for a problem in the files: it returns them all, in file order per file."""
    try:
        config, problems = check_config(config_path, display)
    except InputError as exc:
        return None, [Problem(exc.where or str(config_path), exc.message)]
    if config is None:
        return None, problems
    checked_suites: set[Path] = set()
    for entry in config.skills:
        if entry.path.is_file():
            problems += _skill_problems(entry.path, _relative(entry.path, config.root), config)
            problems += _suite_in_folder(entry.path, entry.suite, _relative(entry.suite, config.root))
        if entry.suite.is_dir() and entry.suite not in checked_suites:
            checked_suites.add(entry.suite)
            problems += suite_problems(entry.suite, _relative(entry.suite, config.root), config)
    return config, problems


def _skill_problems(path: Path, shown: str, config: Config) -> list[Problem]:
    from skillopt_ci.core.skill import load_skill
    from skillopt_ci.inputs.preflight import skill_warnings

    try:
        skill = load_skill(path, display=shown)
    except InputError as exc:
        return [Problem(exc.where or shown, exc.message)]
    return skill_warnings(skill, shown, config.limits)


def _suite_in_folder(skill_path: Path, suite: Path, shown: str) -> list[Problem]:
    """A suite inside a folder skill would ship with it: its tasks and expected answers become
    skill files installed into every rollout's workspace."""
    if skill_path.name != "SKILL.md":
        return []
    folder, where = skill_path.parent.resolve(), suite.resolve()
    if folder not in where.parents:
        return []
    return [Problem(shown, "the suite is inside the skill's folder, so its tasks and expected answers are skill "
                    "files installed into every workspace; move the suite out of the skill folder", level="warning")]


def suite_problems(path: Path, shown: str, config: Config | None) -> list[Problem]:
    from skillopt_ci.inputs.suite import check_suite
    from skillopt_ci.scorers import build_scorer
    from skillopt_ci.scorers.trigger import trigger_problem

    try:
        suite, problems = check_suite(path, shown)
    except InputError as exc:
        return [Problem(exc.where or shown, exc.message)]
    if suite is None:
        return problems
    try:
        build_scorer(dict(suite.scorer), suite.path)
    except InputError as exc:
        problems.append(Problem(exc.where or f"{shown}/suite.yaml", exc.message, "scorer",
                                None if exc.where else suite.scorer_line))
    try:
        from skillopt_ci.envs.registry import build_environment

        environment = build_environment(dict(suite.environment), suite.path)
    except InputError as exc:
        problems.append(Problem(exc.where or f"{shown}/suite.yaml", exc.message, "environment"))
    else:
        problem = trigger_problem(suite, environment.name, environment.records_consults)
        if problem:
            problems.append(Problem(f"{shown}/suite.yaml", problem, "environment"))
    if suite.scorer.get("type") == "llm_judge" and config is not None and "judge" not in config.models:
        problems.append(Problem(f"{shown}/suite.yaml", f"uses an llm_judge scorer but {config.file} has no models.judge", "scorer"))
    if "val" not in suite.splits:
        problems.append(Problem(shown, "has no val split: the pull-request gate and training need one"))
    if config is not None:
        from skillopt_ci.inputs.preflight import gate_power_warning, prompt_warnings

        for tasks in suite.splits.values():
            problems += prompt_warnings(suite, tasks, config.limits)
        problems += gate_power_warning(suite, config.gate, shown)
    return problems
