"""OfficeQA end to end: the fixture imported, then evaluated through the real OpenAI and Anthropic
SDKs against the scripted server, whose policy uses glob, grep and read on the task's documents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from helpers.cli import run_cli
from skillopt_ci.benchmarks.packs.officeqa.fixture import policy, small_manifest, write_fixture
from skillopt_ci.sim import ScriptedModelServer

KEYS = {"OPENAI_API_KEY": "sk-test-not-a-key-000000000000", "ANTHROPIC_API_KEY": "sk-ant-test-not-a-key-0000000"}
TARGETS = {
    "openai": lambda s: {"provider": "openai-compatible", "model": "sim-officeqa", "base_url": s.openai_base_url},
    "anthropic": lambda s: {"provider": "anthropic", "model": "sim-officeqa", "base_url": s.anthropic_base_url},
}


def project(root: Path, target: dict) -> Path:
    data = write_fixture(root / "data")
    result = run_cli("bench", "import", "officeqa", "--from", str(data), "--out", str(root / "eval_suites/officeqa"),
                     "--manifest", str(small_manifest(root / "manifest")))
    assert result.code == 0, result.err
    skill = root / "skills/officeqa/SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: officeqa\ndescription: Answer questions from Treasury Bulletins.\n---\n"
                     "Grep the candidate files for the row, read around it, answer inside <answer></answer>.\n")
    (root / "skillopt.yml").write_text(yaml.safe_dump({
        "version": 1,
        "models": {"target": {"max_retries": 1, **target}},
        "skills": [{"path": "skills/officeqa/SKILL.md", "suite": "eval_suites/officeqa"}],
        "concurrency": 2,
        "cache": {"mode": "off"},
    }))
    return root


@pytest.fixture
def office_server():
    with ScriptedModelServer(policy) as server:
        yield server


@pytest.mark.parametrize("sdk", TARGETS)
def test_officeqa_runs_through_the_real_sdk_with_the_document_tools(tmp_path, office_server, sdk):
    root = project(tmp_path / "p", TARGETS[sdk](office_server))
    out = tmp_path / "run"
    result = run_cli("eval", "officeqa", "--split", "train", "--out", str(out), "--quiet", cwd=root, env=KEYS)
    assert result.code == 0, result.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_errors"] == 0 and 0 < summary["mean"] < 1  # receipts right, expenditures wrong
    found = {r["task_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert {t: r["passed"] for t, r in found.items()} == {"UID0002": True, "UID0007": False, "UID0014": True}
    multi = found["UID0014"]["trajectory"]
    calls = [(s["name"], json.loads(s["arguments"])) for s in multi if s["kind"] == "tool_call"]
    assert calls[:3] == [("glob", {"pattern": "treasury_bulletin_*.txt"}),
                         ("grep", {"pattern": "| 1941 |", "path": "treasury_bulletin_1982_08.txt"}),
                         ("grep", {"pattern": "| 1941 |", "path": "treasury_bulletin_1944_01.txt"})]
    assert calls[3] == ("read", {"path": "treasury_bulletin_1944_01.txt", "start": 40, "limit": 5})
    shown = [s["text"] for s in multi if s["kind"] == "tool_result"]
    assert shown[0] == "treasury_bulletin_1944_01.txt\ntreasury_bulletin_1982_08.txt"  # only this task's files
    assert shown[1].startswith("(no line of treasury_bulletin_1982_08.txt contains")
    assert shown[2] == "42: | 1941 | 7,496 | 13,712 |"
    assert found["UID0014"]["output"].endswith("<answer>7,496</answer>")
    wrong = found["UID0007"]["feedback"]
    assert wrong.startswith("official: hard 0, soft 0.00: no match: answered")
    # every call offered exactly the three document tools
    assert all([t["name"] for t in c.request.tools] == ["glob", "read", "grep"] for c in office_server.calls)
    assert {c.request.protocol for c in office_server.calls} == {sdk}


def test_a_reply_without_answer_tag_scores_zero_not_an_error(tmp_path):
    def mute(request):
        return "I am not sure."

    with ScriptedModelServer(mute) as server:
        root = project(tmp_path / "p", TARGETS["openai"](server))
        out = tmp_path / "run"
        result = run_cli("eval", "officeqa", "--out", str(out), "--quiet", cwd=root, env=KEYS)
    assert result.code == 0, result.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_errors"] == 0 and summary["mean"] == 0.0
    first = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert first["output"] == "" and "no answer (the rollout ended without one)" in first["feedback"]
