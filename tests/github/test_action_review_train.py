"""``/skillopt train`` on a pull request posts the trained edits as suggestions in a review, and
``/skillopt apply`` commits the validated skill to the pull request's branch: the Action against
the fake GitHub (real PyGithub), a real ``origin`` that moves the pull request as GitHub does on a
push, and the simulated target and optimizer (real OpenAI SDK)."""

from __future__ import annotations

import subprocess

import pytest

from helpers.action import CommentedPR, better_skill
from helpers.repo import SKILL, git
from helpers.review_pr import ReviewPR, accept, add_enterprise_rule, stored_message
from skillopt_ci.core.suggestions import Suggestion, changes
from skillopt_ci.github.publisher import read_marker
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.sim_models import SimulatedModels


@pytest.fixture
def sim():
    with ScriptedModelServer(SimulatedModels()) as server:
        yield server


@pytest.fixture
def review_pr(tmp_path, fake, sim):
    fake.set_permission("alice", "write")
    return ReviewPR(tmp_path, fake, sim, add_enterprise_rule)


def trained_run(pr: ReviewPR):
    [run] = list((pr.root / ".skillopt/runs").glob("train-*"))
    return run


def sticky(pr, kind: str) -> dict:
    [found] = [c for c in pr.comments() if (read_marker(c["body"]) or ("",))[0] == kind]
    return found


def test_training_on_a_pull_request_reviews_it_with_suggestions_on_its_own_lines(review_pr, fake, sim):
    res = review_pr.comment("/skillopt train ticket-triage")
    assert res.code == 0, res.err + res.out
    best = (trained_run(review_pr) / "best_skill.md").read_text()
    head = review_pr.origin_file(review_pr.head_sha).decode()
    assert best != head and sim.call_count > 0
    [review] = fake.reviews_on(7)
    assert review["state"] == "COMMENTED" and review["commit_id"] == review_pr.head_sha  # no approval
    [comment] = review["comments"]
    # The change in the pull request's hunk (the priority rules) is a suggestion on the line it follows.
    assert comment["path"] == SKILL and comment["side"] == "RIGHT"
    assert comment["line"] == head.splitlines().index("- The default priority is P3.") + 1
    block = comment["body"].split("```suggestion\n", 1)[1].rsplit("\n```", 1)[0]
    assert block.splitlines()[0] == "- The default priority is P3."
    assert "- Bug tickets have priority P2." in block.splitlines()
    assert "validation +0.083 when accepted" in comment["body"] and "support 2" in comment["body"]
    assert "why: No rule covers this" in comment["body"]
    # The category rules lie outside the pull request's diff: the review body shows them as a diff.
    assert "1 change falls outside this pull request's diff" in review["body"]
    assert '+- If the ticket mentions "breach", "hacked", "leaked" or "phishing", the category is security.' \
        in review["body"]
    assert "| val (12 tasks) | 0.458 | 0.917 |" in review["body"]
    # The suggestion plus the body's change are exactly the trained skill.
    [inside] = [c for c in changes(head, best) if c.start > 15]
    taken = accept(head, [Suggestion(inside, comment["line"], comment["line"], tuple(block.splitlines()))])
    assert [c for c in changes(taken, best)] == [c for c in changes(head, best) if c.start < 15]
    # The sticky comment links the review; no separate pull request was opened.
    body = sticky(review_pr, "train")["body"]
    assert "## skillopt-ci train: ✅ improved" in body and "pullrequestreview-" in body
    assert "Comment `/skillopt apply` to commit the trained skill" in body
    assert list(fake.pulls) == [7]
    # The validated bytes wait on the suggestion branch, on top of the head that was trained.
    stored = review_pr.origin_sha("skillopt/suggest/pr-7")
    assert review_pr.origin_file(stored) == best.encode()
    assert git(review_pr.root, "rev-parse", f"{stored}^") == review_pr.head_sha
    assert review_pr.outputs()["suggestion-commit"] == stored
    assert "Skillopt-Run: 4242" in stored_message(review_pr)


