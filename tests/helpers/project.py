"""The bundled example project pointed at the scripted server, and the scorer and gate variants
the tests switch it to."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from skillopt_ci.inputs.scaffold import example_path


def write_project(root: Path, base_url: str, target: dict | None = None, **overrides) -> Path:
    """The bundled example in ``root``, its target pointed at ``base_url`` (OpenAI-compatible)."""
    shutil.copytree(example_path("skills"), root / "skills")
    shutil.copytree(example_path("eval_suites"), root / "eval_suites", ignore=shutil.ignore_patterns("__pycache__"))
    config = {
        "version": 1,
        "models": {
            "target": {"provider": "openai-compatible", "model": "sim-triage-1", "base_url": base_url,
                       "params": {"temperature": 0}, "max_retries": 2},
        },
        "skills": [{"path": "skills/ticket-triage/SKILL.md", "suite": "eval_suites/ticket-triage"}],
        "concurrency": 4,
        "cache": {"mode": "read-write", "path": ".skillopt/cache.sqlite"},
        "pricing": {"sim-triage-1": {"input": 1.0, "output": 2.0}},
    }
    config["models"]["target"].update(target or {})
    config.update(overrides)
    (root / "skillopt.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    return root


def use_llm_judge(project: Path, anthropic_base_url: str) -> None:
    """Score the example suite with an LLM judge (the scripted server's Anthropic route)."""
    config = yaml.safe_load((project / "skillopt.yml").read_text())
    config["models"]["judge"] = {"provider": "anthropic", "model": "claude-haiku-4-5",
                                 "base_url": anthropic_base_url}
    (project / "skillopt.yml").write_text(yaml.safe_dump(config))
    suite = project / "eval_suites/ticket-triage/suite.yaml"
    data = yaml.safe_load(suite.read_text())
    data["scorer"] = {"type": "llm_judge", "rubric": "Score 1 if the answer names the Enterprise plan."}
    suite.write_text(yaml.safe_dump(data))


# train: options that give the training gate of before the noise-robust defaults (a strict one-pass
# "candidate mean > incumbent mean", no screening): for tests that pin that gate's decisions.
LEGACY_TRAIN = {"acceptance": "mean"}


def judge_policy(request):
    """Target answers with the ticket's plan; the judge grades 'Enterprise' answers 1, others 0,
    and returns prose without a verdict for one ticket."""
    prompt = request.last_user
    if "## Rubric" in prompt:
        if "EU region" in prompt:
            return "I cannot decide."
        answer = prompt.split("## Answer to grade")[1].split("## Your verdict")[0]
        return json.dumps({"score": 1.0 if "Enterprise" in answer else 0.0, "reason": "graded"})
    return request.last_user.split("Plan: ")[1].split("\n")[0]
