"""The ``verify`` scorer: a command in the rollout's workspace, real subprocesses under the sandbox,
and a ``tools`` suite whose agent writes a file that a checker script verifies, through
``skillopt-ci eval``."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
import yaml

from helpers.cli import run_cli
from skillopt_ci.core.errors import InputError, ScoringError
from skillopt_ci.core.task import Task
from skillopt_ci.core.trajectory import Rollout
from skillopt_ci.sandbox import Workspace
from skillopt_ci.scorers import build_scorer
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.protocols import ScriptedReply, ScriptedToolCall

TASK = Task(id="t1", input="write the answer")
CHECK = "import sys\ntext = open('answer.txt').read().strip()\nprint('answer.txt holds', repr(text))\nsys.exit(0 if text == 'forty-two' else 1)\n"


def score(scorer, workspace: Path | None):
    return asyncio.run(scorer.ascore_rollout(Rollout(output="done", workspace=workspace), TASK))


@pytest.fixture
def suite_dir(tmp_path):
    (tmp_path / "check.py").write_text(CHECK)
    return tmp_path


@pytest.fixture
def ws():
    workspace = Workspace.create()
    yield workspace
    workspace.cleanup()


def test_exit_zero_passes_and_a_failure_gives_the_output_tail(suite_dir, ws):
    scorer = build_scorer({"type": "verify", "command": "python3 check.py", "files": ["check.py"]}, suite_dir)
    ws.write_text("answer.txt", "forty-two\n")
    passed = score(scorer, ws.path)
    assert (passed.value, passed.passed) == (1.0, True)
    ws.write_text("answer.txt", "41\n")
    failed = score(scorer, ws.path)
    assert (failed.value, failed.passed) == (0.0, False)
    assert failed.feedback == "verify \"python3 check.py\" failed (exit code 1): answer.txt holds '41'"


def test_the_command_sees_no_key_and_is_killed_at_its_timeout(suite_dir, ws, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    leak = build_scorer({"type": "verify", "command": "env | grep -c do-not-leak"}, suite_dir)
    result = score(leak, ws.path)
    assert not result.passed and result.feedback.endswith("(exit code 1): 0")  # grep found nothing
    slow = build_scorer({"type": "verify", "command": "echo started; sleep 30", "timeout_s": 0.5}, suite_dir)
    result = score(slow, ws.path)
    assert not result.passed and "killed: time limit 0.5s" in result.feedback and "started" in result.feedback


def test_a_rollout_without_a_workspace_is_a_scoring_error_naming_the_environments(suite_dir):
    scorer = build_scorer({"type": "verify", "command": "true"}, suite_dir)
    with pytest.raises(ScoringError, match=r"needs an environment with a workspace \(tools, codex or claude-code\); task \"t1\""):
        score(scorer, None)


def test_a_missing_or_escaping_file_is_an_input_error_when_built(suite_dir):
    with pytest.raises(InputError, match='files: "checks/gone.py" does not exist') as info:
        build_scorer({"type": "verify", "command": "true", "files": ["checks/gone.py"]}, suite_dir)
    assert info.value.where == str(suite_dir / "suite.yaml")
    with pytest.raises(InputError, match="must be a path inside the suite directory"):
        build_scorer({"type": "verify", "command": "true", "files": ["../outside.py"]}, suite_dir)
    with pytest.raises(InputError, match='needs option "command"'):
        build_scorer({"type": "verify"}, suite_dir)


def test_a_symlink_planted_in_the_workspace_does_not_lead_the_copy_out(suite_dir, ws, tmp_path):
    outside = tmp_path / "victim.py"
    outside.write_text("keep me")
    (ws.path / "check.py").symlink_to(outside)
    scorer = build_scorer({"type": "verify", "command": "true", "files": ["check.py"]}, suite_dir)
    with pytest.raises(ScoringError, match="cannot run"):
        score(scorer, ws.path)
    assert outside.read_text() == "keep me"


def writer(request) -> ScriptedReply:
    """Write the word the task asks for into answer.txt, then say so."""
    if not request.tool_results:
        word = re.search(r"write (\S+)", request.last_user).group(1)
        return ScriptedReply("", tool_calls=(ScriptedToolCall("write_file", {"path": "answer.txt", "content": word}),))
    return ScriptedReply("done")


def test_a_tools_suite_scored_by_verify_end_to_end(tmp_path):
    """The agent writes a file; the suite's checker script, copied in, decides each task."""
    root = tmp_path / "p"
    suite = root / "eval_suites/answers"
    suite.mkdir(parents=True)
    (suite / "check.py").write_text(CHECK)
    (suite / "suite.yaml").write_text(yaml.safe_dump({
        "name": "answers", "prompt": "{{ input }}",
        "environment": {"type": "tools", "tools": ["write_file"], "max_turns": 3},
        "scorer": {"type": "verify", "command": "python3 check.py", "files": ["check.py"], "timeout_s": 30},
    }))
    tasks = [{"id": "good", "input": "Please write forty-two"}, {"id": "bad", "input": "Please write 41"}]
    (suite / "val.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    (root / "skills/answers").mkdir(parents=True)
    (root / "skills/answers/SKILL.md").write_text("---\nname: answers\ndescription: Write answers.\n---\nWrite it.\n")
    with ScriptedModelServer(writer) as server:
        (root / "skillopt.yml").write_text(yaml.safe_dump({
            "version": 1,
            "models": {"target": {"provider": "openai-compatible", "model": "sim", "base_url": server.openai_base_url}},
            "skills": [{"path": "skills/answers/SKILL.md", "suite": "eval_suites/answers"}],
        }))
        out = tmp_path / "run"
        res = run_cli("eval", "answers", "--out", str(out), "--quiet", cwd=root,
                      env={"OPENAI_API_KEY": "sk-test-not-a-key-000000000000"})
    assert res.code == 0, res.err
    results = {r["task_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert (results["good"]["score"], results["good"]["passed"]) == (1.0, True)
    assert (results["bad"]["score"], results["bad"]["passed"]) == (0.0, False)
    assert "answer.txt holds '41'" in results["bad"]["feedback"]
    assert results["good"]["files"] == ["answer.txt"]  # the checker copied in is not a file the agent wrote
    assert json.loads((out / "summary.json").read_text())["mean"] == 0.5


def test_validate_names_a_missing_checker_file(tmp_path):
    root = tmp_path / "p"
    (root / "eval_suites/s").mkdir(parents=True)
    (root / "eval_suites/s/suite.yaml").write_text(yaml.safe_dump({
        "environment": {"type": "tools", "tools": ["write_file"]},
        "scorer": {"type": "verify", "command": "python3 check.py", "files": ["check.py"]}}))
    (root / "eval_suites/s/val.jsonl").write_text('{"id": "a", "input": "x"}\n')
    (root / "skills/s").mkdir(parents=True)
    (root / "skills/s/SKILL.md").write_text("---\nname: s\ndescription: d\n---\nbody\n")
    (root / "skillopt.yml").write_text(yaml.safe_dump({
        "version": 1, "models": {"target": {"provider": "openai", "model": "m"}},
        "skills": [{"path": "skills/s/SKILL.md", "suite": "eval_suites/s"}]}))
    res = run_cli("validate", cwd=root)
    assert res.code == 2
    assert 'suite.yaml: scorer: scorer "verify": files: "check.py" does not exist in the suite directory' in res.err


def test_a_changed_checker_in_a_subfolder_changes_the_suite_hash(tmp_path):
    """The suite hash keys cached scored rollouts: an edited checker must not reuse old scores."""
    from skillopt_ci.inputs.suite import load_suite

    (tmp_path / "checks").mkdir()
    (tmp_path / "checks/check.sh").write_text("test -f answer.txt\n")
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump({
        "environment": {"type": "tools", "tools": ["write_file"]},
        "scorer": {"type": "verify", "command": "sh checks/check.sh", "files": ["checks"]}}))
    (tmp_path / "val.jsonl").write_text('{"id": "a", "input": "x"}\n')
    before = load_suite(tmp_path).hash
    (tmp_path / "checks/check.sh").write_text("grep -q 42 answer.txt\n")
    assert load_suite(tmp_path).hash != before
