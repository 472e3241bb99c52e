"""The ``codex`` environment: OpenAI's Codex CLI (``codex exec``) runs each rollout headless.

The skill is installed at ``.agents/skills/<name>/`` (Codex lists it to the model by name and
description and the model reads the body when it decides to), optionally also as ``AGENTS.md``.
``$CODEX_HOME/config.toml`` (in a fresh folder outside the workspace) names one model provider:
the forwarder's URL for the target model's base URL (:mod:`skillopt_ci.envs.agent_access`; same
path, so Azure's ``…/openai`` and its ``api-version`` go through) over the Responses API (``wire_api = "responses"``, the only one
Codex accepts), no retries (the pool's budget is the only policy), approvals never asked,
``sandbox_mode`` from the suite, analytics, feedback, update checks and bundled skills off, and
commands the agent runs get only the core environment variables. The CLI never holds the key:
the ``env_key`` variable of its environment carries the rollout's credential for the forwarder,
revoked when the rollout ends; it is written to no file.

Steps come from the ``--json`` event stream: ``command_execution`` items are ``exec_command``
calls and results (``is_error`` on a non-zero exit), ``file_change`` items are ``apply_patch``
calls and results, ``agent_message`` items are ``model`` steps (the last is the output), error
events are ``error`` steps; ``turn.failed`` fails the rollout. Codex reports tokens only
(``turn.completed`` usage): the cost comes from our price table. ``max_turns`` counts the items
the agent completed (messages, commands, file changes, tool calls) as they stream in; the CLI is
killed at the first one past the limit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.records import Usage
from skillopt_ci.core.trajectory import Step
from skillopt_ci.envs.agent_cli import AgentEnvironment, AgentOptions
from skillopt_ci.envs.agent_output import Parsed, json_events, stamp
from skillopt_ci.models.registry import DEFAULT_AZURE_RESPONSES_API_VERSION

KEY_VARIABLE = "SKILLOPT_CODEX_API_KEY"
PROVIDER_ID = "skillopt"
SANDBOX_MODES = ("read-only", "workspace-write", "danger-full-access")
OPENAI_URL = "https://api.openai.com/v1"
TURN_ITEMS = frozenset({"agent_message", "command_execution", "file_change", "mcp_tool_call", "web_search"})


@dataclass(frozen=True)
class CodexOptions(AgentOptions):
    sandbox: str = "workspace-write"


class CodexEnvironment(AgentEnvironment):
    name = "codex"
    Options = CodexOptions
    instructions_name = "AGENTS.md"
    providers = ("openai", "azure-openai", "openai-compatible")

    def setup(self) -> None:
        super().setup()
        if self.options.sandbox not in SANDBOX_MODES:
            raise InputError(f"environment codex: sandbox must be one of {', '.join(SANDBOX_MODES)}, "
                             f"got {self.options.sandbox!r}", where=self.where)

    def install_dir(self, skill_name: str) -> str:
        return f".agents/skills/{skill_name}"

    def inner_sandbox(self) -> str:
        """Codex's own sandbox mode. Inside our bubblewrap boundary (read-only system, only the
        workspace writable, no checkout: docs/sandbox.md) Codex's own sandbox cannot start (it is
        bubblewrap too, and a sandbox nested in ours has no namespaces to make), so the boundary
        is the sandbox and Codex is told it has full access to what it sees; elsewhere the
        suite's mode."""
        from skillopt_ci.sandbox import isolation

        return "danger-full-access" if isolation() == "bwrap" else self.options.sandbox

    def prepare_home(self, home: Path, endpoint: Any) -> dict[str, str]:
        (home / "config.toml").write_text(config_toml(endpoint, self.inner_sandbox()), encoding="utf-8")
        return {"CODEX_HOME": str(home), "HOME": str(home), KEY_VARIABLE: endpoint.api_key}

    def upstream(self, endpoint: Any) -> str | None:
        return codex_base_url(endpoint)

    def argv(self, prompt: str, workspace: Path, endpoint: Any) -> list[str]:
        return [self.binary, "exec", "--json", "--skip-git-repo-check", "--ephemeral", "--disable", "plugins",
                "-C", str(workspace), "--", prompt]

    def parse(self, stdout: str, times: Sequence[float] = ()) -> Parsed:
        return parse_events(stdout, times)

    def unreachable(self, line: str) -> str | None:
        """Codex retries an unreachable endpoint for minutes ("Reconnecting... waiting for
        network") whatever its retry settings; each such ``error`` event is one retry."""
        if '"Reconnecting' not in line:
            return None
        try:
            event = json.loads(line)
        except ValueError:
            return None
        message = str(event.get("message", "")) if isinstance(event, dict) and event.get("type") == "error" else ""
        return message if message.startswith("Reconnecting") else None

    def is_turn(self, line: str) -> bool:
        if '"item.completed"' not in line:
            return False
        try:
            item = json.loads(line).get("item") or {}
        except (ValueError, AttributeError):
            return False
        return isinstance(item, dict) and item.get("type") in TURN_ITEMS


