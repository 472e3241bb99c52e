"""How ``eval --batch`` groups calls: a multi-turn environment goes in rounds (one batch per turn
wave), ``batch.max_requests`` caps a batch, and the Action's ``batch`` input reaches the eval."""

from __future__ import annotations

import json

import pytest
import yaml

from helpers.batch import FAST, KEYS, batch_project, journal, results, summary
from helpers.cli import run_cli
from helpers.project import use_llm_judge
from skillopt_ci.core.description import with_description
from skillopt_ci.sim.sim_models import SimulatedModels

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


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_trigger_suite_through_the_catalogue_batches_in_rounds_and_matches_a_direct_run(tmp_path, server, provider):
    """The bundled release-notes trigger suite with a description that names its requests: the
    first turns of all 12 requests go in one batch, the second turns (after the Skill tool
    returned the body) of those that loaded a skill in the next; consults and the trigger counts
    are those of the same suite run call by call."""
    server.policy = SimulatedModels()
    project = batch_project(tmp_path / "proj", server, provider)
    skill = project / "skills/release-notes/SKILL.md"
    skill.write_text(with_description(skill.read_text(), "Write release notes. Use when the request is about "
                                                         "release notes, a changelog or a version's upgrade steps."))
    runs = {}
    for mode in ("batch", "direct"):
        runs[mode] = tmp_path / mode
        res = run_cli("eval", "skills/release-notes/SKILL.md", "--suite", "eval_suites/release-notes", "--out",
                      str(runs[mode]), *(["--batch"] if mode == "batch" else []), "--cache", "off", "--quiet",
                      cwd=project, env=KEYS)
        assert res.code == 0, res.err
        if mode == "batch":
            sizes = [len(b.lines) for b in server.batches.batches.values()]
    direct, batched = summary(runs["direct"]), summary(runs["batch"])
    assert batched["trigger"] == direct["trigger"] and direct["trigger"]["tp"] >= 5
    # every consult is a second turn; a near-miss that loaded a sibling is one too
    assert sizes[0] == 12 and len(sizes) == 2 and direct["trigger"]["tp"] <= sizes[1] < 12
    assert {k: r["consult"] for k, r in results(runs["batch"]).items()} == \
        {k: r["consult"] for k, r in results(runs["direct"]).items()}
