"""The ``claude-code`` environment: its stream-json parser on captured output, its set-up (the
home, the variables, the command line), failure handling with fake binaries, and the real
``claude -p`` end to end against the scripted model server."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path
from types import MappingProxyType

import pytest
import yaml

from helpers.agent_bins import agent_bin
from helpers.agents import AgentScript
from helpers.claude_project import FAKE_KEY, SUITE_DATA, claude_project
from helpers.cli import run_cli
from helpers.paths import DATA
from skillopt_ci.envs.agent_access import RELAY_ORIGIN
from skillopt_ci.envs.claude_stream import parse_stream
from skillopt_ci.models.forwarder import shared_forwarder
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.protocols import ScriptedReply

STREAMS = DATA / "claude-stream"


def stream(name: str) -> str:
    return (STREAMS / f"{name}.jsonl").read_text()


def test_a_finished_run_becomes_steps_output_and_spend():
    parsed = parse_stream(stream("success"))
    assert parsed.failed is None
    assert parsed.finish_reason == "completed"  # the result event's terminal_reason
    assert parsed.output == "All done."
    assert parsed.cost_usd == pytest.approx(0.004)
    assert (parsed.usage.input_tokens, parsed.usage.output_tokens) == (500, 100)
    assert parsed.num_turns == 6
    kinds = [(s.kind, s.name) for s in parsed.steps]
    assert kinds[0] == ("observation", "skills")
    assert "demo-skill" in parsed.steps[0].text and parsed.skills[0] == "demo-skill"
    calls = [s for s in parsed.steps if s.kind == "tool_call"]
    assert [c.name for c in calls] == ["Skill", "Bash", "Write", "Bash"]
    assert json.loads(calls[0].arguments) == {"skill": "demo-skill"}
    results = [s for s in parsed.steps if s.kind == "tool_result"]
    assert [r.name for r in results] == ["Skill", "Bash", "Write", "Bash"]
    assert [r.is_error for r in results] == [False, False, False, True]  # `exit 3` is an error result
    assert results[-1].text == "Exit code 3"
    # The skill's body reached the agent after its Skill call: recorded as what it observed.
    body = parsed.steps[kinds.index(("tool_result", "Skill")) + 1]
    assert body.kind == "observation" and "Always write out.txt." in body.text
    assert parsed.steps[-1].kind == "model" and parsed.steps[-1].text == "All done."


def test_a_permission_denial_is_an_error_step_and_max_turns_fails_the_run():
    parsed = parse_stream(stream("denied_max_turns"))
    assert parsed.failed == "Reached maximum number of turns (3)"
    assert parsed.finish_reason == "max_turns"
    denials = [s for s in parsed.steps if s.kind == "error"]
    assert len(denials) == 1  # the system event and the result's permission_denials name the same call
    assert denials[0].name == "Write" and denials[0].is_error and "permission" in denials[0].text
    assert parsed.steps[-1].kind == "tool_result" and parsed.steps[-1].is_error


def test_a_denial_only_in_the_result_event_is_still_recorded():
    lines = [json.loads(x) for x in stream("denied_max_turns").splitlines()]
    kept = [x for x in lines if x.get("subtype") != "permission_denied"]
    parsed = parse_stream("\n".join(json.dumps(x) for x in kept))
    denials = [s for s in parsed.steps if s.kind == "error"]
    assert [(d.name, d.call_id) for d in denials] == [("Write", "toolu_3")]


def test_an_api_error_is_a_failure_and_the_clis_own_words_are_not_the_models():
    parsed = parse_stream(stream("connection_refused"))
    assert parsed.failed and parsed.failed.startswith("connection_failed")
    assert parsed.finish_reason == "api_error"
    assert not [s for s in parsed.steps if s.kind == "model"]
    assert [s.kind for s in parsed.steps] == ["observation", "error"]


def test_a_stream_cut_short_or_holding_noise_is_a_failure_not_a_crash():
    text = stream("success")
    cut = "\n".join(text.splitlines()[:4])
    parsed = parse_stream("a warning on stdout\n[1, 2]\n{not json\n" + cut)
    assert parsed.failed == "the CLI stopped without its final result event"
    assert [s.name for s in parsed.steps if s.kind == "tool_call"] == ["Skill"]
    assert parse_stream("").failed


# -- the real CLI against the scripted model server --------------------------------------------


def claude_bin() -> str:
    """The claude binary (PATH or ``$SKILLOPT_AGENT_CLIS``); the test is skipped when it is absent."""
    return str(agent_bin("claude"))


def all_text_under(*folders: Path) -> str:
    parts = []
    for folder in folders:
        for path in folder.rglob("*"):
            if path.is_file():
                parts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


def test_claude_p_discovers_reads_runs_and_writes_and_the_workspace_is_scored(tmp_path):
    binary = claude_bin()
    with ScriptedModelServer(AgentScript(command="ls -a")) as server:
        project = claude_project(tmp_path / "p", server, binary)
        out = tmp_path / "run"
        res = run_cli("eval", "shout", "--out", str(out), "--quiet", cwd=project, env={"ANTHROPIC_API_KEY": FAKE_KEY})
        assert res.code == 0, res.err
        requests = [c.request for c in server.calls]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mean"] == 1.0 and summary["n_errors"] == 0
    assert all(r.protocol == "anthropic" and r.model == "sim-claude" for r in requests)
    results = {r["task_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    steps = results["v1"]["trajectory"]
    assert steps[0]["kind"] == "observation" and "shout" in steps[0]["text"]
    assert [s["name"] for s in steps if s["kind"] == "tool_call"] == ["Skill", "Bash", "Write"]
    skill_call = next(i for i, s in enumerate(steps) if s.get("name") == "Skill")
    assert results["v1"]["consult"] == {"consulted": True, "step": skill_call, "how": "skill tool"}
    body = next(s for s in steps if s["kind"] == "observation" and "Base directory" in s.get("text", ""))
    assert "Write the answer in upper case." in body["text"]
    listing = next(s for s in steps if s["kind"] == "tool_result" and s["name"] == "Bash")
    assert ".claude" in listing["text"] and not listing.get("is_error")
    assert results["v1"]["files"] == ["answer.txt"]
    assert (out / "files/v1/0/answer.txt").read_text().strip() == "GOOD MORNING!"
    assert {r["finish_reason"] for r in results.values()} == {"completed"}  # the CLI's own word for it
    # The key went to the server and nowhere else: not the workspace files kept, not the run, not a report.
    html = tmp_path / "report.html"
    assert run_cli("report", str(out), "--html", str(html), cwd=project).code == 0
    assert FAKE_KEY not in all_text_under(out, project, tmp_path)


def test_an_agent_that_never_calls_the_skill_tool_is_recorded_as_not_consulting_it(tmp_path):
    binary = claude_bin()
    with ScriptedModelServer(AgentScript(command="ls -a", read_skill=False)) as server:
        project = claude_project(tmp_path / "p", server, binary)
        out = tmp_path / "run"
        res = run_cli("eval", "shout", "--out", str(out), "--quiet", cwd=project, env={"ANTHROPIC_API_KEY": FAKE_KEY})
        assert res.code == 0, res.err
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert results and [r["consult"] for r in results] == [{"consulted": False}] * len(results)
    assert all(r["score"] == 0.0 for r in results)  # the rules were never read, so never applied


def test_a_reply_cut_at_the_output_limit_is_recorded_as_the_clis_api_error(tmp_path):
    binary = claude_bin()
    with ScriptedModelServer(lambda request: ScriptedReply("GOOD MOR", finish_reason="length")) as server:
        project = claude_project(tmp_path / "p", server, binary)
        out = tmp_path / "run"
        res = run_cli("eval", "shout", "--out", str(out), "--quiet", cwd=project, env={"ANTHROPIC_API_KEY": FAKE_KEY})
        answered = {call.reply_text for call in server.calls}
    assert answered == {"GOOD MOR"}  # every reply stopped at max_tokens
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert results and {r["finish_reason"] for r in results} == {"api_error"}
    assert all(r["error"]["kind"] == "agent_failed" and "output token maximum" in r["error"]["message"]
               for r in results)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_errors"] == len(results) and res.code == 3, res.err


# -- set-up and failures, with fake binaries ---------------------------------------------------

RESULT = {"type": "result", "subtype": "success", "is_error": False, "num_turns": 1, "total_cost_usd": 0.25,
          "usage": {"input_tokens": 7, "cache_read_input_tokens": 3, "output_tokens": 5}, "permission_denials": []}
REPORTER = """
import json, os, sys
if sys.argv[1:] == ["--version"]:
    print("9.8.7 (Claude Code)")
    sys.exit(0)
