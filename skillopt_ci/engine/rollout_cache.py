"""Whole scored rollouts in the response cache file, for environments whose model calls the
response cache cannot see (an agent CLI calls the model itself): a re-run of an unchanged skill
on an unchanged task (the gate's base side, a resumed training) costs nothing. Kept workspace
files are stored with the result and restored into the run directory on a hit."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

from skillopt_ci.core.errors import RuntimeFailure
from skillopt_ci.core.records import TaskResult
from skillopt_ci.core.skill import Skill
from skillopt_ci.core.task import Task
from skillopt_ci.envs.base import BaseEnvironment
from skillopt_ci.inputs.suite import Suite
from skillopt_ci.models.pool import ModelPool


def rollout_key(skill: Skill, suite: Suite, task: Task, sample: int, environment: BaseEnvironment,
                pool: ModelPool) -> str:
    """What determines a whole scored rollout: the skill (folder included), the task record, the
    suite (its files, the tasks' inputs and the scorer), the environment and its settings (an
    agent CLI's version included), the target model and the sample."""
    spec = pool.spec("target").to_dict()
    payload = {"skill": skill.hash, "task": task.fields, "suite": suite.hash, "environment": environment.identity(),
               "sample": sample, "model": {k: spec.get(k) for k in ("provider", "model", "params", "api")}}
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def cached_rollout(pool: ModelPool, key: str, keep_dir: Path | None) -> TaskResult | None:
    """A cached scored rollout with its kept files restored; in replay-only mode a miss is an error."""
    found = pool.cache.get_rollout(key)
    if found is None:
        if pool.cache.mode == "replay-only":
            raise RuntimeFailure("rollout cache miss in replay-only mode", where=str(pool.cache.path),
                                 hint="record the rollouts once with cache mode read-write, then replay")
        return None
    data, files = found
    for relative, content in files.items():
        if keep_dir is not None:
            target = keep_dir / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
    return replace(TaskResult.from_dict(data), cached=True)


def store_rollout(pool: ModelPool, key: str, result: TaskResult, keep_dir: Path | None) -> None:
    """Cache a measured rollout (an errored one is tried again next time, never cached)."""
    if not result.ok:
        return
    names = result.files or []
    files = {n: (keep_dir / n).read_bytes() for n in names if keep_dir is not None and (keep_dir / n).is_file()}
    pool.cache.put_rollout(key, result.to_dict(), files)
