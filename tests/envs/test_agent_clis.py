"""The pinned agent CLIs: the folder ./test.sh installs (SKILLOPT_AGENT_CLIS) holds exactly the
versions skillopt_ci.envs.agent_clis pins, and the tests find them."""

from __future__ import annotations

import pytest

from helpers.agent_bins import SKIP_REASON, agent_bin, installed_bin_dir
from skillopt_ci.engine.agents_install import reported_version
from skillopt_ci.envs.agent_clis import AGENT_CLIS


@pytest.mark.parametrize("environment", AGENT_CLIS)
def test_the_installed_clis_report_the_pinned_versions(environment):
    bin_dir = installed_bin_dir()
    if bin_dir is None:
        pytest.skip(f"SKILLOPT_AGENT_CLIS is not set: {SKIP_REASON}")
    cli = AGENT_CLIS[environment]
    assert reported_version(bin_dir / cli.binary) == cli.version


def test_agent_bin_finds_the_installed_binary_or_skips(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("SKILLOPT_AGENT_CLIS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="install the pinned agent CLIs"):
        agent_bin("codex")
    (tmp_path / "node_modules/.bin").mkdir(parents=True)
    binary = tmp_path / "node_modules/.bin/claude"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.setenv("SKILLOPT_AGENT_CLIS", str(tmp_path))
    assert agent_bin("claude-code") == binary
