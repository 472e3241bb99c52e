"""The ``tools`` environment over small CSV suites: a suite, a rollout through a scripted
ModelCaller, and an end-to-end project for each wire protocol."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml

from fakes.tool_model import ScriptedCaller
from skillopt_ci.core.skill import parse_skill
from skillopt_ci.core.task import Task
from skillopt_ci.envs.base import RolloutRequest
from skillopt_ci.envs.registry import build_environment
from skillopt_ci.sandbox import isolation

SKILL = "---\nname: csv-analyst\ndescription: Answers questions about CSV files.\n---\n# Analyst\nUse python.\n"
TABLES = {"t1": [10, 20, 30], "t2": [1.5, 2.5], "t3": [100, -40], "v1": [5, 5, 5], "v2": [7], "v3": [2, 2]}


def tools_project(root: Path, target: dict) -> Path:
    suite = root / "eval_suites/csv-sum"
    (suite / "data").mkdir(parents=True)
    (suite / "suite.yaml").write_text(yaml.safe_dump({
        "name": "csv-sum",
        "prompt": "{{ input }}",
        "environment": {"type": "tools", "tools": ["read_file", "python", "submit_answer"], "max_turns": 5},
        "scorer": {"type": "numeric"},
    }))
    for split, ids in (("train", ("t1", "t2", "t3")), ("val", ("v1", "v2", "v3"))):
        lines = []
        for task_id in ids:
            rows = TABLES[task_id]
            (suite / f"data/{task_id}.csv").write_text("id,amount\n" + "".join(f"{i},{v}\n" for i, v in enumerate(rows)))
            lines.append(json.dumps({"id": task_id, "input": f"Task {task_id}: what is the total of the amount column in data.csv?",
                                     "files": {"data.csv": f"data/{task_id}.csv"}, "expected": sum(rows)}))
        (suite / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    skill = root / "skills/csv-sum/SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: csv-sum\ndescription: Sum a column of a CSV file.\n---\n"
                     "Read the file first, then compute with python, then submit the answer.\n")
    config = {
        "version": 1,
        "models": {"target": {"max_retries": 1, **target},
                   "optimizer": {"provider": "openai-compatible", "model": "sim-optimizer-1",
                                 "base_url": target["base_url"] + ("/v1" if target["provider"] == "anthropic" else "")}},
        "skills": [{"path": "skills/csv-sum/SKILL.md", "suite": "eval_suites/csv-sum"}],
        "concurrency": 2,
        "cache": {"mode": "read-write", "path": ".skillopt/cache.sqlite"},
        "train": {"epochs": 1, "batch_size": 3},
    }
    (root / "skillopt.yml").write_text(yaml.safe_dump(config))
    return root


PROTOCOLS = {
    "chat": lambda s: {"provider": "openai-compatible", "model": "sim-analyst", "base_url": s.openai_base_url},
    "responses": lambda s: {"provider": "openai", "api": "responses", "model": "sim-analyst", "base_url": s.openai_base_url},
    "anthropic": lambda s: {"provider": "anthropic", "model": "sim-analyst", "base_url": s.anthropic_base_url},
}


KEYS = {"OPENAI_API_KEY": "sk-test-not-a-key-000000000000", "ANTHROPIC_API_KEY": "sk-ant-test-not-a-key-0000000"}


def make_suite(tmp_path: Path, files: dict[str, str] | None = None) -> Path:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "suite.yaml").write_text("name: demo\n")
    for name, text in (files or {}).items():
        (suite / name).parent.mkdir(parents=True, exist_ok=True)
        (suite / name).write_text(text)
    return suite


def request_for(suite: Path, task: dict | None = None, *, keep_dir: Path | None = None,
                prompt: str = "How many rows?") -> RolloutRequest:
    record = {"id": "t1", "input": prompt, **(task or {})}
    return RolloutRequest(skill=parse_skill(SKILL, path="skills/csv-analyst/SKILL.md"),
                          task=Task(id="t1", input=prompt, fields=record, source="train.jsonl:1"),
                          prompt=prompt, suite_dir=suite, keep_dir=keep_dir)


def rollout(suite: Path, model: ScriptedCaller, request: RolloutRequest | None = None, **options):
    env = build_environment({"type": "tools", **options}, suite)
    result = asyncio.run(env.run(request or request_for(suite), model))
    return env, result


needs_bwrap = pytest.mark.skipif(isolation() != "bwrap",
                                 reason=f"bubblewrap cannot run here (isolation: {isolation()})")
