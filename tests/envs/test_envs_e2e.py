"""A ``tools`` suite end to end through the real SDKs: OpenAI Chat Completions, OpenAI Responses and
Anthropic Messages against the scripted server; the trajectory lands in results.jsonl, the HTML
report and the optimizer's prompt."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from helpers.cli import run_cli
from helpers.tools_env import KEYS, PROTOCOLS, tools_project
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.optimizer_sim import OptimizerSim
from skillopt_ci.sim.protocols import ScriptedReply, ScriptedToolCall

SUM_CODE = "import csv\nprint(sum(float(r['amount']) for r in csv.DictReader(open('data.csv'))))"


def analyst(request) -> ScriptedReply | str:
    """Read the file, sum it with Python, submit what Python printed."""
    if request.model == "sim-optimizer-1":
        return OptimizerSim()(request)
    done = [m for m in request.messages if m["role"] == "tool"]
    if not done:
        return ScriptedReply("Let me look at the file.", tool_calls=(ScriptedToolCall("read_file", {"path": "data.csv"}),))
    if len(done) == 1:
        return ScriptedReply("", tool_calls=(ScriptedToolCall("python", {"code": SUM_CODE}),))
    printed = re.findall(r"-?\d+(?:\.\d+)?", done[-1]["content"])
    return ScriptedReply("", tool_calls=(ScriptedToolCall("submit_answer", {"answer": printed[-1]}),))


@pytest.fixture
def analyst_server():
    with ScriptedModelServer(analyst) as server:
        yield server


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_tools_suite_runs_end_to_end(tmp_path, analyst_server, protocol):
    target = PROTOCOLS[protocol](analyst_server)
    project = tools_project(tmp_path / "p", target)
    out = tmp_path / "run"
    res = run_cli("eval", "csv-sum", "--out", str(out), "--quiet", cwd=project, env=KEYS)
    assert res.code == 0, res.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mean"] == 1.0 and summary["n_errors"] == 0
    assert analyst_server.call_count == 3 * 3  # three turns per task
    assert {c.request.protocol for c in analyst_server.calls} == {"openai" if protocol == "chat" else protocol}
    results = {r["task_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    steps = results["v1"]["trajectory"]
    calls = [s for s in steps if s["kind"] == "tool_call"]
    assert [c["name"] for c in calls] == ["read_file", "python", "submit_answer"]
    assert json.loads(calls[0]["arguments"]) == {"path": "data.csv"}
    tool_results = [s for s in steps if s["kind"] == "tool_result"]
    assert "id,amount" in tool_results[0]["text"] and "15" in tool_results[1]["text"]
    assert results["v1"]["output"].strip() in ("15", "15.0")
    # Every model call offered the three tools; turn two sent the file back as a tool result.
    assert all({t["name"] for t in c.request.tools} == {"read_file", "python", "submit_answer"}
               for c in analyst_server.calls)
    second = next(c.request for c in analyst_server.calls if len(c.request.tool_results) == 1
                  and "read_file" in json.dumps(c.request.messages))
    assert "id,amount" in second.tool_results[0]["content"]
    # The HTML report carries the trajectory.
    html = tmp_path / "report.html"
    assert run_cli("report", str(out), "--html", str(html), cwd=project).code == 0
    assert "submit_answer" in html.read_text()


def test_the_optimizer_reads_the_tool_calls(tmp_path, analyst_server):
    project = tools_project(tmp_path / "p", PROTOCOLS["chat"](analyst_server))
    # A wrong-sum skill: make one train task fail so a failure reflection runs.
    table = project / "eval_suites/csv-sum/train.jsonl"
    lines = [json.loads(x) for x in table.read_text().splitlines()]
    lines[0]["expected"] = 999
    table.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    res = run_cli("train", "--skill", "csv-sum", "--out", str(tmp_path / "train"), "--quiet", "--epochs", "1",
                  cwd=project, env=KEYS)
    assert res.code == 0, res.err
    prompts = [c.request.last_user for c in analyst_server.calls if c.request.model == "sim-optimizer-1"]
    assert prompts, "the optimizer was never asked"
    assert any("What the agent did" in p and "read_file" in p and "id,amount" in p for p in prompts)


@pytest.mark.parametrize("protocol", ["chat", "responses", "anthropic"])
def test_an_image_task_sends_its_image(tmp_path, protocol):
    """A chat suite whose tasks reference images: the server receives the file's bytes."""
    from helpers.wire import tiny_png

    png = tiny_png((200, 10, 30))

    def colour(request):
        images = request.images
        return "red" if images and images[0]["bytes"] == png else "no image"

    with ScriptedModelServer(colour) as server:
        project = tools_project(tmp_path / "p", PROTOCOLS[protocol](server))
        suite = project / "eval_suites/csv-sum"
        (suite / "img").mkdir()
        (suite / "img/swatch.png").write_bytes(png)
        (suite / "suite.yaml").write_text(yaml.safe_dump({"name": "csv-sum", "environment": "chat",
                                                          "scorer": {"type": "exact"}}))
        (suite / "val.jsonl").write_text(json.dumps({"id": "s1", "input": "What colour is this?",
                                                     "images": ["img/swatch.png"], "expected": "red"}) + "\n")
        out = tmp_path / "run"
        res = run_cli("eval", "csv-sum", "--out", str(out), "--quiet", cwd=project, env=KEYS)
        assert res.code == 0, res.err
        assert json.loads((out / "summary.json").read_text())["mean"] == 1.0
        result = json.loads((out / "results.jsonl").read_text())
        kept = result["trajectory"][0]["images"][0]
        assert (out / kept).read_bytes() == png  # kept once, by content, for the report's thumbnail


def writer(request) -> ScriptedReply:
    """Write the answer to a file, then say it."""
    if not request.tool_results:
        task = re.search(r"Task (\w+)", request.last_user).group(1)
        return ScriptedReply("", tool_calls=(ScriptedToolCall("write_file", {"path": "answer.txt", "content": task}),))
    return ScriptedReply("done")


def test_files_a_rollout_writes_are_kept_and_survive_a_shard_merge(tmp_path):
    with ScriptedModelServer(writer) as server:
        project = tools_project(tmp_path / "p", PROTOCOLS["chat"](server))
        suite = project / "eval_suites/csv-sum/suite.yaml"
        data = yaml.safe_load(suite.read_text())
        data["environment"]["tools"] = ["write_file"]
        data["scorer"] = {"type": "contains"}
        suite.write_text(yaml.safe_dump(data))
        val = suite.parent / "val.jsonl"
        val.write_text("".join(json.dumps({**json.loads(x), "expected": "done"}) + "\n"
                               for x in val.read_text().splitlines()))
        shards = []
        for shard in ("1/2", "2/2"):
            out = tmp_path / f"shard{shard[0]}"
            res = run_cli("eval", "csv-sum", "--shard", shard, "--out", str(out), "--quiet", cwd=project, env=KEYS)
            assert res.code == 0, res.err
            shards.append(out)
        merged = tmp_path / "merged"
        assert run_cli("merge", *map(str, shards), "--out", str(merged), cwd=project).code == 0
    results = [json.loads(x) for x in (merged / "results.jsonl").read_text().splitlines()]
    assert sorted(r["task_id"] for r in results) == ["v1", "v2", "v3"]
    for r in results:
        assert r["files"] == ["answer.txt"]
        assert (merged / "files" / r["task_id"] / "0" / "answer.txt").read_text() == r["task_id"]
