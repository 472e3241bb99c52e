"""Projects wired to the scripted server's batch endpoints, for the ``test_batch*`` tests."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.project import write_project

KEYS = {"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant-test", "AZURE_OPENAI_API_KEY": "az-test"}
FAST = {"quiet_seconds": 0.2, "poll_seconds": 0.05, "max_poll_seconds": 0.2}


def batch_project(root: Path, server, provider: str = "openai", target: dict | None = None, **overrides) -> Path:
    """The example project with its target on ``provider`` at the scripted server, batching fast."""
    target = {"provider": provider, "base_url": {"openai": server.openai_base_url,
                                                 "anthropic": server.anthropic_base_url,
                                                 "azure-openai": server.azure_endpoint}[provider], **(target or {})}
    return write_project(root, server.openai_base_url, target, **{"batch": FAST, **overrides})


def summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def results(run: Path) -> dict[tuple[str, int], dict]:
    lines = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    return {(r["task_id"], r["repeat"]): r for r in lines}  # the last line of each wins


def journal(run: Path) -> list[dict]:
    path = run / "batches.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