def _toml(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def codex_base_url(endpoint: Any) -> str:
    """The base URL Codex calls for ``endpoint`` (Azure's gets its ``/openai``)."""
    base_url = (endpoint.base_url or OPENAI_URL).rstrip("/")
    if endpoint.provider == "azure-openai" and not base_url.endswith("/openai") and "/openai/" not in base_url:
        base_url += "/openai"
    return base_url


def responses_api_version(version: str) -> str:
    """Codex always speaks the Responses API, which Azure serves from ``2025-03-01-preview`` on: an
    older ``api-version`` (the Chat Completions default an Azure target gets without ``api:
    responses``) becomes the Responses default rather than a request Azure refuses."""
    return version if version >= "2025-03-01-preview" else DEFAULT_AZURE_RESPONSES_API_VERSION


def config_toml(endpoint: Any, sandbox: str) -> str:
    """``config.toml`` for one rollout: the target model as the only provider. Holds no key (and,
    run through the forwarder, ``endpoint`` is the forwarder's URL and a per-rollout credential)."""
    base_url = codex_base_url(endpoint)
    extra = ""
    if endpoint.provider == "azure-openai" and endpoint.api_version:
        extra = f"query_params = {{ \"api-version\" = {_toml(responses_api_version(endpoint.api_version))} }}\n"
    return (
        f"model = {_toml(endpoint.model)}\n"
        f"model_provider = \"{PROVIDER_ID}\"\n"
        "approval_policy = \"never\"\n"
        f"sandbox_mode = {_toml(sandbox)}\n"
        "check_for_update_on_startup = false\n"
        "\n"
        f"[model_providers.{PROVIDER_ID}]\n"
        "name = \"skillopt-ci target\"\n"
        f"base_url = {_toml(base_url)}\n"
        f"env_key = \"{KEY_VARIABLE}\"\n"
        "wire_api = \"responses\"\n"
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n"
        f"{extra}"
        "\n[shell_environment_policy]\ninherit = \"core\"\n"
        "\n[analytics]\nenabled = false\n"
        "\n[feedback]\nenabled = false\n"
        "\n[otel]\nexporter = \"none\"\nlog_user_prompt = false\n"
        "\n[skills.bundled]\nenabled = false\n"
    )


def parse_events(stdout: str, times: Sequence[float] = ()) -> Parsed:
    """The steps, final message, usage and failure of one ``codex exec --json`` output
    (``times``: when each line arrived, for the steps' ``elapsed_s``)."""
    parsed = Parsed()
    started: set[str] = set()
    for event, elapsed in json_events(stdout, times):
        before = len(parsed.steps)
        _event(event, parsed, started)
        stamp(parsed.steps, before, elapsed)
    return parsed


def _event(event: dict[str, Any], parsed: Parsed, started: set[str]) -> None:
    kind = event.get("type")
    if kind in ("item.started", "item.completed") and isinstance(event.get("item"), dict):
        _item(event["item"], kind == "item.completed", parsed, started)
    elif kind == "turn.completed":
        usage = event.get("usage") or {}
        parsed.usage = parsed.usage + Usage(_int(usage.get("input_tokens")), _int(usage.get("output_tokens")))
    elif kind == "turn.failed":
        error = event.get("error") or {}
        parsed.failed = str(error.get("message") if isinstance(error, dict) else error) or "turn.failed"
        parsed.steps.append(Step("error", text=f"turn failed: {parsed.failed}", is_error=True))
    elif kind == "error":
        parsed.steps.append(Step("error", text=str(event.get("message", "")), is_error=True))


def _item(item: dict[str, Any], completed: bool, parsed: Parsed, started: set[str]) -> None:
    kind, item_id = item.get("type"), str(item.get("id", ""))
    if kind == "command_execution":
        name = "exec_command"
        arguments = json.dumps({"command": item.get("command", "")})
    elif kind == "file_change":
        name = "apply_patch"
        arguments = json.dumps({"changes": item.get("changes", [])})
    elif kind == "mcp_tool_call":
        name = f"{item.get('server', '')}.{item.get('tool', '')}"
        arguments = json.dumps(item.get("arguments", {}))
    else:
        if completed:
            _message_item(kind, item, parsed)
        return
    if item_id not in started:
        started.add(item_id)
        parsed.steps.append(Step("tool_call", name=name, arguments=arguments, call_id=item_id))
    if completed:
        parsed.turns += 1
        text, failed = _result(kind, item)
        parsed.steps.append(Step("tool_result", name=name, call_id=item_id, text=text, is_error=failed))


def _message_item(kind: Any, item: dict[str, Any], parsed: Parsed) -> None:
    if kind == "agent_message":
        parsed.turns += 1
        parsed.output = str(item.get("text", ""))
        parsed.steps.append(Step("model", text=parsed.output))
    elif kind == "reasoning":
        parsed.steps.append(Step("model", name="reasoning", text=str(item.get("text", ""))))
    elif kind == "error":
        parsed.steps.append(Step("error", text=str(item.get("message", ""))))
    elif kind in TURN_ITEMS:
        parsed.turns += 1


def _result(kind: str, item: dict[str, Any]) -> tuple[str, bool]:
    status = item.get("status")
    if kind == "command_execution":
        code = item.get("exit_code")
        output = str(item.get("aggregated_output", ""))
        return f"exit code {code}\n{output}" if code is not None else output, code != 0 or status == "failed"
    if kind == "file_change":
        changes = item.get("changes") or []
        lines = [f"{c.get('kind', '?')} {c.get('path', '?')}" for c in changes if isinstance(c, dict)]
        return "\n".join(lines) or str(status), status == "failed"
    error = item.get("error")
    if error:
        return str(error.get("message") if isinstance(error, dict) else error), True
    return json.dumps(item.get("result", "")), status == "failed"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