def test_apply_commits_exactly_the_validated_skill_and_gates_the_new_head(review_pr, fake):
    assert review_pr.comment("/skillopt train").code == 0
    best = (trained_run(review_pr) / "best_skill.md").read_bytes()
    trained_on = review_pr.head_sha
    res = review_pr.comment("/skillopt apply")
    assert res.code == 0, res.err + res.out
    new_head = review_pr.origin_sha("feature")
    assert review_pr.origin_file(new_head) == best  # byte for byte
    assert git(review_pr.root, "rev-parse", f"{new_head}^") == trained_on  # one commit on the old head
    changed = subprocess.run(["git", "diff", "--name-only", trained_on, new_head], cwd=review_pr.origin,
                             capture_output=True, text=True, check=True).stdout.split()
    assert changed == [SKILL]
    message = subprocess.run(["git", "log", "-1", "--format=%B", new_head], cwd=review_pr.origin,
                             capture_output=True, text=True, check=True).stdout
    assert "run 4242" in message and "val 0.458 -> 0.917" in message
    assert fake.pulls[7]["head_sha"] == new_head  # the API's pull request followed the push
    # The gate ran on the new head; its comment and check run say the skill is the trained one.
    gate = sticky(review_pr, "gate")["body"]
    assert read_marker(gate) == ("gate", new_head) and "## skillopt-ci gate: ✅ passed" in gate
    assert "byte for byte the trained skill validated in run 4242" in gate
    assert "| head | 12 | 12 |" in gate  # every rollout of the applied skill was measured in training
    [check] = [c for c in fake.check_runs_for(new_head) if c["name"] == "skillopt-ci gate"]
    assert check["conclusion"] == "success" and "Applied with `/skillopt apply` by @alice" in check["output"]["summary"]
    assert review_pr.outputs()["applied-commit"] == new_head and review_pr.verdict() == "passed"
    # The suggestion branch is gone: a second apply has nothing to take.
    assert review_pr.comment("/skillopt apply").code == 0
    assert "no trained skill is waiting for #7" in review_pr.replies()[-1]
    assert review_pr.origin_sha("feature") == new_head


def test_apply_after_the_head_moved_is_refused_and_changes_nothing(review_pr, fake):
    assert review_pr.comment("/skillopt train").code == 0
    trained_on = review_pr.head_sha
    moved = review_pr.push_to_feature(add_enterprise_rule(better_skill()))
    assert fake.pulls[7]["head_sha"] == moved
    res = review_pr.comment("/skillopt apply")
    assert res.code == 0, res.err + res.out
    reply = review_pr.replies()[-1]
    assert "this pull request moved since training" in reply
    assert f"`{trained_on[:7]}`" in reply and f"`{moved[:7]}`" in reply and "Nothing was changed" in reply
    assert review_pr.origin_sha("feature") == moved and review_pr.verdict() == "refused"


def test_apply_refuses_a_suggestion_branch_that_does_not_hold_what_training_stored(review_pr, tmp_path):
    assert review_pr.comment("/skillopt train").code == 0
    stored = review_pr.origin_sha("skillopt/suggest/pr-7")
    # Someone moves the branch to other bytes under the same message (same parent, same trailers).
    work = tmp_path / "tamper"
    subprocess.run(["git", "clone", "-q", str(review_pr.origin), str(work)], check=True)
    git(work, "checkout", "-q", "--detach", review_pr.head_sha)
    (work / SKILL).write_text(review_pr.origin_file(stored).decode() + "- Always answer bug/P1.\n")
    git(work, "-c", "user.name=x", "-c", "user.email=x@example.com", "commit", "-q", "-am",
        stored_message(review_pr))
    git(work, "push", "-q", "-f", "origin", "HEAD:refs/heads/skillopt/suggest/pr-7")
    assert review_pr.comment("/skillopt apply").code == 0
    assert "does not hold what training stored" in review_pr.replies()[-1]
    assert review_pr.origin_sha("feature") == review_pr.head_sha


@pytest.mark.parametrize("role", ["read", "triage"])
def test_apply_without_write_permission_is_refused(review_pr, fake, role):
    assert review_pr.comment("/skillopt train").code == 0
    fake.set_permission("mallory", role)
    assert review_pr.comment("/skillopt apply", login="mallory").code == 0
    assert "run only for users with write, maintain or admin permission" in review_pr.replies()[-1]
    assert review_pr.origin_sha("feature") == review_pr.head_sha


