"""``train`` end to end: check the inputs, open (or resume) the run directory, train, report.

Every input problem — an unknown skill, an empty train or val split, no optimizer model, a skill
with no room under the token cap, a missing key — is found before the run directory exists.
Re-running the same command resumes the run; ``--fresh`` starts over.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from skillopt_ci.core.description import description_of
from skillopt_ci.core.errors import InputError, RuntimeFailure
from skillopt_ci.core.names import run_dir_name
from skillopt_ci.core.paths import display_path
from skillopt_ci.core.skill import Skill, load_skill
from skillopt_ci.engine.evaluation import EvalSession, make_plan
from skillopt_ci.engine.rundir import RunDir, write_atomic, write_json_atomic
from skillopt_ci.engine.runlock import RunLock
from skillopt_ci.inputs.config import Budgets, Config, SkillEntry, TrainPolicy
from skillopt_ci.inputs.suite import Suite, load_suite
from skillopt_ci.train.records import TrainingSummary
from skillopt_ci.train.report import render_train_report
from skillopt_ci.train.state import TrainState
from skillopt_ci.train.summary import build_summary, measure_no_skill
from skillopt_ci.train.trainer import Trainer


@dataclass(frozen=True)
class TrainRequest:
    skill: str
    out: Path | None = None
    fresh: bool = False
    epochs: int | None = None
    batch_size: int | None = None
    max_tokens: int | None = None
    max_dollars: float | None = None
    max_wall_seconds: float | None = None
    cache_mode: str | None = None
    wait: bool = False  # queue behind another process writing to the same run directory
    baseline: str | None = None  # "none": also evaluate val and test with no skill (train/summary.py)
    target: str | None = None  # body, description or both (default: train.target)


@dataclass
class TrainOutcome:
    summary: TrainingSummary
    run_dir: Path
    baseline_text: str
    best_text: str
    entry: SkillEntry


def _policy(config: Config, request: TrainRequest) -> TrainPolicy:
    changes: dict[str, Any] = {k: v for k, v in (("epochs", request.epochs), ("batch_size", request.batch_size),
                                                 ("target", request.target)) if v is not None}
    policy = replace(config.train, **changes)
    # the slow update rewrites a block of the body: a run that trains the description alone has none to write
    return replace(policy, slow_update=False) if policy.parts == ("description",) else policy


def _budgets(config: Config, request: TrainRequest) -> Budgets:
    b = config.budgets
    return Budgets(
        max_tokens=request.max_tokens if request.max_tokens is not None else b.max_tokens,
        max_dollars=request.max_dollars if request.max_dollars is not None else b.max_dollars,
        max_wall_seconds=request.max_wall_seconds if request.max_wall_seconds is not None else b.max_wall_seconds,
        max_target_calls=b.max_target_calls,
    )


def prepare(config: Config, request: TrainRequest) -> tuple[SkillEntry, Skill, Suite, TrainPolicy]:
    """Find and check everything training needs; raises :class:`InputError` (exit 2)."""
    entry = config.skill(request.skill)
    if entry is None:
        known = ", ".join(e.name for e in config.skills) or "none"
        raise InputError(f"no configured skill named {request.skill!r}", where=config.file,
                         hint=f"configured skills: {known}")
    if "optimizer" not in config.models:
        raise InputError("training needs an optimizer model", where=f"{config.file}: models.optimizer",
                         hint="add models.optimizer with a provider and a model")
    skill = load_skill(entry.path, display=display_path(entry.path))
    suite = load_suite(entry.suite, display=display_path(entry.suite))
    for split in ("train", "val"):
        if not suite.splits.get(split):  # missing or empty (a benchmark imported with test ids only)
            raise InputError(f"the {split!r} split has no tasks; training needs both train and val",
                             where=suite.split_files.get(split, suite.display),
                             hint=f"add {split}.jsonl to the suite, or evaluate with eval --split test")
    policy = _policy(config, request)
    if "description" in policy.parts:
        suite = description_suite(skill, suite, policy.target)
    if skill.tokens >= policy.max_skill_tokens:
        raise InputError(
            f"the skill has about {skill.tokens} tokens and train.max_skill_tokens is {policy.max_skill_tokens}: "
            "no room for any edit", where=skill.path, hint="raise train.max_skill_tokens or shorten the skill")
    return entry, skill, suite, policy


def description_suite(skill: Skill, suite: Suite, target: str) -> Suite:
    """The suite a description is trained on: its trigger tasks (``should_trigger``) alone, all
    scored by the ``trigger`` scorer, for ``target: description``; all of it for ``both``. Raises :class:`InputError` when the skill
    has no description to train or a split has no trigger task."""
    if description_of(skill.text) is None:
        raise InputError(f"train --target {target} edits the front matter's description, and this skill has none",
                         where=skill.path, hint="add a 'description:' line to the front matter")
    for split in ("train", "val"):
        if not any(t.should_trigger is not None for t in suite.splits.get(split, ())):
            raise InputError(f"train --target {target} trains on trigger tasks, and the {split!r} split has none",
                             where=suite.split_files.get(split, suite.display),
                             hint='give tasks "should_trigger": true (requests the skill is for) or false (near-misses)')
    if target != "description":
        return suite
    # what a description decides is whether the skill is used: every task is scored on that alone
    return replace(suite, scorer=MappingProxyType({"type": "trigger"}),
                   splits={name: tuple(t for t in tasks if t.should_trigger is not None)
                           for name, tasks in suite.splits.items()})


def manifest(config: Config, skill: Skill, suite: Suite, policy: TrainPolicy) -> dict[str, Any]:
    return {
        "kind": "train",
        "skill_hash": skill.hash,
        "suite_hash": suite.hash,
        "policy": policy.to_dict(),
        "gate": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(config.gate).items()},
        "models": {role: spec.to_dict() for role, spec in sorted(config.models.items())},
    }


def default_run_dir(config: Config, skill: Skill, ident: dict[str, Any]) -> Path:
    key = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:10]
    return config.runs_dir / run_dir_name("train", skill.name, key)


def run_training(config: Config, request: TrainRequest, *, log: Callable[[str], None] = print,
                 session_options: dict[str, Any] | None = None) -> TrainOutcome:
    """Train one configured skill. Raises :class:`InputError` (2) or :class:`RuntimeFailure` (3)."""
    entry, skill, suite, policy = prepare(config, request)
    ident = manifest(config, skill, suite, policy)
    run_dir = request.out or default_run_dir(config, skill, ident)
    options = {"cache_mode": request.cache_mode, "wait": request.wait, **(session_options or {})}
    with RunLock(run_dir, wait=request.wait), EvalSession(config, **options) as session:
        session.check(suite, make_plan(skill, suite, "val", policy.repeats), _budgets(config, request))
        session.pool.check_credentials("optimizer")
        run = RunDir(run_dir)
        run.open(ident, fresh=request.fresh)
        write_json_atomic(run_dir / "config.json", {**ident, "budgets": vars(_budgets(config, request)),
                                                    "concurrency": config.concurrency, "cache": config.cache.mode})
        state = TrainState.load(run_dir) or TrainState()
        if state.phase == "done":
            log(f"{display_path(run_dir)} is already complete: reusing its result (pass --fresh to train again)")
        elif state.phase != "baseline" or state.versions:
            log(f"resuming {display_path(run_dir)} at {state.phase} (epoch {state.epoch}, step {state.step})")
        trainer = Trainer(config, entry, skill, suite, session, run_dir, policy=policy,
                          budgets=_budgets(config, request), log=log)
        try:
            state = trainer.run(state)
            if request.baseline and state.phase == "done":
                measure_no_skill(trainer)
        finally:
            if state.versions:
                _write_outputs(trainer, state, run_dir)
    if not state.versions:
        raise RuntimeFailure(f"nothing could be evaluated: {state.stopped or 'stopped'}", where=str(run_dir),
                             hint="raise the budget and re-run the same command to resume")
    summary = TrainingSummary.from_dict(json.loads((run_dir / "summary.json").read_text()))
    best_text = (run_dir / "best_skill.md").read_text(encoding="utf-8")
    return TrainOutcome(summary, run_dir, skill.text, best_text, entry)


def _write_outputs(trainer: Trainer, state: TrainState, run_dir: Path) -> None:
    summary = build_summary(trainer, state)
    write_atomic(run_dir / "best_skill.md", trainer.skill_text(state.incumbent))
    write_json_atomic(run_dir / "summary.json", summary.to_dict())
    write_atomic(run_dir / "report.md", render_train_report(summary, state))
