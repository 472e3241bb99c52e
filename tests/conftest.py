"""Shared fixtures: a scripted model server, an example project wired to it, and a CLI runner."""

from __future__ import annotations

import io
import os
import shutil
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from skillopt_ci.cli import main
from skillopt_ci.inputs.scaffold import example_path
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.triage import TriagePolicy

REPO = Path(__file__).resolve().parent.parent


@dataclass
class CliResult:
    code: int
    out: str
    err: str


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> CliResult:
    """Run ``skillopt-ci`` in this process (through the real entry point) and capture its output."""
    out, err = io.StringIO(), io.StringIO()
    old_cwd = Path.cwd()
    old_env = dict(os.environ)
    try:
        if cwd is not None:
            os.chdir(cwd)
        if env is not None:
            os.environ.update(env)
        with redirect_stdout(out), redirect_stderr(err):
            try:
                main(list(args))
                code = 0
            except SystemExit as exc:
                code = int(exc.code or 0)
    finally:
        os.chdir(old_cwd)
        os.environ.clear()
        os.environ.update(old_env)
    return CliResult(code, out.getvalue(), err.getvalue())


@pytest.fixture
def server():
    with ScriptedModelServer(TriagePolicy()) as srv:
        yield srv


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


@pytest.fixture
def project(tmp_path, server):
    return write_project(tmp_path / "proj", server.openai_base_url)


@pytest.fixture(autouse=True)
def _no_real_keys(monkeypatch):
    """No test may reach a real provider: drop any keys and base URLs from the environment."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
                "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION"):
        monkeypatch.delenv(var, raising=False)


PYTHON = sys.executable

# train: options that give the training gate of before the noise-robust defaults (a strict one-pass
# "candidate mean > incumbent mean", no screening): for tests that pin that gate's decisions.
LEGACY_TRAIN = {"acceptance": "mean"}


@pytest.fixture
def unisolated(monkeypatch):
    """This machine without isolation (``SKILLOPT_SANDBOX=none``), commands allowed by the opt-in.
    For tests of what runs *inside* the sandbox through stand-ins that record what they saw next to
    themselves (fake agent CLIs): the boundary itself is tested in tests/test_sandbox_boundary.py,
    and the real CLIs run under it in their end-to-end tests."""
    from skillopt_ci.sandbox import policy, process

    cache = sys.modules["skillopt_ci.sandbox.isolation"]._CACHE
    monkeypatch.setenv("SKILLOPT_SANDBOX", "none")
    monkeypatch.setenv(policy.OPT_IN, "1")
    cache.clear()
    process._CACHE.pop("probed", None)
    policy.reset()  # an earlier test's Action run may have marked this process untrusted
    yield
    monkeypatch.delenv("SKILLOPT_SANDBOX")
    cache.clear()
    policy.reset()
