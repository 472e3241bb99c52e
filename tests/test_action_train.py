"""The nightly training pull request: ``skillopt-ci action`` in mode train against the fake GitHub
(real PyGithub) and the simulated target and optimizer (real OpenAI SDK)."""

from __future__ import annotations

import pytest
from test_action import PR
from test_train import SKILL, train_project

from conftest import run_cli
from skillopt_ci.testing import FakeGitHub, ScriptedModelServer
from skillopt_ci.testing.sim_models import SimulatedModels


@pytest.fixture
def fake():
    with FakeGitHub(owner="octo", repo="skills") as gh:
        yield gh


def nightly(tmp_path, fake, server) -> PR:
    pr = PR(tmp_path, fake, server, {"README.md": "x\n"})
    train_project(pr.root / "_unused", server.openai_base_url)  # a config with the optimizer role
    (pr.root / "skillopt.yml").write_text((pr.root / "_unused/skillopt.yml").read_text())
    fake.seed_files("main", {SKILL: (pr.root / SKILL).read_text(), "README.md": "hello\n"})
    return pr


def run_train(pr: PR):
    return run_cli("action", env=pr.env(event_name="schedule", event={}, SKILLOPT_MODE="train"), cwd=pr.root)


def training_pulls(fake: FakeGitHub) -> list[dict]:
    return [p for p in fake.pulls.values() if p["head_ref"] == "skillopt/train/ticket-triage"]


def test_first_night_opens_a_pull_request_and_the_second_updates_it(tmp_path, fake):
    with ScriptedModelServer(SimulatedModels()) as server:
        pr = nightly(tmp_path, fake, server)
        first = run_train(pr)
        assert first.code == 0, first.err + first.out
        [opened] = training_pulls(fake)
        number = opened["number"]
        assert pr.outputs()["pr-number"] == str(number) and pr.outputs()["verdict"] == "improved"
        best = next((pr.root / ".skillopt/runs").glob("train-*/best_skill.md")).read_text()
        head = fake.branch_sha("skillopt/train/ticket-triage")
        assert fake.file_at(head, SKILL) == best != (pr.root / SKILL).read_text()
        # Only the skill file changed: every other path is as on main.
        assert {p: t for p, t in fake.files_at(head).items() if p != SKILL} == \
            {p: t for p, t in fake.files_at("main").items() if p != SKILL}
        assert set(fake.labels_on(number)) >= {"skillopt", "automated"}
        assert opened["body"].startswith("<!-- skillopt-ci:train:ticket-triage -->")
        [check] = [c for c in fake.check_runs_for(head) if c["name"] == "skillopt-ci train"]
        assert check["conclusion"] == "success"
        assert f"pull request [#{number}](" in pr.summary and ") opened" in pr.summary
        second = run_train(pr)
        assert second.code == 0, second.err
        assert [p["number"] for p in training_pulls(fake)] == [number]
        assert pr.summary.count(") updated") == 1
    assert not any("merge" in r.path for r in fake.requests)


def test_no_improvement_opens_nothing(tmp_path, fake):
    with ScriptedModelServer(SimulatedModels(malformed=True)) as server:
        pr = nightly(tmp_path, fake, server)
        res = run_train(pr)
    assert res.code == 0, res.err
    assert training_pulls(fake) == [] and fake.writes() == []
    assert "no improvement: no pull request" in pr.summary
    assert pr.outputs()["verdict"] == "unchanged" and "pr-number" not in pr.outputs()
