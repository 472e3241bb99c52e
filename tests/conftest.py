"""Fixtures for every test: a scripted model server, the example project wired to it, the fake
GitHub, no real provider keys, and a machine without isolation. Plain helpers live in
``tests/helpers/``; no test imports this module."""

from __future__ import annotations

import sys

import pytest

from fakes.github import FakeGitHub
from helpers.project import write_project
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.triage import TriagePolicy


@pytest.fixture
def server():
    with ScriptedModelServer(TriagePolicy()) as srv:
        yield srv


@pytest.fixture
def fake():
    """The fake GitHub (``octo/skills``) on 127.0.0.1, for the real PyGithub."""
    with FakeGitHub(owner="octo", repo="skills") as gh:
        yield gh


@pytest.fixture
def project(tmp_path, server):
    return write_project(tmp_path / "proj", server.openai_base_url)


@pytest.fixture(autouse=True)
def _no_real_keys(monkeypatch):
    """No test may reach a real provider: drop any keys and base URLs from the environment."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
                "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION"):
        monkeypatch.delenv(var, raising=False)



@pytest.fixture
def unisolated(monkeypatch):
    """This machine without isolation (``SKILLOPT_SANDBOX=none``), commands allowed by the opt-in.
    For tests of what runs *inside* the sandbox through stand-ins that record what they saw next to
    themselves (fake agent CLIs): the boundary itself is tested in tests/sandbox/test_sandbox_boundary.py,
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
