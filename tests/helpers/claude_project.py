"""A Claude Code project (``tests/data/claude-suite``) wired to the scripted server."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from helpers.paths import DATA

SUITE_DATA = DATA / "claude-suite"


FAKE_KEY = "sk-ant-test-claude-code-key-4c1f9e"


def claude_project(root: Path, server, binary: str, **environment) -> Path:
    shutil.copytree(SUITE_DATA, root)
    suite = root / "eval_suites/shout/suite.yaml"
    data = yaml.safe_load(suite.read_text())
    data["environment"].update(binary=str(binary), **environment)
    suite.write_text(yaml.safe_dump(data, sort_keys=False))
    config = {
        "version": 1,
        "models": {"target": {"provider": "anthropic", "model": "sim-claude", "base_url": server.anthropic_base_url,
                              "max_retries": 0},
                   "optimizer": {"provider": "openai-compatible", "model": "sim-optimizer-1",
                                 "base_url": server.openai_base_url}},
        "skills": [{"path": "skills/shout/SKILL.md", "suite": "eval_suites/shout"}],
        "concurrency": 2,
        "cache": {"mode": "read-write", "path": ".skillopt/cache.sqlite"},
    }
    (root / "skillopt.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    return root
