"""The real Codex and Claude Code CLIs, headless, against the scripted model server (offline):
the scripted agent reads the installed skill through the CLI's own tool, runs a command and
writes a file whose content follows the skill's rules. Skipped when the binaries are absent
(looked up on PATH and in ``$SKILLOPT_AGENT_CLIS/node_modules/.bin``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.agent_bins import agent_bin
from helpers.agents import AgentScript
from skillopt_ci.sim import Fault, ScriptedModelServer

RULED = "---\nname: shout\ndescription: How to write answers for this project.\n---\n# Shout\n" \
        "Write the answer in upper case.\n"
PLAIN = "---\nname: shout\ndescription: How to write answers for this project.\n---\n# Shout\n" \
        "Write the answer.\n"
PROMPT = "Write the answer to answer.txt. answer: hello world"
KEY = "sk-scripted-test-key"


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(AgentScript()) as srv:
        yield srv


def _workspace(tmp_path: Path, skills_dir: str, body: str, instructions: str | None = None) -> tuple[Path, Path]:
    workspace, home = tmp_path / "ws", tmp_path / "home"
    skill = workspace / skills_dir / "shout"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(body)
    if instructions is not None:
        name = "AGENTS.md" if skills_dir.startswith(".agents") else "CLAUDE.md"
        (workspace / name).write_text(instructions)
    home.mkdir()
    return workspace, home


# Codex's own workspace-write sandbox is bubblewrap on Linux; where bwrap is installed but cannot
# make the namespaces Codex asks for (a container as root), its commands fail and nothing is
# written. The product runs Codex inside its own boundary then (envs/codex.py: inner_sandbox).
CODEX_SANDBOX = "danger-full-access" if shutil.which("bwrap") else "workspace-write"


def run_codex(server: ScriptedModelServer, tmp_path: Path, body: str, model: str,
              instructions: str | None = None) -> tuple[subprocess.CompletedProcess, Path]:
    workspace, home = _workspace(tmp_path, ".agents/skills", body, instructions)
    codex_home = home / ".codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(f"""model = "{model}"
