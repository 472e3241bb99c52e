"""Shared steps of the SearchQA, LiveMathematicianBench and DocVQA tests: import a fixture through
the CLI, wrap the suite in a project whose target is the scripted server, validate, evaluate."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from helpers.cli import run_cli
from helpers.manifests import write_small_manifest
from skillopt_ci.benchmarks.manifest import load_manifest

KEYS = {"OPENAI_API_KEY": "sk-test-not-a-key-000000000000", "ANTHROPIC_API_KEY": "sk-ant-test-not-a-key-0000000"}
SKILL = "---\nname: bench-skill\ndescription: Answer benchmark questions.\n---\nRead carefully, then answer.\n"


def import_fixture(name: str, module, tmp_path: Path, *, full: bool, **fixture_kw) -> tuple[Path, Path | None]:
    """Write ``module``'s fixture (one record per published id when ``full``, else a few with a
    small manifest) and import it with ``bench import``; return (suite folder, manifest folder)."""
    manifest_dir = None if full else write_small_manifest(name, tmp_path / "manifest")
    source = module.write_fixture(tmp_path / "data", load_manifest(name) if full else None, **fixture_kw)
    suite = tmp_path / "project" / "eval_suites" / name
    args = ["bench", "import", name, "--from", str(source), "--out", str(suite)]
    if manifest_dir is not None:
        args += ["--manifest", str(manifest_dir)]
    result = run_cli(*args)
    assert result.code == 0, result.err
    assert "imported " in result.out
    return suite, manifest_dir


def write_project(root: Path, name: str, target: dict) -> Path:
    skill = root / "skills" / "bench-skill" / "SKILL.md"
    skill.parent.mkdir(parents=True, exist_ok=True)
    skill.write_text(SKILL)
    config = {
        "version": 1,
        "models": {"target": {"max_retries": 1, **target}},
        "skills": [{"path": "skills/bench-skill/SKILL.md", "suite": f"eval_suites/{name}"}],
        "concurrency": 4,
        "cache": {"mode": "off", "path": ".skillopt/cache.sqlite"},
    }
    (root / "skillopt.yml").write_text(yaml.safe_dump(config))
    return root


def openai_target(server) -> dict:
    return {"provider": "openai-compatible", "model": "sim-bench", "base_url": server.openai_base_url}


def anthropic_target(server) -> dict:
    return {"provider": "anthropic", "model": "sim-bench", "base_url": server.anthropic_base_url}


def evaluate(project: Path, split: str, out: Path) -> tuple[dict, dict[str, dict]]:
    """``eval bench-skill --split split``: (summary.json, results by task id)."""
    result = run_cli("eval", "bench-skill", "--split", split, "--out", str(out), "--quiet", cwd=project, env=KEYS)
    assert result.code == 0, result.err
    summary = json.loads((out / "summary.json").read_text())
    results = {r["task_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    return summary, results


def validate(project: Path):
    return run_cli("validate", cwd=project, env=KEYS)
