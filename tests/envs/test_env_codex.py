"""The ``codex`` environment: its event parser, config.toml, workspace layout, the environment the
CLI gets, a missing CLI, the wall-clock kill and failed runs (with a stand-in ``codex`` script),
and the real ``codex exec`` end to end against the scripted model server when it is installed."""

from __future__ import annotations

import asyncio
import json
import stat
import sys
import textwrap
from pathlib import Path
from types import MappingProxyType

import pytest
import yaml

from helpers.cli import run_cli
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.records import Usage
from skillopt_ci.core.redact import SECRETS
from skillopt_ci.core.skill import load_skill
from skillopt_ci.core.task import Task
from skillopt_ci.envs.agent_cli import skill_document
from skillopt_ci.envs.base import RolloutRequest
from skillopt_ci.envs.codex import KEY_VARIABLE, config_toml, parse_events
from skillopt_ci.envs.registry import build_environment
from skillopt_ci.inputs.config import Config
from skillopt_ci.models.cache import ResponseCache
from skillopt_ci.models.pool import ModelPool
from skillopt_ci.models.registry import Endpoint, ModelSpec

KEY = "sk-codexfake-0123456789abcdefXYZ"

EVENTS = [
    {"type": "thread.started", "thread_id": "t-1"},
    {"type": "turn.started"},
    {"type": "item.started", "item": {"id": "item_0", "type": "command_execution",
                                      "command": "bash -lc 'cat .agents/skills/demo/SKILL.md'",
                                      "aggregated_output": "", "exit_code": None, "status": "in_progress"}},
    {"type": "item.completed", "item": {"id": "item_0", "type": "command_execution",
                                        "command": "bash -lc 'cat .agents/skills/demo/SKILL.md'",
                                        "aggregated_output": "Always greet.\n", "exit_code": 0, "status": "completed"}},
    {"type": "item.completed", "item": {"id": "item_1", "type": "command_execution", "command": "false",
                                        "aggregated_output": "", "exit_code": 1, "status": "failed"}},
    {"type": "item.completed", "item": {"id": "item_2", "type": "file_change", "status": "completed",
                                        "changes": [{"path": "/ws/out.txt", "kind": "add"}]}},
    {"type": "item.completed", "item": {"id": "item_3", "type": "agent_message", "text": "done: hello"}},
    {"type": "turn.completed", "usage": {"input_tokens": 1200, "cached_input_tokens": 0, "output_tokens": 80}},
]


def jsonl(events) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def test_the_event_stream_becomes_steps_output_and_usage():
    parsed = parse_events("not json\n" + jsonl(EVENTS))
    kinds = [(s.kind, s.name, s.is_error) for s in parsed.steps]
    assert kinds == [("tool_call", "exec_command", False), ("tool_result", "exec_command", False),
                     ("tool_call", "exec_command", False), ("tool_result", "exec_command", True),
                     ("tool_call", "apply_patch", False), ("tool_result", "apply_patch", False),
                     ("model", None, False)]
    assert json.loads(parsed.steps[0].arguments) == {"command": "bash -lc 'cat .agents/skills/demo/SKILL.md'"}
    assert "Always greet." in parsed.steps[1].text and "add /ws/out.txt" in parsed.steps[5].text
    assert parsed.output == "done: hello" and parsed.failed is None and parsed.turns == 4
    assert parsed.usage == Usage(1200, 80)


def test_a_failed_turn_fails_the_rollout():
    parsed = parse_events(jsonl([{"type": "turn.started"},
                                 {"type": "error", "message": "stream disconnected"},
                                 {"type": "turn.failed", "error": {"message": "unexpected status 500"}}]))
    assert parsed.failed == "unexpected status 500"
    assert [s.kind for s in parsed.steps] == ["error", "error"] and all(s.is_error for s in parsed.steps)


def test_config_toml_routes_to_the_target_and_holds_no_key():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    endpoint = Endpoint("openai-compatible", "my-model", KEY, "http://127.0.0.1:8000/v1/")
    text = config_toml(endpoint, "read-only")
    config = tomllib.loads(text)
    provider = config["model_providers"][config["model_provider"]]
    assert (config["model"], config["sandbox_mode"], config["approval_policy"]) == ("my-model", "read-only", "never")
    assert provider["base_url"] == "http://127.0.0.1:8000/v1" and provider["wire_api"] == "responses"
    assert provider["env_key"] == KEY_VARIABLE
    assert provider["request_max_retries"] == provider["stream_max_retries"] == 0
    assert config["skills"]["bundled"]["enabled"] is False and config["analytics"]["enabled"] is False
    assert config["shell_environment_policy"]["inherit"] == "core"
    assert KEY not in text
    azure = tomllib.loads(config_toml(Endpoint("azure-openai", "dep", KEY, "https://x.openai.azure.com",
                                               "2025-04-01-preview", api="responses"), "workspace-write"))
    assert azure["model_providers"]["skillopt"]["base_url"] == "https://x.openai.azure.com/openai"
    assert azure["model_providers"]["skillopt"]["query_params"] == {"api-version": "2025-04-01-preview"}


