"""How ``eval --batch`` groups calls: a multi-turn environment goes in rounds (one batch per turn
wave), ``batch.max_requests`` caps a batch, and the Action's ``batch`` input reaches the eval."""

from __future__ import annotations

import json

import yaml

from helpers.batch import FAST, KEYS, batch_project, journal, summary
from helpers.cli import run_cli
from helpers.project import use_llm_judge

WORLD = '''
class Counter:
    """Done when the count reaches two: every episode takes exactly two turns of "add"."""
    def reset(self, task):
        self.n = 0
        return "The count is 0."
    def step(self, action):
        self.n += action == "add"
        return f"The count is {self.n}.", float(self.n == 2), self.n == 2
'''


def counting_suite(project) -> None:
    suite = project / "eval_suites/counting"
    suite.mkdir()
    (suite / "world.py").write_text(WORLD)
    (suite / "suite.yaml").write_text(yaml.safe_dump({
        "name": "counting", "prompt": "Count to two. {{ input }}", "repeats": 1,
        "environment": {"type": "interactive", "world": "world:Counter", "max_steps": 4},
        "scorer": {"type": "reward"}}))
    (suite / "val.jsonl").write_text("".join(json.dumps({"id": f"c{i}", "input": f"#{i}"}) + "\n" for i in range(5)))


def test_a_multi_turn_environment_goes_in_rounds(tmp_path, server):
    project = batch_project(tmp_path / "proj", server)
    counting_suite(project)
    server.policy = lambda request: "<action>add</action>"
    run = tmp_path / "run"
    res = run_cli("eval", "skills/ticket-triage/SKILL.md", "--suite", "eval_suites/counting", "--out", str(run),
                  "--batch", "--quiet", cwd=project, env=KEYS)
    assert res.code == 0, res.err
    # Five episodes of two turns: the first turns of all five in one batch, then the second turns.
    assert [len(b.lines) for b in server.batches.batches.values()] == [5, 5]
    assert [e["event"] for e in journal(run)] == ["submitted", "collected"] * 2
    assert summary(run)["mean"] == 1.0 and summary(run)["n_results"] == 5


def test_max_requests_caps_a_batch(tmp_path, server):
    project = batch_project(tmp_path / "proj", server, batch={"quiet_seconds": 0.2, "poll_seconds": 0.05,
                                                                "max_requests": 5})
    run = tmp_path / "run"
    res = run_cli("eval", "ticket-triage", "--out", str(run), "--batch", "--quiet", cwd=project, env=KEYS)
    assert res.code == 0, res.err
    assert sorted(len(b.lines) for b in server.batches.batches.values()) == [2, 5, 5]
    assert summary(run)["n_results"] == 12 and summary(run)["n_errors"] == 0


def test_the_actions_scheduled_eval_takes_the_batch_input(tmp_path, fake, server):
    from helpers.action import PR

    target = {"provider": "openai", "model": "sim-triage-1", "base_url": server.openai_base_url,
              "params": {"temperature": 0}}
    pr = PR(tmp_path, fake, server, {"README.md": "x\n"}, gate={"min_score": 0.4}, models={"target": target},
            batch=FAST)
    res = pr.run(event_name="schedule", event={}, SKILLOPT_BATCH="true", **KEYS)
    assert res.code == 0, res.err
    assert server.batches.creates == 1 and server.call_count == 12
    assert "## skillopt-ci eval: ✅ 1 skill(s)" in pr.summary and "(batch price)" in pr.summary
    bad = pr.run(event_name="schedule", event={}, SKILLOPT_BATCH="maybe", **KEYS)
    assert bad.code == 2 and "SKILLOPT_BATCH" in bad.err


def test_an_llm_judge_gets_its_own_batch_after_the_targets(tmp_path, server):
    from helpers.project import judge_policy

    server.policy = judge_policy
    project = batch_project(tmp_path / "proj", server)
    use_llm_judge(project, server.anthropic_base_url)
    run = tmp_path / "run"
    res = run_cli("eval", "ticket-triage", "--out", str(run), "--batch", "--quiet", cwd=project, env=KEYS)
    assert res.code == 0, res.err
    # Twelve target lines at OpenAI, then the twelve verdicts in one Message Batch.
    assert [(b.kind, len(b.lines)) for b in server.batches.batches.values()] == [("openai", 12), ("anthropic", 12)]
    assert [(e["event"], e.get("role")) for e in journal(run)] == [
        ("submitted", "target"), ("collected", None), ("submitted", "judge"), ("collected", None)]
    s = summary(run)
    assert s["scorer_input_tokens"] > 0 and s["pricing"] == "batch" and s["n_results"] == 12
