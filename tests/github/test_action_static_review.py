"""The zero-secret static review on a pull request no model can be called for: a fork's, or one
without a key. Through the real Action entry point and PyGithub against the fake GitHub: 0 model
calls, an annotation per finding, the review in the job summary, and in the sticky comment when
the token may write."""

from __future__ import annotations

import pytest

from helpers.action import PR
from helpers.repo import SKILL
from helpers.review_pr import seeded_skill


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_a_forks_pull_request_gets_the_static_review_with_no_model_call(tmp_path, fake, server):
    pr = PR(tmp_path, fake, server, {SKILL: seeded_skill()}, fork=True)
    fake.read_only = True
    res = pr.run()
    assert res.code == 0, res.err
    assert server.call_count == 0 and fake.writes() == []  # a pull_request token cannot write: nothing tried
    text = seeded_skill()
    assert (f"::error file={SKILL},line={line_of(text, 'references/escalation.md')},"
            "title=skillopt-ci review%3A missing-file::") in res.out
    assert f"::warning file={SKILL},line={line_of(text, 'Never answer')},title=skillopt-ci review%3A contradiction::" \
        in res.out
    assert f"::error file={SKILL},line={line_of(text, '```text')},title=skillopt-ci review%3A markdown::" in res.out
    assert "Pull request from a fork" in pr.summary and "/skillopt eval" in pr.summary
    assert "What a reviewer can see without a model" in pr.summary and "2 errors, 1 warning" in pr.summary
    assert pr.outputs()["verdict"] == "skipped"


def test_under_pull_request_target_the_fork_gets_the_review_as_the_sticky_comment(tmp_path, fake, server):
    pr = PR(tmp_path, fake, server, {SKILL: seeded_skill()}, fork=True)
    assert pr.run(event_name="pull_request_target").code == 0
    [comment] = pr.comments()
    assert comment["body"].startswith(f"<!-- skillopt-ci:gate head={pr.head_sha} -->")
    assert "static review ❌" in comment["body"] and "missing-file" in comment["body"]
    assert "A maintainer can run the paired evaluation with a `/skillopt eval` comment" in comment["body"]
    assert server.call_count == 0
    # Each finding is an annotation on its line of the check run, which blocks nothing (neutral).
    [check] = fake.check_runs_for(pr.head_sha)
    assert check["conclusion"] == "neutral" and check["output"]["title"] == "Static review: 3 findings, no model called"
    text = seeded_skill()
    assert {(a["path"], a["start_line"], a["annotation_level"], a["title"]) for a in check["output"]["annotations"]} == {
        (SKILL, line_of(text, "references/escalation.md"), "failure", "skillopt-ci review: missing-file"),
        (SKILL, line_of(text, "Never answer"), "warning", "skillopt-ci review: contradiction"),
        (SKILL, line_of(text, "```text"), "failure", "skillopt-ci review: markdown")}
    assert pr.run(event_name="pull_request_target").code == 0 and len(pr.comments()) == 1  # edited, not duplicated


def test_without_a_key_a_same_repository_pull_request_gets_the_review_comment(tmp_path, fake, server):
    pr = PR(tmp_path, fake, server, {SKILL: seeded_skill()}, target={"provider": "openai", "model": "gpt-4o-mini"})
    res = pr.run()
    assert res.code == 0, res.err
    [comment] = pr.comments()
    assert server.call_count == 0 and "No model key" in comment["body"] and "OPENAI_API_KEY" in comment["body"]
    assert "contradiction" in comment["body"]


@pytest.mark.parametrize("attack", ["config", "link"])
def test_a_fork_cannot_make_the_review_read_a_file_of_the_runner(tmp_path, fake, server, attack):
    """The config comes from the base commit, and a skill file that is a link is not read: a fork
    that points a "skill" at the runner's files gets nothing of them into the log or the summary."""
    outside = tmp_path / "runner-secret"
    outside.write_text("---\nname: x\ndescription: SECRET-RUNNER-VALUE\n---\nSECRET-RUNNER-VALUE\n")
    if attack == "config":
        pr = PR(tmp_path, fake, server, {SKILL: seeded_skill()}, fork=True)
        (pr.root / "skillopt.yml").write_text((pr.root / "skillopt.yml").read_text().replace(
            "skills/ticket-triage/SKILL.md", str(outside)))
    else:
        pr = PR(tmp_path, fake, server, {SKILL: seeded_skill()}, fork=True)
        (pr.root / SKILL).unlink()
        (pr.root / SKILL).symlink_to(outside)
    res = pr.run()
    if attack == "config":  # the base's config names the real skill: reviewed as usual
        assert res.code == 0 and "missing-file" in res.out, res.err
    else:  # the skill file leads out of the repository: refused before anything is read
        assert res.code == 2 and "is outside the git repository" in res.out
    assert "SECRET-RUNNER-VALUE" not in res.out + res.err + pr.summary
    assert server.call_count == 0