names = ("HOME", "TMPDIR", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "IS_SANDBOX", "OPENAI_API_KEY",
         "DISABLE_TELEMETRY", "DISABLE_AUTOUPDATER", "DISABLE_ERROR_REPORTING",
         "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "CLAUDE_CODE_MAX_RETRIES")
seen = {"argv": sys.argv[1:], "cwd": os.getcwd(), "env": {n: os.environ.get(n) for n in names}}
print(json.dumps({"type": "system", "subtype": "init", "skills": ["shout"]}))
print(json.dumps({**RESULT, "result": json.dumps(seen)}))
"""
FAILING = """
import os, sys
if sys.argv[1:] == ["--version"]:
    print("9.8.7 (Claude Code)")
    sys.exit(0)
print('{"type": "system", "subtype": "init", "skills": ["shout"]}')
sys.stderr.write("starting\\n" * 50 + "auth failed for key " + os.environ["ANTHROPIC_API_KEY"] + "\\n")
sys.exit(1)
"""
HANGING = """
import os, subprocess, sys, time
if sys.argv[1:] == ["--version"]:
    print("9.8.7 (Claude Code)")
    sys.exit(0)
child = subprocess.Popen(["sleep", "300"])
with open(PID_FILE, "w") as f:
    f.write(str(child.pid))
print('{"type": "system", "subtype": "init", "skills": ["shout"]}', flush=True)
time.sleep(300)
"""


OWN_MAX_TURNS = """
import json, sys, time
if sys.argv[1:] == ["--version"]:
    print("9.8.7 (Claude Code)")
    sys.exit(0)
print('{"type": "system", "subtype": "init", "skills": ["shout"]}', flush=True)
time.sleep(0.3)
print(json.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": "working"}]}}), flush=True)
print(json.dumps({**RESULT, "subtype": "error_max_turns", "is_error": True, "num_turns": 3,
                  "errors": ["Reached maximum number of turns (3)"]}))
sys.exit(1)
"""


def fake_cli(folder: Path, script: str) -> Path:
    path = folder / "claude"
    path.write_text(f"#!{sys.executable}\nRESULT = {RESULT!r}\n{script}")
    path.chmod(0o755)
    return path


def pool_for(tmp_path: Path, provider: str = "anthropic", base_url: str = "http://127.0.0.1:9/anthropic"):
    from skillopt_ci.inputs.config import Config, ModelSpec
    from skillopt_ci.models.cache import ResponseCache
    from skillopt_ci.models.pool import ModelPool

    key_var = "ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY"
    model = ModelSpec.from_dict("target", {"provider": provider, "model": "sim-claude",
                                           "base_url": base_url, "max_retries": 0})
    config = Config(root=tmp_path, file="skillopt.yml", models=MappingProxyType({"target": model}))
    return ModelPool(config, ResponseCache(tmp_path / "cache.sqlite", "off"), env={key_var: FAKE_KEY})


def rollout(tmp_path: Path, binary: Path, provider: str = "anthropic", base_url: str = "http://127.0.0.1:9/anthropic",
            **options):
    from skillopt_ci.core.skill import load_skill
    from skillopt_ci.core.task import Task
    from skillopt_ci.envs.base import RolloutRequest
    from skillopt_ci.envs.registry import build_environment

    suite = SUITE_DATA / "eval_suites/shout"
    env = build_environment({"type": "claude-code", "binary": str(binary), **options}, suite)
    skill = load_skill(SUITE_DATA / "skills/shout/SKILL.md")
    request = RolloutRequest(skill=skill, task=Task("v1", "hi", "HI!"), prompt="-x: write answer.txt", suite_dir=suite)
    pool = pool_for(tmp_path, provider, base_url)
    return env, pool, asyncio.run(env.run(request, pool))


def test_the_cli_gets_the_target_endpoint_quiet_switches_a_fresh_home_and_the_suites_settings(tmp_path, unisolated):
    env, pool, done = rollout(tmp_path, fake_cli(tmp_path, REPORTER), max_turns=4, instructions_file=True)
    try:
        assert done.error is None, done.error
        seen = json.loads(done.output)
        assert seen["argv"][:3] == ["-p", "--output-format", "stream-json"]
        argv = " ".join(seen["argv"])
        assert "--max-turns 4" in argv and "--model sim-claude" in argv and "--permission-mode acceptEdits" in argv
        assert "--allowedTools=Bash,Read,Write,Edit,Glob,Grep,Skill" in argv
        assert seen["argv"][-2:] == ["--", "-x: write answer.txt"]  # a prompt starting with "-" stays the prompt
        variables = seen["env"]
        # The forwarder's URL (same path) and a per-rollout credential: not the provider's URL, not the key.
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/anthropic", variables["ANTHROPIC_BASE_URL"])
        assert variables["ANTHROPIC_BASE_URL"] != "http://127.0.0.1:9/anthropic"
        assert variables["ANTHROPIC_API_KEY"].startswith("skillopt-rollout-") and variables["OPENAI_API_KEY"] is None
        assert FAKE_KEY not in json.dumps(seen)
        assert variables["CLAUDE_CODE_MAX_RETRIES"] == "0" and variables["IS_SANDBOX"] is None
        assert all(variables[n] == "1" for n in ("DISABLE_TELEMETRY", "DISABLE_AUTOUPDATER", "DISABLE_ERROR_REPORTING",
                                                  "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"))
        home, workspace = Path(variables["HOME"]), Path(seen["cwd"])
        assert workspace == done.workspace and workspace not in home.parents and home != workspace
        assert Path(variables["TMPDIR"]).parent == home
        assert (workspace / ".claude/skills/shout/SKILL.md").read_text().startswith("---\nname: shout")
        assert (workspace / ".claude/skills/shout/references/style.md").is_file()  # the whole folder
        assert "Write the answer in upper case." in (workspace / "CLAUDE.md").read_text()
        assert env.identity()["cli_version"] == "9.8.7 (Claude Code)"
        # The CLI's own figures are the rollout's and the ledger's.
        assert done.cost_usd == pytest.approx(0.25) and (done.usage.input_tokens, done.usage.output_tokens) == (10, 5)
        assert pool.total_spend().cost_usd == pytest.approx(0.25)
    finally:
        done.close()
    assert not home.exists() and not workspace.exists()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="IS_SANDBOX matters only as root")
def test_as_root_skipping_permissions_sets_is_sandbox(tmp_path, unisolated):
    _, _, done = rollout(tmp_path, fake_cli(tmp_path, REPORTER), permission_mode="bypassPermissions")
    done.close()
    assert json.loads(done.output)["env"]["IS_SANDBOX"] == "1"


def test_a_non_anthropic_target_is_an_input_error_naming_the_provider(tmp_path):
    from skillopt_ci.core.errors import InputError

    with pytest.raises(InputError, match="provider anthropic"):
        rollout(tmp_path, fake_cli(tmp_path, REPORTER), provider="openai")


def test_a_non_zero_exit_is_an_errored_rollout_with_the_redacted_stderr_tail(tmp_path, unisolated):
    _, _, done = rollout(tmp_path, fake_cli(tmp_path, FAILING))
    done.close()
    assert done.error["kind"] == "agent_failed"
    assert "auth failed for key" in done.error["message"] and FAKE_KEY not in done.error["message"]
    assert FAKE_KEY not in json.dumps([s.to_dict() for s in done.steps]) + (done.transcript or "")
    assert done.steps[0].kind == "observation" and done.steps[-1].kind == "error"


def test_the_clis_own_turn_limit_is_recorded_as_max_turns_and_steps_carry_their_arrival_time(tmp_path, unisolated):
    _, _, done = rollout(tmp_path, fake_cli(tmp_path, OWN_MAX_TURNS), max_turns=3)
    done.close()
    assert done.error["kind"] == "max_turns"
    assert done.finish_reason == "error_max_turns"  # the CLI's word: no terminal_reason here, so its subtype
    assert "Reached maximum number of turns (3)" in done.error["message"]
    init, said = done.steps[0], next(s for s in done.steps if s.kind == "model")
    assert said.text == "working"
    assert said.elapsed_s >= init.elapsed_s + 0.25  # printed 0.3 s after the first line


def test_a_hanging_cli_is_killed_with_its_children_at_the_time_limit(tmp_path, unisolated):
    script = f"PID_FILE = {str(tmp_path / 'child.pid')!r}\n{HANGING}"
    _, _, done = rollout(tmp_path, fake_cli(tmp_path, script), time_limit_s=2)
    done.close()
    assert done.error["kind"] == "time_limit" and done.finish_reason == "error"  # stopped by us, not the CLI
    assert [s.kind for s in done.steps][0] == "observation"  # the steps before the limit are kept
    child = int((tmp_path / "child.pid").read_text())
    assert not alive(child)


def alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie waiting for a parent to collect it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_missing_binary_is_an_input_error_and_validate_exits_2(tmp_path):
    from skillopt_ci.core.errors import InputError
    from skillopt_ci.envs.registry import build_environment

    with pytest.raises(InputError, match="not found") as caught:
        build_environment({"type": "claude-code", "binary": "claude-not-installed"}, SUITE_DATA / "eval_suites/shout")
    assert "@anthropic-ai/claude-code@" in caught.value.message and "install-agents" in caught.value.message
    with ScriptedModelServer(AgentScript()) as server:
        project = claude_project(tmp_path / "p", server, "claude-not-installed")
    res = run_cli("validate", cwd=project, env={"ANTHROPIC_API_KEY": FAKE_KEY})
    assert res.code == 2
    first = res.err.splitlines()[0]
    assert "the agent CLI 'claude-not-installed' was not found" in first and "skillopt-ci install-agents" in first


def test_a_gate_between_two_skill_versions_with_the_real_cli_and_a_free_rerun(tmp_path):
    from helpers.repo import commit_base, commit_on_branch

    binary = claude_bin()
    with ScriptedModelServer(AgentScript()) as server:
        root = claude_project(tmp_path / "repo", server, binary)
        commit_base(root)
        skill = root / "skills/shout/SKILL.md"
        commit_on_branch(root, "quieter", {"skills/shout/SKILL.md": skill.read_text().replace("End with an exclamation mark.\n", "")})
        keys = {"ANTHROPIC_API_KEY": FAKE_KEY}
        out = tmp_path / "gate"
        res = run_cli("gate", "--base", "main", "--head", "quieter", "--out", str(out), "--quiet", cwd=root, env=keys)
        assert res.code == 1, res.err
        assert "shout" in res.out and "regressed (fails)" in res.out
        compared = json.loads((out / "gate.json").read_text())["skills"][0]["comparison"]
        assert compared["base_mean"] == 1.0 and compared["head_mean"] == 0.0 and compared["n_paired"] == 6
        used = "shout skill used: base 6/6 (100%) → head 6/6 (100%)"
        assert used in res.out, res.out
        calls = server.call_count
        # Unchanged skills, suite and CLI: the whole rollouts come from the cache, no model call.
        again = run_cli("gate", "--base", "main", "--head", "quieter", "--out", str(tmp_path / "again"), "--quiet",
                        cwd=root, env=keys)
        assert again.code == 1, again.err
        assert server.call_count == calls
        assert used in again.out  # a cached rollout keeps what the agent did with the skill
    assert FAKE_KEY not in all_text_under(out, tmp_path / "again", root)


def test_a_short_training_run_reads_what_the_agent_did(tmp_path):
    from skillopt_ci.sim.optimizer_sim import OptimizerSim

    binary = claude_bin()
    agent, optimizer = AgentScript(), OptimizerSim()

    def policy(request):
        return optimizer(request) if request.model == "sim-optimizer-1" else agent(request)

    with ScriptedModelServer(policy) as server:
        project = claude_project(tmp_path / "p", server, binary)
        skill = project / "skills/shout/SKILL.md"
        skill.write_text(skill.read_text().replace("End with an exclamation mark.\n", ""))  # every task fails
        res = run_cli("train", "--skill", "shout", "--out", str(tmp_path / "train"), "--quiet", "--epochs", "1",
                      cwd=project, env={"ANTHROPIC_API_KEY": FAKE_KEY})
        assert res.code == 0, res.err
        prompts = [c.request.last_user for c in server.calls if c.request.model == "sim-optimizer-1"]
    assert prompts, "the optimizer was never asked"
    assert any("Skill" in p and "Bash" in p and "answer.txt" in p for p in prompts)
    assert FAKE_KEY not in all_text_under(tmp_path / "train")


# -- no agent process holds the key -----------------------------------------------------------

ENV_COMMAND = "env; tr '\\0' '\\n' < /proc/$PPID/environ"


def post_with(base_url: str, credential: str) -> int:
    """The status a Messages request with ``credential`` gets from ``base_url``."""
    import urllib.error
    import urllib.request

    body = json.dumps({"model": "sim-claude", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]})
    request = urllib.request.Request(base_url.rstrip("/") + "/v1/messages", data=body.encode(), method="POST",
                                     headers={"x-api-key": credential, "content-type": "application/json",
                                              "anthropic-version": "2023-06-01"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_agents_commands_see_a_credential_not_the_key_and_it_dies_with_the_rollout(tmp_path):
    binary = claude_bin()
    with ScriptedModelServer(AgentScript(command=ENV_COMMAND)) as server:
        project = claude_project(tmp_path / "p", server, binary)
        out = tmp_path / "run"
        res = run_cli("eval", "shout", "--out", str(out), "--quiet", cwd=project, env={"ANTHROPIC_API_KEY": FAKE_KEY})
        assert res.code == 0, res.err
        assert server.calls and all(c.request.headers["x-api-key"] == FAKE_KEY for c in server.calls)
        results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
        listing = next(s["text"] for s in results[0]["trajectory"] if s["kind"] == "tool_result" and s["name"] == "Bash")
        # What the agent's command saw, in its own environment and its parent's (the CLI's).
        assert listing.count("ANTHROPIC_API_KEY=skillopt-rollout-") == 2 and FAKE_KEY not in listing
        credential = re.search(r"ANTHROPIC_API_KEY=(skillopt-rollout-[\w-]+)", listing).group(1)
        base_url = re.search(r"ANTHROPIC_BASE_URL=(\S+)", listing).group(1)
        # No network in the sandbox: the CLI's URL is the relay's, on the sandbox's own loopback.
        assert base_url == RELAY_ORIGIN != server.anthropic_base_url
        calls = server.call_count
        # The rollout is over: the leaked credential is worthless at the forwarder itself.
        assert post_with(shared_forwarder().url, credential) == 401
        assert server.call_count == calls
    assert FAKE_KEY not in all_text_under(out)


CALLER = """
import json, os, subprocess, sys, urllib.request
if sys.argv[1:] == ["--version"]:
    print("9.8.7 (Claude Code)")
    sys.exit(0)
body = json.dumps({"model": "sim-claude", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]})
request = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", data=body.encode(), method="POST",
                                 headers={"x-api-key": os.environ["ANTHROPIC_API_KEY"], "anthropic-version": "2023-06-01",
                                          "content-type": "application/json"})
