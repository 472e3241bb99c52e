"""The nightly training pull request: ``skillopt-ci action`` in mode train against the fake GitHub
(real PyGithub) and the simulated target and optimizer (real OpenAI SDK)."""

from __future__ import annotations

import pytest

from helpers.action import nightly, run_train, training_pulls
from helpers.repo import SKILL
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.sim_models import SimulatedModels


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


@pytest.mark.parametrize("fault", ["labels", "check run"])
def test_a_failed_label_or_check_run_keeps_the_pull_request_number(tmp_path, fake, fault):
    if fault == "labels":
        fake.fail_next("POST", r"/issues/\d+/labels$", 403, times=None)
        need = "pull-requests: write"
    else:
        fake.fail_next("POST", r"/check-runs$", 403, times=None)
        need = "checks: write"
    with ScriptedModelServer(SimulatedModels()) as server:
        pr = nightly(tmp_path, fake, server)
        res = run_train(pr)
    assert res.code == 0, res.err + res.out
    [opened] = training_pulls(fake)
    outputs = pr.outputs()
    assert outputs["verdict"] == "improved" and outputs["pr-number"] == str(opened["number"])
    assert f"::warning title=skillopt-ci could not update GitHub::pull request #{opened['number']} was opened" in res.out
    assert need in res.out and "::error" not in res.out
    assert f"pull request [#{opened['number']}](" in pr.summary
    assert f"add `permissions: {need}`" in pr.summary


def test_a_pull_request_that_cannot_be_opened_still_reports_the_improvement(tmp_path, fake):
    fake.fail_next("POST", r"/pulls$", 403, "GitHub Actions is not permitted to create or approve pull requests.",
                   times=None)
    with ScriptedModelServer(SimulatedModels()) as server:
        pr = nightly(tmp_path, fake, server)
        res = run_train(pr)
    assert res.code == 3, res.err + res.out  # the deliverable (the PR) failed: see README, "GitHub Action"
    assert training_pulls(fake) == []
    outputs = pr.outputs()
    assert outputs["verdict"] == "improved" and "pr-number" not in outputs
    assert "::warning title=skillopt-ci could not update GitHub::opening the pull request: 403 GitHub Actions is " \
        "not permitted" in res.out
    assert "Allow GitHub Actions to create and approve pull requests" in res.out
    assert "::error title=skillopt-ci train::training improved ticket-triage but no pull request could be opened" \
        in res.out
    assert "ticket-triage: improved, but the pull request could not be opened" in pr.summary
    assert "add `permissions: pull-requests: write`" in pr.summary


def test_a_config_with_the_old_acceptance_flags_says_so_once_in_the_log(tmp_path, fake):
    with ScriptedModelServer(SimulatedModels()) as server:
        pr = nightly(tmp_path, fake, server)
        config = (pr.root / "skillopt.yml").read_text()
        assert "\ntrain:\n" in config
        (pr.root / "skillopt.yml").write_text(config.replace("\ntrain:\n", "\ntrain:\n  sequential: false\n", 1))
        res = run_train(pr)
    assert res.code == 0, res.err + res.out
    warnings = [line for line in res.out.splitlines() if line.startswith("::warning::")]
    assert len(warnings) == 2, warnings  # each once, though the flow loads the config more than once
    assert "train.sequential: deprecated: write `acceptance: screened` instead" in warnings[0]
    assert "is retired" in warnings[1] and "it runs as `acceptance: screened`" in warnings[1]


def test_nightly_training_of_a_description_proposes_it_with_the_trigger_table(tmp_path, fake):
    import yaml

    notes = "skills/release-notes/SKILL.md"
    with ScriptedModelServer(SimulatedModels()) as server:
        pr = nightly(tmp_path, fake, server)
        data = yaml.safe_load((pr.root / "skillopt.yml").read_text())
        data["skills"] = [{"path": notes, "suite": "eval_suites/release-notes"}]
        data["train"]["target"] = "description"
        (pr.root / "skillopt.yml").write_text(yaml.safe_dump(data))
        fake.seed_files("main", {notes: (pr.root / notes).read_text()})
        res = run_train(pr)
    assert res.code == 0, res.err + res.out
    [opened] = [p for p in fake.pulls.values() if p["head_ref"] == "skillopt/train/release-notes"]
    body = opened["body"]
    assert "Description before:" in body and "Helps with project documents." in body
    assert "| triggering | recall | precision | accuracy |" in body
    assert "| val | 0/6 (0%) → 6/6 (100%) |" in body  # recall of the validation requests
    trained = fake.file_at(fake.branch_sha("skillopt/train/release-notes"), notes)
    before = (pr.root / notes).read_text()
    assert trained.split("---", 2)[2] == before.split("---", 2)[2]  # only the front matter changed
    described = next(line for line in trained.splitlines() if line.startswith("description: "))
    assert "name: release-notes" in trained and "Use when the request is about release" in described


def test_nightly_training_deletes_the_trained_skill_branches_of_closed_pull_requests(tmp_path, fake):
    with ScriptedModelServer(SimulatedModels(malformed=True)) as server:
        pr = nightly(tmp_path, fake, server)
        main = fake.branch_sha("main")
        fake.add_pull(8, fake.add_commit(parents=[main]), main, head_ref="closed-one", state="closed")
        fake.add_pull(9, fake.add_commit(parents=[main]), main, head_ref="open-one")
        for number in (8, 9):
            fake.set_branch(f"skillopt/suggest/pr-{number}", fake.add_commit(parents=[main]))
        res = run_train(pr)
    assert res.code == 0, res.err + res.out
    assert fake.branch_sha("skillopt/suggest/pr-8") is None  # its pull request closed without /skillopt apply
    assert fake.branch_sha("skillopt/suggest/pr-9") is not None  # still open: apply may still take it
    assert "Deleted the trained-skill branches of closed pull requests: `skillopt/suggest/pr-8`." in pr.summary
