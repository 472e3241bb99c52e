"""The ``claude-code`` environment: the real Claude Code CLI (``claude -p``) runs headless in the
rollout's workspace, with the skill installed where it discovers skills.

Per rollout (the shared flow is :class:`~skillopt_ci.envs.agent_cli.AgentEnvironment`): the skill
folder at ``.claude/skills/<name>/`` (and its body as ``CLAUDE.md`` with ``instructions_file``),
a fresh home directory outside the workspace (the CLI keeps its settings, session log and memory
there), then::

    claude -p --output-format stream-json --verbose --max-turns N --model <target model>
           --permission-mode <permission_mode> --allowedTools=<allowed_tools> -- <prompt>

The CLI talks only to the target role's endpoint (``models.endpoint("target")``, which must be
``provider: anthropic``), and only through the forwarder: ``ANTHROPIC_BASE_URL`` is the
forwarder's URL (the provider's path kept; under bubblewrap the in-sandbox relay's, since the CLI
has no network) and ``ANTHROPIC_API_KEY`` the rollout's credential,
revoked when the rollout ends. Claude Code passes its environment on to its Bash commands, so
they see that credential, never the key; nothing else of this process's environment reaches the
CLI beyond the sandbox's allow-list.
Telemetry, the auto-updater, error reporting and other non-essential traffic are switched off
(the documented variables in ``QUIET``), so nothing waits on the missing network;
the bundled skills are switched off so the agent sees the suite's skill and few others.
``CLAUDE_CODE_MAX_RETRIES=0``: a failed model call fails the rollout (recorded as an error, so it
counts as missing data) instead of the CLI retrying behind the run's back, beyond its time limit
and its budget. ``IS_SANDBOX=1`` is set only when the CLI would otherwise refuse to start: as root
with ``permission_mode: bypassPermissions``.

Steps come from the stream-json events (``claude_stream``); spend from its ``result`` event
(``total_cost_usd``, the CLI's own figure, counted in the run's ledger).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import InputError
from skillopt_ci.envs.agent_cli import AgentEnvironment, AgentOptions
from skillopt_ci.envs.agent_output import Parsed
from skillopt_ci.envs.claude_stream import parse_stream

PERMISSION_MODES = ("acceptEdits", "auto", "bypassPermissions", "manual", "dontAsk", "plan")
DEFAULT_TOOLS = ("Bash", "Read", "Write", "Edit", "Glob", "Grep", "Skill")
QUIET = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_MAX_RETRIES": "0",
    "CLAUDE_CODE_DISABLE_BUNDLED_SKILLS": "1",
    "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1",
}


@dataclass(frozen=True)
class ClaudeCodeOptions(AgentOptions):
    permission_mode: str = "acceptEdits"
    allowed_tools: Any = DEFAULT_TOOLS


class ClaudeCodeEnvironment(AgentEnvironment):
    name = "claude-code"
    Options = ClaudeCodeOptions
    instructions_name = "CLAUDE.md"
    providers = ("anthropic",)  # Claude Code speaks only the Anthropic Messages API

    def setup(self) -> None:
        super().setup()
        opts, where = self.options, self.where
        if opts.permission_mode not in PERMISSION_MODES:
            raise InputError(f"environment claude-code: permission_mode must be one of {', '.join(PERMISSION_MODES)}, "
                             f"got {opts.permission_mode!r}", where=where)
        tools = opts.allowed_tools
        if isinstance(tools, str) or not all(isinstance(t, str) and t.strip() for t in tools or ()):
            raise InputError("environment claude-code: allowed_tools must be a list of tool names "
                             "(such as [Bash, Read, Write, Edit, Skill])", where=where)

    def install_dir(self, skill_name: str) -> str:
        return f".claude/skills/{skill_name}"

    def prepare_home(self, home: Path, endpoint: Any) -> dict[str, str]:
        scratch = home / "tmp"  # the CLI's session files go here, not into the workspace's scratch folder
        scratch.mkdir(exist_ok=True)
        env = {"HOME": str(home), "TMPDIR": str(scratch), "TMP": str(scratch), "TEMP": str(scratch),
               "ANTHROPIC_API_KEY": endpoint.api_key, **QUIET}
        if endpoint.base_url:
            env["ANTHROPIC_BASE_URL"] = endpoint.base_url
        if self.options.permission_mode == "bypassPermissions" and _is_root():
            env["IS_SANDBOX"] = "1"  # else the CLI refuses to skip permission checks as root
        return env

    def argv(self, prompt: str, workspace: Path, endpoint: Any) -> list[str]:
        opts = self.options
        argv = [self.binary, "-p", "--output-format", "stream-json", "--verbose",
                "--max-turns", str(opts.max_turns), "--model", endpoint.model,
                "--permission-mode", opts.permission_mode]
        if opts.allowed_tools:
            argv.append("--allowedTools=" + ",".join(t.strip() for t in opts.allowed_tools))
        return [*argv, "--", prompt]  # "--": a prompt that starts with "-" is still the prompt

    def parse(self, stdout: str, times: Sequence[float] = ()) -> Parsed:
        return parse_stream(stdout, times)


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0