reply = json.load(urllib.request.urlopen(request))
child = subprocess.run(["sh", "-c", "tr '\\\\0' '\\\\n' < /proc/$PPID/environ"], capture_output=True, text=True).stdout
seen = {"reply": reply["content"][0]["text"], "child": child, "base": os.environ["ANTHROPIC_BASE_URL"],
        "credential": os.environ["ANTHROPIC_API_KEY"]}
print(json.dumps({"type": "system", "subtype": "init", "skills": ["shout"]}))
print(json.dumps({**RESULT, "result": json.dumps(seen)}))
"""


def test_the_cli_reaches_the_model_through_the_forwarder_which_counts_the_spend(tmp_path, unisolated):
    from skillopt_ci.sim import ScriptedReply

    with ScriptedModelServer(lambda r: ScriptedReply("forwarded", input_tokens=40, output_tokens=9)) as server:
        env, pool, done = rollout(tmp_path, fake_cli(tmp_path, CALLER), base_url=server.anthropic_base_url)
        done.close()
        assert done.error is None, done.error
        seen = json.loads(done.output)
        assert seen["reply"] == "forwarded" and server.calls[0].request.headers["x-api-key"] == FAKE_KEY
        # Not isolated here: the CLI keeps the host's network and calls the forwarder's TCP port.
        assert seen["base"] == shared_forwarder().url
        assert "ANTHROPIC_API_KEY=skillopt-rollout-" in seen["child"] and FAKE_KEY not in seen["child"]
        # The tokens are what the provider reported through the forwarder (the CLI said 10 and 5);
        # the cost is the CLI's own figure.
        assert (done.usage.input_tokens, done.usage.output_tokens) == (40, 9)
        assert done.cost_usd == pytest.approx(0.25)
        spend = pool.spend["target"]
        assert spend.calls == 1 and (spend.usage.input_tokens, spend.usage.output_tokens) == (40, 9)
        assert post_with(seen["base"], seen["credential"]) == 401
        assert server.call_count == 1


# -- trigger tasks: is the skill used when it should be? ------------------------------------------

TRIGGER_TASKS = [  # the scripted agent reads the skill when "answer.txt" is in the request and the listing
    {"id": "v1", "input": "Write answer.txt for me. answer: good morning", "expected": "GOOD MORNING!", "should_trigger": True},
    {"id": "v2", "input": "Please put it in answer.txt. answer: ship it", "expected": "SHIP IT!", "should_trigger": True},
    {"id": "v3", "input": "What time is it in Lisbon? Reply in chat. answer: noon", "should_trigger": False},
    {"id": "v4", "input": "Delete the stale answer.txt, nothing else. answer: done", "should_trigger": False},
]


def trigger_project(tmp_path: Path, server, binary: str) -> Path:
    project = claude_project(tmp_path / "p", server, binary)
    suite = project / "eval_suites/shout"
    (suite / "val.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TRIGGER_TASKS))
    data = yaml.safe_load((suite / "suite.yaml").read_text())
    data["prompt"] = "{{ input }}"  # the request alone says whether it is one the skill is for
    (suite / "suite.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return project


def test_trigger_tasks_score_whether_the_agent_used_the_skill_and_the_summary_has_recall_and_precision(tmp_path):
    binary = claude_bin()
    with ScriptedModelServer(AgentScript(command="ls", when=("answer.txt",))) as server:
        project = trigger_project(tmp_path, server, binary)
        out = tmp_path / "run"
        res = run_cli("eval", "shout", "--out", str(out), "--quiet", cwd=project, env={"ANTHROPIC_API_KEY": FAKE_KEY})
        assert res.code == 0, res.err
    results = {r["task_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert {t: (r["should_trigger"], r["consult"]["consulted"], r["score"]) for t, r in results.items()} == {
        "v1": (True, True, 1.0), "v2": (True, True, 1.0),  # used it, and the work follows its rules
        "v3": (False, False, 1.0),  # left it alone: only that is scored
        "v4": (False, True, 0.0),  # a near-miss it reached for
    }
    assert "used the skill for a request it is not for" in results["v4"]["feedback"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trigger"] == {"tp": 2, "fp": 1, "tn": 1, "fn": 0}
    assert ("Triggering over 4 trigger rollouts: recall 2/2 (100%, 95% CI 34–100%), precision 2/3 (67%, 95% CI "
            "21–94%), accuracy 3/4 (75%, 95% CI 30–95%).") in (out / "report.md").read_text()


def test_a_description_edit_that_hides_the_skill_shows_in_the_gate_as_lost_recall(tmp_path):
    from helpers.repo import commit_base, commit_on_branch

    binary = claude_bin()
    with ScriptedModelServer(AgentScript(command="ls", when=("answer.txt",))) as server:
        root = trigger_project(tmp_path / "repo", server, binary)
        commit_base(root)
        skill = root / "skills/shout/SKILL.md"
        vague = skill.read_text().replace(" Use whenever a task asks for answer.txt.", " Use it for team answers.")
        commit_on_branch(root, "vague", {"skills/shout/SKILL.md": vague})
        res = run_cli("gate", "--base", "main", "--head", "vague", "--out", str(tmp_path / "gate"), "--quiet",
                      cwd=root, env={"ANTHROPIC_API_KEY": FAKE_KEY})
    assert res.code == 0, res.out + res.err  # 4 tasks: no drop short of the whole score is significant
    assert "unchanged" in res.out
    assert ("shout triggering: recall 2/2 (100%) → 0/2 (0%), 2 fewer requests the skill is for use it; "
            "precision 2/3 (67%) → —") in res.out, res.out
    gate = json.loads((tmp_path / "gate/gate.json").read_text())["skills"][0]
    assert gate["comparison"]["base_mean"] == 0.75 and gate["comparison"]["head_mean"] == 0.5