def test_apply_for_a_fork_is_refused(tmp_path, fake, server):
    fake.set_permission("alice", "write")
    pr = CommentedPR(tmp_path, fake, server, {SKILL: better_skill()}, fork=True)
    assert pr.comment("/skillopt apply").code == 0
    [reply] = pr.replies()
    assert "does not push to a fork's branch" in reply and server.call_count == 0
    assert pr.checked_out() == pr.base_sha


def test_suggestions_whose_lines_github_refuses_go_into_the_review_body(review_pr, fake):
    fake.fail_next("POST", r"/pulls/7/reviews$", 422, "Unprocessable Entity")
    assert review_pr.comment("/skillopt train").code == 0
    [review] = fake.reviews_on(7)  # the first attempt was refused; the second carries everything
    assert review["comments"] == []
    assert "2 changes fall outside this pull request's diff" in review["body"]
    assert "+- Bug tickets have priority P2." in review["body"]


def test_no_improvement_posts_no_review_and_stores_nothing(tmp_path, fake):
    fake.set_permission("alice", "write")
    with ScriptedModelServer(SimulatedModels(malformed=True)) as server:
        pr = ReviewPR(tmp_path, fake, server, add_enterprise_rule)
        assert pr.comment("/skillopt train").code == 0
    assert fake.reviews_on(7) == []
    assert "## skillopt-ci train: no improvement" in sticky(pr, "train")["body"]
    assert subprocess.run(["git", "rev-parse", "--verify", "-q", "skillopt/suggest/pr-7"], cwd=pr.origin,
                          capture_output=True).returncode != 0


def test_without_permission_to_push_the_review_is_still_posted_and_says_apply_is_unavailable(review_pr, fake):
    # A read-only token: origin refuses the push of the suggestion branch.
    hook = review_pr.origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'remote: Permission to octo/skills.git denied to github-actions[bot].' >&2\n"
                    "exit 1\n")
    hook.chmod(0o755)
    res = review_pr.comment("/skillopt train")
    assert res.code == 0, res.err + res.out
    assert "contents: write" in res.out and "::warning" in res.out
    [review] = fake.reviews_on(7)
    assert len(review["comments"]) == 1 and "`/skillopt apply` is not available for this run" in review["body"]
    assert "`/skillopt apply` is not available for this run" in sticky(review_pr, "train")["body"]
    assert "suggestion-commit" not in review_pr.outputs()


def test_a_trained_description_is_suggested_on_the_front_matter_line_the_pull_request_changed(tmp_path, fake, sim):
    notes = "skills/release-notes/SKILL.md"
    fake.set_permission("alice", "write")
    pr = ReviewPR(tmp_path, fake, sim, lambda t: t.replace("Helps with project documents.", "Helps with docs."),
                  train={"target": "description"}, skill=notes, suite="eval_suites/release-notes")
    res = pr.comment("/skillopt train")
    assert res.code == 0, res.err + res.out
    [review] = fake.reviews_on(7)
    [comment] = review["comments"]
    assert comment["path"] == notes and comment["line"] == 3  # the description's line of the front matter
    [line] = comment["body"].split("```suggestion\n", 1)[1].rsplit("\n```", 1)[0].splitlines()
    trained = (pr.root / ".skillopt/runs").glob("train-*/best_skill.md").__next__().read_text()
    assert line == trained.splitlines()[2] and line.startswith("description: ") and line != "description: Helps with docs."
    assert "** of the description · step" in comment["body"]  # the edit behind it is a description edit
    assert "no change falls" not in review["body"].lower() and "outside this pull request's diff" not in review["body"]


def test_an_apply_whose_gate_cannot_run_says_the_commit_was_pushed(review_pr, sim):
    assert review_pr.comment("/skillopt train").code == 0
    sim.stop()  # the model is unreachable now: the gate after the push cannot measure
    res = review_pr.comment("/skillopt apply")
    assert res.code == 3, res.err + res.out
    new_head = review_pr.origin_sha("feature")
    assert new_head != review_pr.head_sha
    reply = review_pr.replies()[-1]
    assert reply.startswith(f"@alice `/skillopt apply`: `{new_head[:7]}` was pushed to the branch, but "), reply
    assert "## skillopt-ci gate: 💥 could not run" in sticky(review_pr, "gate")["body"]
