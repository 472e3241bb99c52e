"""The tools environment's workspace: task files in it, file tools confined to it, no secrets in
its processes, and nothing of a rollout left running after its time limit."""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path

import pytest

from fakes.tool_model import ScriptedCaller, call, reply, turn
from helpers.tools_env import make_suite, request_for, rollout


def test_the_python_tool_reads_a_task_csv_in_the_workspace(tmp_path):
    suite = make_suite(tmp_path, {"data/sales.csv": "region,amount\nnorth,3\nsouth,4\neast,5\n"})
    code = "import csv\nrows = list(csv.DictReader(open('sales.csv')))\nprint(sum(int(r['amount']) for r in rows))\n"
    model = ScriptedCaller(turn(call("python", code=code)), reply("12"))
    _, result = rollout(suite, model, request_for(suite, {"files": {"sales.csv": "data/sales.csv"}}), tools=["python"])
    result.close()
    ran = result.steps[2]
    assert not ran.is_error and "12" in ran.text
    assert result.output == "12"


@pytest.mark.parametrize("path", ["../", "ABSOLUTE", "link/secret.txt", "escape.txt"])
def test_file_tools_cannot_read_outside_the_workspace(tmp_path, path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP-SECRET-VALUE")
    suite = make_suite(tmp_path)
    if path == "ABSOLUTE":
        path = str(outside / "secret.txt")
    elif path.startswith(".."):  # enough ../ to reach / from any workspace, then down to the secret
        path = "../" * 30 + str(outside / "secret.txt").lstrip("/")

    def plant_links(messages):
        # the model's first turn: plant symlinks to the outside through the shell tool
        return turn(call("shell", command=f"ln -s {outside} link; ln -s {outside}/secret.txt escape.txt"))

    model = ScriptedCaller(plant_links, turn(call("read_file", path=path), call("grep", pattern="TOP", path=path)),
                           reply("done"))
    _, result = rollout(suite, model, tools=["shell", "read_file", "grep"])
    result.close()
    results = [s for s in result.steps if s.kind == "tool_result" and s.name in ("read_file", "grep")]
    assert len(results) == 2
    for step in results:
        assert step.is_error and "TOP-SECRET-VALUE" not in step.text, step.text


def test_tool_processes_cannot_see_an_api_key(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-do-not-leak")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_test_token_do_not_leak")
    suite = make_suite(tmp_path)
    code = "import os\nprint(sorted(os.environ))\nprint(os.environ.get('OPENAI_API_KEY'))\n"
    model = ScriptedCaller(turn(call("shell", command="env"), call("python", code=code)), reply("ok"))
    _, result = rollout(suite, model, tools=["shell", "python"])
    result.close()
    outputs = [s.text for s in result.steps if s.kind == "tool_result"]
    assert len(outputs) == 2 and "None" in outputs[1]
    for text in outputs:
        assert "sk-test-key-do-not-leak" not in text and "ghp_test_token" not in text
        assert "OPENAI_API_KEY" not in text and "GITHUB_TOKEN" not in text


def _alive_with(marker: str) -> list[int]:
    """Processes (not zombies) whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = next(ln for ln in (entry / "status").read_text().splitlines() if ln.startswith("State:"))
        except (OSError, StopIteration):
            continue
        if marker.encode() in cmdline and "Z" not in state.split()[1]:
            found.append(int(entry.name))
    return found


def test_a_rollout_and_its_child_processes_are_killed_at_the_time_limit(tmp_path):
    marker = f"skillopt-child-{uuid.uuid4().hex}"
    suite = make_suite(tmp_path)
    sleeper = f"{sys.executable} -c 'import time; time.sleep(120)' {marker}"
    # a grandchild, a child and the command itself; "started" proves they were launched
    command = f"({sleeper} &) ; {sleeper} & echo yes > started; {sleeper}"
    model = ScriptedCaller(turn(call("shell", command=command)), reply("never reached"))
    _, result = rollout(suite, model, tools=["shell"], time_limit_s=2, tool_timeout_s=60)
    launched = (result.workspace / "started").exists()
    result.close()
    assert launched
    assert result.error is not None and result.error["kind"] == "time_limit"
    assert [s.kind for s in result.steps][:2] == ["model", "tool_call"]
    # the kill is synchronous with the end of the rollout, but reaping an orphan may lag a moment
    deadline = time.monotonic() + 10
    while _alive_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    leftover = _alive_with(marker)
    for pid in leftover:
        os.kill(pid, 9)
    assert leftover == []
