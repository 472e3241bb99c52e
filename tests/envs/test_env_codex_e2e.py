"""The real ``codex exec`` end to end, offline, against the scripted model server: eval, gate and
train on a small ``codex`` suite (tests/data/codex-suite) scored by a ``verify`` command."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from helpers.agent_bins import agent_bin
from helpers.agents import AgentScript
from helpers.cli import run_cli
from helpers.codex_project import KEY, SKILL, codex_project
from skillopt_ci.inputs.yamlfile import schema_validator
from skillopt_ci.sim import Fault, ScriptedModelServer
from skillopt_ci.sim.optimizer_sim import OptimizerSim

HOUSE_STYLE = "\n## House style\n\nWrite every answer in upper case and end with an exclamation mark.\n"


class Policy:
    """The scripted Codex agent for the target; the scripted optimizer for the optimizer role."""

    def __init__(self) -> None:
        self.agent, self.optimizer = AgentScript(), OptimizerSim()

    def __call__(self, request):
        if request.model == "sim-optimizer-1":
            return self.optimizer(request)
        return self.agent(request)


@pytest.fixture
def codex_server():
    with ScriptedModelServer(Policy()) as server:
        yield server


def files_holding(folder: Path, needle: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def test_codex_evaluates_a_skill_it_reads_through_its_own_tool(tmp_path, codex_server):
    root = codex_project(tmp_path / "p", codex_server.openai_base_url, agent_bin("codex"))
    out = tmp_path / "run"
    res = run_cli("eval", "greeter", "--out", str(out), "--quiet", cwd=root, env={"OPENAI_API_KEY": KEY})
    assert res.code == 0, res.out + res.err
    results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 6 and all(r.get("error") is None for r in results), results
    # The plain skill states no house style: the verify command fails every answer.
    assert all(r["score"] == 0.0 for r in results)
    assert "not in the house style" in results[0]["feedback"]
    steps = results[0]["trajectory"]
    calls = [s for s in steps if s["kind"] == "tool_call"]
    # gpt-5.5 is a model Codex knows to offer apply_patch: the file is written with it.
    assert [c["name"] for c in calls] == ["exec_command", "exec_command", "apply_patch"]
    assert ".agents/skills/greeter/SKILL.md" in calls[0]["arguments"]
    first_call = steps.index(calls[0])
    assert {r["task_id"]: r["consult"] for r in results} == dict.fromkeys(
        (r["task_id"] for r in results), {"consulted": True, "step": first_call, "how": "command reads SKILL.md"})
    outputs = [s["text"] for s in steps if s["kind"] == "tool_result"]
    assert "Write the greeting the task asks for" in outputs[0]
    times = [s["elapsed_s"] for s in steps]  # when each event arrived from the CLI
    assert times == sorted(times) and times[-1] > 0
    assert results[0]["output"] == "Done: the answer is in answer.txt."
    assert results[0]["files"] == ["answer.txt"]
    assert (out / "files" / results[0]["task_id"] / "0" / "answer.txt").read_text().strip() in (
        "hello team", "good evening", "nice work", "welcome back", "well done", "see you soon")
    # The skill reached the model only as a name in the skills list, then through the agent's cat.
    first = codex_server.calls[0].request
    assert "greeter: How to write greeting answers" in first.system + json.dumps(first.messages)
    assert "Write the greeting the task asks for" not in first.system + json.dumps(first.messages)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_errors"] == 0
    assert summary["consulted"] == {"consulted": 6, "rollouts": 6, "references": 0, "scripts": 0}
    schema_validator("summary.schema.json").validate(summary)
    for line in results:
        schema_validator("result.schema.json").validate(line)
    assert "The agent consulted the skill in 6 of 6 finished rollouts (100.0%, 95% CI 61–100%)." in (
        out / "report.md").read_text()
    report = tmp_path / "report.html"
    assert run_cli("report", str(out), "--html", str(report), cwd=root).code == 0
    assert files_holding(out, KEY) == [] and KEY not in report.read_text() and KEY not in res.out + res.err


def test_a_codex_agent_that_never_opens_the_skill_is_recorded_as_not_consulting_it(tmp_path, codex_server):
    codex_server.policy.agent = AgentScript(read_skill=False)
    root = codex_project(tmp_path / "p", codex_server.openai_base_url, agent_bin("codex"))
    out = tmp_path / "run"
    res = run_cli("eval", "greeter", "--out", str(out), "--quiet", cwd=root, env={"OPENAI_API_KEY": KEY})
    assert res.code == 0, res.out + res.err
    results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [r["consult"] for r in results] == [{"consulted": False}] * 6
    table = run_cli("eval", "greeter", "--out", str(out), cwd=root, env={"OPENAI_API_KEY": KEY})  # resumed: no calls
    assert table.code == 0 and "skill used" in table.out and "0/6 (0%)" in table.out, table.out
    assert all("SKILL.md" not in json.dumps(r["trajectory"]) for r in results)


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


def test_a_gate_between_two_skill_versions_and_a_training_epoch_on_codex(tmp_path, codex_server):
    root = codex_project(tmp_path / "repo", codex_server.openai_base_url, agent_bin("codex"))
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "dev@example.com")
    git(root, "config", "user.name", "Dev")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    git(root, "checkout", "-q", "-b", "house-style")
    (root / SKILL).write_text((root / SKILL).read_text() + HOUSE_STYLE)
    git(root, "commit", "-qam", "house style")
    out = tmp_path / "gate"
    env = {"OPENAI_API_KEY": KEY}
    res = run_cli("gate", "--base", "main", "--head", "house-style", "--out", str(out), "--quiet", cwd=root, env=env)
    assert res.code == 0, res.out + res.err
    skill = json.loads((out / "gate.json").read_text())["skills"][0]
    assert skill["verdict"] == "improved" and not skill["failed"]
    assert skill["comparison"]["delta"] == pytest.approx(1.0)
    assert files_holding(out, KEY) == []
    # A re-run of the unchanged base is served from the rollout cache: no model call.
    calls = codex_server.call_count
    again = run_cli("gate", "--base", "main", "--head", "main", "--out", str(tmp_path / "g2"), "--quiet",
                    cwd=root, env=env)
    assert again.code == 0, again.out + again.err
    assert codex_server.call_count == calls
    # One training epoch on the codex suite runs to the end.
    git(root, "checkout", "-q", "main")
    train = tmp_path / "train"
    res = run_cli("train", "--skill", "greeter", "--out", str(train), "--quiet", "--epochs", "1", cwd=root, env=env)
    assert res.code == 0, res.out + res.err
    assert (train / "best_skill.md").is_file()
    assert files_holding(train, KEY) == []
    assert os.environ.get("OPENAI_API_KEY") != KEY


def test_a_server_error_mid_rollout_is_an_errored_result_with_the_steps_so_far(tmp_path, codex_server):
    root = codex_project(tmp_path / "p", codex_server.openai_base_url, agent_bin("codex"))
    val = root / "eval_suites/greeter/val.jsonl"
    val.write_text(val.read_text().splitlines()[0] + "\n")

    def second_call_fails(request):
        return Fault.server_error() if codex_server.call_count == 1 else None

    codex_server.fault_plan = second_call_fails
    out = tmp_path / "run"
    res = run_cli("eval", "greeter", "--out", str(out), "--quiet", cwd=root, env={"OPENAI_API_KEY": KEY})
    assert res.code == 3, res.out + res.err  # its one task errored: nothing measured
    result = json.loads((out / "results.jsonl").read_text())
    assert result["error"]["kind"] == "agent_failed", result["error"]
    kinds = [s["kind"] for s in result["trajectory"]]
    assert kinds[:2] == ["tool_call", "tool_result"] and kinds[-1] == "error"  # the skill read, then the failure
    assert not (root / ".agents").exists() and files_holding(out, KEY) == []


# The command's own environment, then the variables of each ancestor up to the Codex CLI itself.
ANCESTORS = (
    "env; p=$$; while [ \"$p\" -gt 1 ]; do e=$(tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null); "
    "echo \"$e\" | grep SKILLOPT_CODEX; case \"$e\" in *CODEX_HOME=*) break;; esac; "
    "p=$(cut -d' ' -f4 /proc/$p/stat); done"
)


def test_codexs_commands_see_no_key_and_its_credential_dies_with_the_rollout(tmp_path):
    import re
    import urllib.error
    import urllib.request

    from skillopt_ci.models.forwarder import shared_forwarder

    with ScriptedModelServer(AgentScript(command=ANCESTORS)) as server:
        root = codex_project(tmp_path / "p", server.openai_base_url, agent_bin("codex"))
        out = tmp_path / "run"
        res = run_cli("eval", "greeter", "--out", str(out), "--quiet", cwd=root, env={"OPENAI_API_KEY": KEY})
        assert res.code == 0, res.out + res.err
        assert server.calls and all(c.request.headers["authorization"] == f"Bearer {KEY}" for c in server.calls)
        results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
        outputs = "\n".join(s.get("text", "") for r in results for s in r["trajectory"] if s["kind"] == "tool_result")
        # The commands ran and saw no key, in their environment or in any ancestor's they can read
        # (Codex's own sandbox already hid the CLI's: a guard that it stays so through the forwarder).
        assert "PATH=" in outputs and KEY not in outputs
        calls = server.call_count
        forwarder = shared_forwarder().url
        for credential in set(re.findall(r"skillopt-rollout-[\w-]+", outputs)):  # whatever leaked is worthless now
            request = urllib.request.Request(forwarder + "/v1/responses", data=b"{}", method="POST",
                                             headers={"authorization": f"Bearer {credential}"})
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=30)
            assert refused.value.code == 401
        assert server.call_count == calls
    assert files_holding(out, KEY) == []