model_provider = "scripted"
approval_policy = "never"
sandbox_mode = "{CODEX_SANDBOX}"
[model_providers.scripted]
name = "scripted"
base_url = "{server.openai_base_url}"
wire_api = "responses"
env_key = "SCRIPTED_API_KEY"
request_max_retries = 0
stream_max_retries = 0
[analytics]
enabled = false
[feedback]
enabled = false
[otel]
exporter = "none"
[skills.bundled]
enabled = false
""")
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "CODEX_HOME": str(codex_home), "SCRIPTED_API_KEY": KEY}
    argv = [str(agent_bin("codex")), "exec", "--json", "--skip-git-repo-check", "--ephemeral", "--disable", "plugins",
            "-C", str(workspace), PROMPT]
    done = subprocess.run(argv, cwd=workspace, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120)
    return done, workspace


def run_claude(server: ScriptedModelServer, tmp_path: Path, body: str,
               instructions: str | None = None) -> tuple[subprocess.CompletedProcess, Path]:
    workspace, home = _workspace(tmp_path, ".claude/skills", body, instructions)
    # Without TMPDIR the CLI keeps per-user files in the system's /tmp (claude-<uid>/), outside the
    # test's folder, and leaves them there; the environment's rollouts point it at their home too.
    temp = home / "tmp"
    temp.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "TMPDIR": str(temp),
           "ANTHROPIC_BASE_URL": server.anthropic_base_url,
           "ANTHROPIC_API_KEY": KEY, "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
           "DISABLE_ERROR_REPORTING": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "CLAUDE_CODE_MAX_RETRIES": "0"}
    argv = [str(agent_bin("claude")), "-p", PROMPT, "--output-format", "stream-json", "--verbose", "--max-turns", "8",
            "--model", "claude-sonnet-test", "--permission-mode", "acceptEdits",
            "--allowedTools", "Bash,Read,Write,Edit,Glob,Grep,Skill"]
    done = subprocess.run(argv, cwd=workspace, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120)
    return done, workspace


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def _calls(server: ScriptedModelServer) -> list[dict]:
    """Every tool call the scripted agent made, as the CLI sent it back in its last request."""
    last = server.calls[-1].request
    return [call for message in last.messages for call in message.get("tool_calls", ())]


@pytest.mark.parametrize(("model", "body", "expected", "writer"), [
    ("gpt-5.5", RULED, "HELLO WORLD\n", "apply_patch"),
    ("gpt-test", PLAIN, "hello world\n", "exec_command"),
])
def test_codex_reads_the_skill_runs_a_command_and_writes_the_answer(server, tmp_path, model, body, expected, writer):
    done, workspace = run_codex(server, tmp_path, body, model)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (workspace / "answer.txt").read_text() == expected
    calls = _calls(server)
    skill_path = str(workspace / ".agents/skills/shout/SKILL.md")
    assert json.loads(calls[0]["arguments"])["cmd"] == f"cat {skill_path}"
    assert [c["name"] for c in calls] == ["exec_command", "exec_command", writer]
    assert body.split("---\n")[-1] in server.calls[1].request.tool_results[0]["content"]
    first = server.calls[0].request
    assert "<skills_instructions>" in first.system and "(file: r0/shout/SKILL.md)" in first.system
    assert body.split("---\n")[-1] not in first.system + "".join(m["content"] for m in first.messages)
    stream = events(done.stdout)
    kinds = [e["item"]["type"] for e in stream if e["type"] == "item.completed"]
    assert kinds.count("command_execution") >= 2 and kinds[-1] == "agent_message"
    assert stream[-1]["type"] == "turn.completed" and stream[-1]["usage"]["input_tokens"] > 0
    assert all(call.request.headers["authorization"] == f"Bearer {KEY}" for call in server.calls)


@pytest.mark.parametrize(("body", "expected"), [(RULED, "HELLO WORLD\n"), (PLAIN, "hello world\n")])
def test_claude_code_reads_the_skill_runs_a_command_and_writes_the_answer(server, tmp_path, body, expected):
    done, workspace = run_claude(server, tmp_path, body)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (workspace / "answer.txt").read_text() == expected
    assert [c["name"] for c in _calls(server)] == ["Skill", "Bash", "Write"]
    after_skill = server.calls[1].request
    assert after_skill.tool_results[0]["content"] == "Launching skill: shout"
    assert body.split("---\n")[-1] in after_skill.messages[-1]["content"]
    stream = events(done.stdout)
    init, result = stream[0], stream[-1]
    assert init["subtype"] == "init" and init["skills"][0] == "shout"
    assert result["type"] == "result" and result["is_error"] is False and result["num_turns"] == 5
    assert result["result"] == "Done: the answer is in answer.txt." and result["total_cost_usd"] > 0
    assert all(call.request.headers["x-api-key"] == KEY for call in server.calls)


def test_an_instructions_file_in_context_counts_like_the_skill_body(server, tmp_path):
    rule = "# Shout\nWrite the answer in upper case.\n"
    done, workspace = run_codex(server, tmp_path / "codex", PLAIN, "gpt-test", instructions=rule)
    assert done.returncode == 0 and (workspace / "answer.txt").read_text() == "HELLO WORLD\n"
    done, workspace = run_claude(server, tmp_path / "claude", PLAIN, instructions=rule)
    assert done.returncode == 0 and (workspace / "answer.txt").read_text() == "HELLO WORLD\n"


def test_codex_fails_the_turn_on_a_server_error(server, tmp_path):
    server.inject(Fault.server_error())
    done, workspace = run_codex(server, tmp_path, RULED, "gpt-5.5")
    assert done.returncode == 1
    assert events(done.stdout)[-1]["type"] == "turn.failed"
    assert not (workspace / "answer.txt").exists() and server.call_count == 1


def test_codex_fails_the_turn_when_the_stream_is_cut(server, tmp_path):
    server.inject(Fault.drop())
    done, _ = run_codex(server, tmp_path, RULED, "gpt-5.5")
    assert done.returncode == 1
    assert "stream disconnected" in events(done.stdout)[-1]["error"]["message"]


def test_claude_code_reports_a_server_error_as_an_errored_result(server, tmp_path):
    server.inject(Fault.server_error())
    done, _ = run_claude(server, tmp_path, RULED)
    assert done.returncode == 1
    result = events(done.stdout)[-1]
    assert result["is_error"] is True and result["api_error_status"] == 500


def test_claude_code_repeats_a_cut_stream_without_streaming(server, tmp_path):
    server.inject(Fault.drop())
    done, workspace = run_claude(server, tmp_path, RULED)
    assert done.returncode == 0 and (workspace / "answer.txt").read_text() == "HELLO WORLD\n"
    first, retry = server.calls[0], server.calls[1]
    assert first.fault == "drop" and first.request.params["stream"] is True
    assert not retry.request.params.get("stream") and retry.request.messages == first.request.messages


def cli_temp_folder(temp: Path, workspace: Path) -> Path:
    """Where Claude Code keeps a project's per-user temporary files: ``claude-<uid>/`` in its
    temporary folder, then the project's path with every character but [A-Za-z0-9] a '-'."""
    return temp / f"claude-{os.getuid()}" / re.sub(r"[^A-Za-z0-9]", "-", str(workspace))


def test_claude_code_keeps_its_temporary_files_in_the_tests_temp_folder_not_the_systems(server, tmp_path):
    done, workspace = run_claude(server, tmp_path, RULED)
    assert done.returncode == 0, done.stderr[-2000:]
    assert cli_temp_folder(tmp_path / "home/tmp", workspace).is_dir()  # the premise: the CLI wrote its files
    assert not cli_temp_folder(Path("/tmp"), workspace).exists()