def test_an_azure_target_without_api_responses_still_sends_codex_a_responses_api_version():
    """Without ``api: responses`` an Azure target gets the Chat Completions default (2024-10-21),
    which Azure refuses for the Responses API that Codex speaks."""
    from skillopt_ci.models.registry import ModelSpec, resolve_endpoint

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    spec = ModelSpec.from_dict("target", {"provider": "azure-openai", "model": "dep",
                                          "base_url": "https://x.openai.azure.com"})
    endpoint = resolve_endpoint(spec, {"AZURE_OPENAI_API_KEY": KEY})
    assert endpoint.api_version == "2024-10-21"
    config = tomllib.loads(config_toml(endpoint, "workspace-write"))
    assert config["model_providers"]["skillopt"]["query_params"] == {"api-version": "2025-04-01-preview"}
    newer = tomllib.loads(config_toml(Endpoint("azure-openai", "dep", KEY, "https://x.openai.azure.com",
                                               "2025-05-01-preview"), "workspace-write"))
    assert newer["model_providers"]["skillopt"]["query_params"] == {"api-version": "2025-05-01-preview"}


# -- a stand-in codex binary ---------------------------------------------------------------------

def fake_codex(folder: Path, body: str) -> Path:
    """An executable ``codex`` in ``folder``: ``--version`` prints a version, else runs ``body``
    (Python, with ``record`` = a file in ``folder`` for what it saw)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "codex"
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(f"""\
        import json, os, subprocess, sys, time
        if sys.argv[1:] == ["--version"]:
            print("codex-cli 9.9.9-test"); sys.exit(0)
        record = {str(folder / "seen.json")!r}
        """) + textwrap.dedent(body))
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


RECORDING = """\
    files = sorted(os.path.relpath(os.path.join(d, f)) for d, _, fs in os.walk(".") for f in fs)
    home = os.environ.get("CODEX_HOME", "")
    config = open(os.path.join(home, "config.toml")).read() if home else ""
    json.dump({"argv": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd(), "files": files,
               "config": config}, open(record, "w"))
    open("answer.txt", "w").write("hello\\n")
    for event in EVENTS:
        print(json.dumps(event), flush=True)
