"""The agent CLIs the ``codex`` and ``claude-code`` environments run, and the versions this release
of skillopt-ci is tested with (the tests and ``skillopt-ci install-agents`` install exactly these
from the npm registry)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AgentCli:
    environment: str  # the suite's environment type
    binary: str  # the executable's name on PATH
    package: str  # the npm package
    version: str  # the tested version

    @property
    def npm_spec(self) -> str:
        return f"{self.package}@{self.version}"

    @property
    def install_command(self) -> str:
        return f"npm install --prefix <dir> {self.npm_spec}  (then put <dir>/node_modules/.bin on PATH)"


AGENT_CLIS: dict[str, AgentCli] = {
    "codex": AgentCli("codex", "codex", "@openai/codex", "0.171.0"),
    "claude-code": AgentCli("claude-code", "claude", "@anthropic-ai/claude-code", "2.1.332"),
}
