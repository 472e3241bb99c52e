"""The ``catalogue`` environment: the skills listed by name and description, the body only when
the model loads it with the Skill tool; on OpenAI chat, Responses and Anthropic alike, against
the scripted server through the real SDKs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from helpers.agents import catalogue_agent
from helpers.cli import run_cli
from helpers.tools_env import KEYS, PROTOCOLS
from skillopt_ci.sim import ScriptedModelServer

SHOUT = ("---\nname: shout\ndescription: Write answers the way the team wants them. Use whenever a request "
         "asks for answer.txt.\n---\n# Shout\n\nWrite the answer in upper case.\nEnd with an exclamation mark.\n")
GREETER = "---\nname: greeter\ndescription: Greet visitors politely. Use for welcome messages.\n---\nSay hello.\n"
TASKS = [
    {"id": "v1", "input": "Write answer.txt for me. answer: good morning", "expected": "GOOD MORNING!", "should_trigger": True},
    {"id": "v2", "input": "Please put it in answer.txt. answer: ship it", "expected": "SHIP IT!", "should_trigger": True},
    {"id": "v3", "input": "What time is it in Lisbon? answer: noon", "should_trigger": False},
    {"id": "v4", "input": "Write a welcome message for new visitors. answer: hi", "should_trigger": False},
]


def project(root: Path, target: dict) -> Path:
    suite = root / "eval_suites/shout"
    suite.mkdir(parents=True)
    (suite / "siblings/greeter").mkdir(parents=True)
    (suite / "siblings/greeter/SKILL.md").write_text(GREETER)
    (suite / "suite.yaml").write_text(yaml.safe_dump({
        "name": "shout", "prompt": "{{ input }}", "scorer": {"type": "exact"},
        "environment": {"type": "catalogue", "skills": ["siblings/greeter"], "max_turns": 3}}))
    (suite / "val.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    (suite / "train.jsonl").write_text("".join(json.dumps({**t, "id": "t" + t["id"]}) + "\n" for t in TASKS))
    (root / "skills/shout").mkdir(parents=True)
    (root / "skills/shout/SKILL.md").write_text(SHOUT)
    (root / "skillopt.yml").write_text(yaml.safe_dump({
        "version": 1, "models": {"target": {"max_retries": 0, **target}},
        "skills": [{"path": "skills/shout/SKILL.md", "suite": "eval_suites/shout"}],
        "concurrency": 2, "cache": {"mode": "read-write", "path": ".skillopt/cache.sqlite"}}))
    return root


@pytest.mark.parametrize("protocol", ["chat", "responses", "anthropic"])
def test_the_body_arrives_only_when_loaded_and_triggering_is_scored_on_every_provider(tmp_path, protocol):
    with ScriptedModelServer(catalogue_agent) as server:
        root = project(tmp_path / "p", PROTOCOLS[protocol](server))
        out = tmp_path / "run"
        res = run_cli("eval", "shout", "--out", str(out), "--quiet", cwd=root, env=KEYS)
        assert res.code == 0, res.err
        first = [c.request for c in server.calls if "Lisbon" in json.dumps(c.request.messages)][0]
    # Listed by name and description, sorted; the bodies are not in the context.
    assert "- greeter: Greet visitors politely. Use for welcome messages.\n- shout: Write answers" in first.system
    assert "upper case" not in first.system + json.dumps(first.messages) and "Say hello" not in first.system
    results = {r["task_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert {t: (r["consult"]["consulted"], r["score"]) for t, r in results.items()} == {
        "v1": (True, 1.0), "v2": (True, 1.0),  # loaded it, and the answer follows its rules
        "v3": (False, 1.0),  # left it alone
        "v4": (False, 1.0),  # the near-miss went to the sibling skill, not this one
    }
    v1 = results["v1"]["trajectory"]
    call = next(i for i, s in enumerate(v1) if s["kind"] == "tool_call")
    assert v1[call]["name"] == "Skill" and results["v1"]["consult"] == {"consulted": True, "step": call, "how": "skill tool"}
    assert "Write the answer in upper case." in v1[call + 1]["text"]
    v4 = results["v4"]["trajectory"]
    assert json.loads(next(s for s in v4 if s["kind"] == "tool_call")["arguments"]) == {"skill": "greeter"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trigger"] == {"tp": 2, "fp": 0, "tn": 2, "fn": 0} and summary["mean"] == 1.0


def test_a_vague_description_is_never_loaded_and_the_near_misses_still_pass(tmp_path):
    with ScriptedModelServer(catalogue_agent) as server:
        root = project(tmp_path / "p", PROTOCOLS["chat"](server))
        skill = root / "skills/shout/SKILL.md"
        skill.write_text(SHOUT.replace(" Use whenever a request asks for answer.txt.", ""))
        out = tmp_path / "run"
        res = run_cli("eval", "shout", "--out", str(out), cwd=root, env=KEYS)
        calls = server.call_count
        again = run_cli("eval", "shout", "--out", str(tmp_path / "again"), "--quiet", cwd=root, env=KEYS)
        assert again.code == 0 and server.call_count == calls  # the same listing and tools: every reply cached
    assert res.code == 0, res.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trigger"] == {"tp": 0, "fp": 0, "tn": 2, "fn": 2} and summary["mean"] == 0.5
    assert "0/4 (0%)" in res.out  # the skill used column
    assert "recall 0/2 (0%, 95% CI 0–66%)" in (out / "report.md").read_text()


def test_a_bad_sibling_or_a_name_clash_is_an_input_error_before_any_call(tmp_path):
    with ScriptedModelServer(catalogue_agent) as server:
        root = project(tmp_path / "p", PROTOCOLS["chat"](server))
        suite_yaml = root / "eval_suites/shout/suite.yaml"
        data = yaml.safe_load(suite_yaml.read_text())
        data["environment"]["skills"] = ["siblings/missing"]
        suite_yaml.write_text(yaml.safe_dump(data))
        res = run_cli("validate", cwd=root)
        assert res.code == 2 and "environment catalogue: skills:" in res.err and "missing" in res.err
        (root / "eval_suites/shout/siblings/other").mkdir()
        (root / "eval_suites/shout/siblings/other/SKILL.md").write_text(SHOUT)  # a second "shout"
        data["environment"]["skills"] = ["siblings/other"]
        suite_yaml.write_text(yaml.safe_dump(data))
        res = run_cli("eval", "shout", cwd=root, env=KEYS)
        assert res.code == 2 and "the name of the skill under test" in res.err
        assert server.call_count == 0


@pytest.mark.parametrize("listed", ["../../secrets", "/etc", "escape"])
def test_a_sibling_outside_the_suite_is_refused_so_no_host_file_reaches_the_model(tmp_path, listed):
    outside = tmp_path / "secrets"
    outside.mkdir()
    (outside / "SKILL.md").write_text("---\nname: secrets\ndescription: host-only text\n---\nSECRET BODY\n")
    with ScriptedModelServer(catalogue_agent) as server:
        root = project(tmp_path / "p", PROTOCOLS["chat"](server))
        (root / "eval_suites/shout/escape").symlink_to(outside)  # a link that leads out of the suite
        suite_yaml = root / "eval_suites/shout/suite.yaml"
        data = yaml.safe_load(suite_yaml.read_text())
        data["environment"]["skills"] = [listed]
        suite_yaml.write_text(yaml.safe_dump(data))
        res = run_cli("eval", "shout", cwd=root, env=KEYS)
        assert res.code == 2 and "leaves the suite directory" in res.err, res.err
        assert server.call_count == 0