"""


def make_pool(tmp_path: Path, provider: str = "openai-compatible") -> ModelPool:
    spec = ModelSpec.from_dict("target", {"provider": provider, "model": "gpt-4o-mini",
                                          "base_url": "http://127.0.0.1:9/v1", "max_retries": 0})
    cfg = Config(root=tmp_path, file="skillopt.yml", models=MappingProxyType({"target": spec}),
                 pricing={"gpt-4o-mini": {"input": 1.0, "output": 2.0}})
    env = {"OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": KEY}
    return ModelPool(cfg, ResponseCache(tmp_path / "cache.sqlite", "off"), env=env)


def skill_folder(root: Path) -> Path:
    folder = root / "skills" / "demo"
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: demo\ndescription: Greets politely.\n---\nAlways greet.\n")
    (folder / "scripts" / "greet.sh").write_text("echo hello\n")
    return folder


def rollout(tmp_path: Path, options: dict, body: str, provider: str = "openai-compatible"):
    suite = tmp_path / "suite"
    suite.mkdir(exist_ok=True)
    (suite / "input.txt").write_text("data\n")
    binary = fake_codex(tmp_path / "bin", "EVENTS = " + repr(EVENTS).replace("None", "None") + "\n" + textwrap.dedent(body))
    env = build_environment({"type": "codex", "binary": str(binary), **options}, suite)
    skill = load_skill(skill_folder(tmp_path) / "SKILL.md")
    task = Task(id="t1", input="hi", fields={"files": ["input.txt"]})
    request = RolloutRequest(skill=skill, task=task, prompt="Greet the user.", suite_dir=suite)
    pool = make_pool(tmp_path, provider)
    return env, asyncio.run(env.run(request, pool)), pool, tmp_path / "bin" / "seen.json"


def test_a_rollout_installs_the_skill_and_gives_the_cli_only_what_it_needs(tmp_path, unisolated):
    env, result, pool, seen_file = rollout(tmp_path, {"instructions_file": True}, RECORDING)
    try:
        seen = json.loads(seen_file.read_text())
        assert result.error is None and result.output == "done: hello"
        assert seen["files"] == [".agents/skills/demo/SKILL.md", ".agents/skills/demo/scripts/greet.sh",
                                 "AGENTS.md", "input.txt"]
        assert (result.workspace / "AGENTS.md").read_text().strip() == "Always greet."
        assert result.files == ("answer.txt",)
        assert seen["argv"][:2] == ["exec", "--json"] and seen["argv"][-1] == "Greet the user."
        assert seen["argv"][seen["argv"].index("-C") + 1] == str(result.workspace)
        home = Path(seen["env"]["CODEX_HOME"])
        # The CLI holds a per-rollout credential for the forwarder, never the key nor the provider's URL.
        credential = seen["env"][KEY_VARIABLE]
        assert credential.startswith("skillopt-rollout-") and seen["env"]["HOME"] == str(home)
        assert not home.is_relative_to(result.workspace)
        assert not any(k in seen["env"] for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"))
        assert KEY not in json.dumps(seen)
        assert "127.0.0.1:9/" not in seen["config"] and "/v1" in seen["config"]
        assert env.identity()["cli_version"] == "codex-cli 9.9.9-test"
        # Codex reports tokens only: priced with our table and counted in the ledger.
        assert result.usage == Usage(1200, 80) and result.cost_usd == pytest.approx((1200 * 1.0 + 80 * 2.0) / 1e6)
        assert pool.total_spend().usage == Usage(1200, 80)
    finally:
        result.close()
    assert not result.workspace.exists() and not home.exists()


def test_verify_runs_in_the_final_workspace(tmp_path, unisolated):
    _, result, _, seen_file = rollout(tmp_path, {"verify": "grep -q hello answer.txt && echo verified"}, RECORDING)
    try:
        assert "AGENTS.md" not in json.loads(seen_file.read_text())["files"]  # instructions_file is off
        assert [s.name for s in result.steps[-2:]] == ["verify", "verify"]
        assert "verified" in result.steps[-1].text and not result.steps[-1].is_error
    finally:
        result.close()


def test_a_missing_cli_is_an_input_error_naming_the_install_command(tmp_path, unisolated, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(InputError) as err:
        build_environment({"type": "codex"}, tmp_path)
    assert "'codex' was not found on PATH" in err.value.message
    assert "npm install --prefix <dir> @openai/codex@" in err.value.message and "install-agents" in err.value.message


def test_validate_exits_2_when_the_cli_is_missing(tmp_path, unisolated):
    root = tmp_path / "proj"
    suite = root / "suite"
    suite.mkdir(parents=True)
    skill_folder(root)
    (suite / "suite.yaml").write_text(yaml.safe_dump({
        "name": "demo", "environment": {"type": "codex", "binary": "no-such-codex-cli"},
        "scorer": {"type": "contains"}}))
    for split in ("train", "val", "test"):
        (suite / f"{split}.jsonl").write_text(json.dumps({"id": f"{split}-1", "input": "hi"}) + "\n")
    (root / "skillopt.yml").write_text(yaml.safe_dump({
        "version": 1, "models": {"target": {"provider": "openai-compatible", "model": "m",
                                            "base_url": "http://127.0.0.1:9/v1"}},
        "skills": [{"path": "skills/demo/SKILL.md", "suite": "suite"}]}))
    result = run_cli("validate", cwd=root)
    assert result.code == 2, result.out + result.err
    assert "the agent CLI 'no-such-codex-cli' was not found on PATH" in result.err
    assert "skillopt-ci install-agents" in result.err


def test_max_model_calls_defaults_to_max_turns_and_leaves_the_identity_of_suites_without_it(tmp_path, unisolated):
    binary = fake_codex(tmp_path / "bin", RECORDING)
    plain = build_environment({"type": "codex", "binary": str(binary), "max_turns": 7}, tmp_path)
    assert plain.max_calls == 7 and "max_model_calls" not in plain.identity()
    capped = build_environment({"type": "codex", "binary": str(binary), "max_model_calls": 30}, tmp_path)
    assert capped.max_calls == 30 and capped.identity()["max_model_calls"] == 30
    with pytest.raises(InputError, match="max_model_calls must be positive, got 0"):
        build_environment({"type": "codex", "binary": str(binary), "max_model_calls": 0}, tmp_path)


def test_the_wrong_provider_is_an_input_error(tmp_path, unisolated):
    with pytest.raises(InputError, match="needs a target model with provider openai"):
        rollout(tmp_path, {}, RECORDING, provider="anthropic")


def test_a_hanging_cli_is_killed_with_its_children_at_the_time_limit(tmp_path, unisolated):
    body = """\
        child = subprocess.Popen(["sleep", "300"])
        open(record, "w").write(str(child.pid))
        print(json.dumps(EVENTS[2]), flush=True)
        time.sleep(300)
    """
    _, result, _, seen_file = rollout(tmp_path, {"time_limit_s": 2}, body)
    try:
        assert result.error["kind"] == "time_limit" and "time_limit_s = 2 s" in result.error["message"]
        assert [s.kind for s in result.steps] == ["tool_call", "error"]  # the steps so far are kept
        child = int(seen_file.read_text())
        assert not _alive(child)
    finally:
        result.close()


def test_a_cli_waiting_for_an_unreachable_endpoint_is_stopped_as_a_connection_error(tmp_path, unisolated):
    # Real codex prints this every few seconds for minutes, whatever its retry settings.
    body = """\
        waiting = {"type": "error", "message": "Reconnecting... waiting for network (Connection failed)"}
        print(json.dumps(waiting), flush=True)
        time.sleep(0.2)
        print(json.dumps(waiting), flush=True)
        time.sleep(300)
    """
    _, result, _, _ = rollout(tmp_path, {"time_limit_s": 120}, body)
    try:
        assert result.error["kind"] == "connection"
        assert "could not be reached (Reconnecting... waiting for network" in result.error["message"]
        retries = [st for st in result.steps if st.kind == "error" and st.text.startswith("Reconnecting")]
        assert len(retries) == 2  # stopped at the second one, not at the time limit
    finally:
        result.close()


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return status != "Z"


def test_a_non_zero_exit_is_an_errored_rollout_with_the_redacted_stderr_tail(tmp_path, unisolated):
    SECRETS.add(KEY)
    body = f"""\
        print(json.dumps(EVENTS[3]), flush=True)
        sys.stderr.write("x" * 5000 + "\\nfatal: cannot reach model with key " + os.environ[{KEY_VARIABLE!r}] + "\\n")
        sys.exit(3)
    """
    _, result, _, _ = rollout(tmp_path, {}, body)
    try:
        assert result.error["kind"] == "agent_failed"
        message = result.error["message"]
        # What the CLI can print is the rollout's credential, never the key.
        assert message.startswith("codex exit code 3") and "cannot reach model with key skillopt-rollout-" in message
        assert KEY not in message and len(message) < 2_500
        assert [s.kind for s in result.steps] == ["tool_call", "tool_result", "error"]
    finally:
        result.close()


def test_a_cli_past_max_turns_is_killed_at_the_turn_that_exceeds_it(tmp_path, unisolated):
    body = """\
        for n in range(1000):
            item = {"id": f"item_{n}", "type": "command_execution", "command": "true", "aggregated_output": "",
                    "exit_code": 0, "status": "completed"}
            print(json.dumps({"type": "item.completed", "item": item}), flush=True)
            time.sleep(0.05)
    """
    _, result, _, _ = rollout(tmp_path, {"max_turns": 3, "time_limit_s": 100}, body)
    try:
        assert result.error["kind"] == "max_turns" and "max_turns = 3" in result.error["message"]
        results = [s for s in result.steps if s.kind == "tool_result"]
        assert 4 <= len(results) < 1000  # stopped as the fourth arrived, not at the time limit
    finally:
        result.close()


# -- the real CLI ----------------------------------------------------------------------------------

def test_a_skill_without_front_matter_gets_a_name_and_description_to_be_listed_by():
    from skillopt_ci.core.skill import parse_skill

    plain = parse_skill("# Greeting\n\nAlways greet politely.\n", path="skills/greeter.md")
    document = skill_document(plain)
    assert document.startswith('---\nname: "greeter"\ndescription: "Greeting"\n---\n# Greeting')
    partial = parse_skill("---\nname: greeter\n---\nAlways greet politely.\n", path="x/SKILL.md")
    assert skill_document(partial) == '---\ndescription: "Always greet politely."\nname: greeter\n---\nAlways greet politely.\n'
    full = parse_skill("---\nname: g\ndescription: d\n---\nbody\n", path="x/SKILL.md")
    assert skill_document(full) == full.text
