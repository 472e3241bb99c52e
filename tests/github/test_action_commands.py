"""Reviewer commands (``/skillopt …`` comments on a pull request) end to end: the real entry point,
PyGithub against the fake GitHub (permission, pull request, files), the OpenAI SDK against the
scripted model, and a real git repository whose ``origin`` serves ``refs/pull/N/head``."""

from __future__ import annotations

import json

import pytest

from helpers.action import SUITE, CommentedPR, better_skill
from helpers.cli import run_cli
from helpers.paths import REPO
from helpers.repo import SKILL, git
from skillopt_ci.github.commands import HELP, BadCommand, Request, parse_command
from skillopt_ci.github.publisher import MARKER

BOT_LOGIN = "github-actions[bot]"


@pytest.fixture
def skill_pr(tmp_path, fake, server):
    fake.set_permission("alice", "write")
    return CommentedPR(tmp_path, fake, server, {SKILL: better_skill()})


def test_a_write_users_eval_runs_on_the_head_and_the_sticky_comment_shows_scores(skill_pr, fake, server):
    res = skill_pr.comment("/skillopt eval")
    assert res.code == 0, res.err + res.out
    assert skill_pr.checked_out() == skill_pr.head_sha  # the PR's head, checked out after the checks
    [sticky] = skill_pr.sticky()
    body = sticky["body"]
    assert f"## skillopt-ci eval: ✅ 1 skill(s) at `{skill_pr.head_sha[:7]}`" in body
    [row] = [line for line in body.splitlines() if line.startswith("| ticket-triage")]
    assert row.count("|") == 4 and "(n=12)" in row and "recomputed: no stored score" in row
    assert f"({skill_pr.base_sha[:7]}, " in row  # the default branch's commit it was measured at
    assert server.call_count > 0
    assert skill_pr.replies() == [] and skill_pr.verdict() == "passed"
    # The "evaluating…" note first, then the scores in the same comment.
    writes = [r for r in fake.writes() if "comments" in r.path]
    assert [r.method for r in writes] == ["POST", "PATCH"] and "evaluating" in writes[0].body["body"]


def test_the_permission_is_asked_from_the_api(skill_pr, fake):
    skill_pr.comment("/skillopt help")  # help needs no permission: no such call
    assert not [r for r in fake.requests if "/permission" in r.path]
    skill_pr.comment("/skillopt gate", login="mallory")
    [asked] = [r for r in fake.requests if "/permission" in r.path]
    assert asked.method == "GET" and asked.path.endswith("/repos/octo/skills/collaborators/mallory/permission")


@pytest.mark.parametrize("role", ["read", "triage", "none"])
def test_a_user_without_write_permission_gets_a_reply_and_nothing_runs(skill_pr, fake, server, role):
    fake.set_permission("mallory", role)
    # The comment claims OWNER: the Action never believes the payload about who may run.
    event = skill_pr.event("/skillopt eval", login="mallory", author_association="OWNER")
    res = run_cli("action", env=skill_pr.env(event), cwd=skill_pr.root)
    assert res.code == 0, res.err
    assert server.call_count == 0
    assert skill_pr.sticky() == []
    [reply] = skill_pr.replies()
    assert reply.startswith("@mallory `/skillopt` commands run only for users with write, maintain or admin "
                            "permission on octo/skills")
    assert "Nothing was run." in reply
    assert skill_pr.checked_out() == skill_pr.base_sha  # the head was never checked out
    assert skill_pr.verdict() == "refused"


def test_a_maintainer_may_run(skill_pr, fake, server):
    fake.set_permission("maria", "maintain")  # GitHub reports maintain as write
    res = skill_pr.comment("/skillopt eval ticket-triage", login="maria")
    assert res.code == 0, res.err
    assert len(skill_pr.sticky()) == 1 and server.call_count > 0


def test_a_fork_that_changes_a_python_scorer_is_refused_with_the_reason(tmp_path, fake, server):
    fake.set_permission("alice", "admin")
    scorer = f"{SUITE}/scorer.py"
    pr = CommentedPR(tmp_path, fake, server, {SKILL: better_skill(), scorer: "def score(*a):\n    return 1.0\n"},
                     fork=True)
    res = pr.comment("/skillopt eval")
    assert res.code == 0, res.err
    assert server.call_count == 0 and pr.sticky() == []
    [reply] = pr.replies()
    assert "comes from a fork and changes files that select or are code" in reply
    assert f"`{scorer}`" in reply and f"`{SKILL}`" not in reply  # names the code, not the skill
    assert "Nothing was run" in reply
    assert pr.checked_out() == pr.base_sha
    assert "changes files that select or are code" in pr.summary and pr.verdict() == "refused"


def test_a_fork_that_changes_the_configuration_is_refused(tmp_path, fake, server):
    fake.set_permission("alice", "write")
    pr = CommentedPR(tmp_path, fake, server, {SKILL: better_skill(), "skillopt.yml": "version: 1\n"}, fork=True)
    assert pr.comment("/skillopt gate").code == 0
    [reply] = pr.replies()
    assert "`skillopt.yml`" in reply and server.call_count == 0


def test_a_forks_skill_text_is_evaluated(tmp_path, fake, server):
    fake.set_permission("alice", "write")
    pr = CommentedPR(tmp_path, fake, server, {SKILL: better_skill(), "skills/ticket-triage/notes.md": "notes\n"},
                     fork=True)
    res = pr.comment("/skillopt eval")
    assert res.code == 0, res.err + res.out
    assert server.call_count > 0
    # Not the fork's commit: the base branch with the fork's two documents in place.
    evaluated = pr.checked_out()
    assert evaluated != pr.head_sha
    changed = git(pr.root, "diff", "--name-only", pr.base_sha, evaluated).splitlines()
    assert changed == ["skills/ticket-triage/SKILL.md", "skills/ticket-triage/notes.md"]
    assert (pr.root / SKILL).read_text() == better_skill()
    [sticky] = pr.sticky()
    assert "## skillopt-ci eval: ✅" in sticky["body"] and pr.replies() == []


def test_training_is_refused_for_a_fork(tmp_path, fake, server):
    fake.set_permission("alice", "write")
    pr = CommentedPR(tmp_path, fake, server, {SKILL: better_skill()}, fork=True)
    assert pr.comment("/skillopt train").code == 0
    [reply] = pr.replies()
    assert "training is not run for pull requests from forks" in reply and server.call_count == 0


def test_gate_command_answers_in_the_sticky_comment_and_the_check_run(skill_pr, fake):
    res = skill_pr.comment("/skillopt gate")
    assert res.code == 0, res.err + res.out
    [sticky] = skill_pr.sticky()
    assert sticky["body"].startswith(MARKER) and "## skillopt-ci gate:" in sticky["body"]
    [check] = fake.check_runs_for(skill_pr.head_sha)
    assert check["name"] == "skillopt-ci gate"


def test_help_is_answered_for_anyone(skill_pr, fake, server):
    fake.set_permission("reader", "read")
    res = skill_pr.comment("/skillopt help", login="reader")
    assert res.code == 0
    assert skill_pr.replies() == [HELP] and server.call_count == 0 and skill_pr.verdict() == "help"


@pytest.mark.parametrize(("body", "problem"), [
    ("/skillopt evaluate", "unknown subcommand `evaluate`"),
    ("/skillopt gate now", "`/skillopt gate` takes no arguments, got `now`"),
    ("/skillopt eval a b", "`/skillopt eval` takes at most one skill, got `a b`"),
    ("/skillopt eval nosuch", "no configured skill named `nosuch` (configured: `ticket-triage`)"),
])
def test_a_malformed_command_gets_the_help_text_and_exit_2(skill_pr, server, body, problem):
    res = skill_pr.comment(body)
    assert res.code == 2, res.err + res.out
    [reply] = skill_pr.replies()
    assert reply.startswith(problem) and reply.endswith(HELP)
    assert server.call_count == 0 and skill_pr.sticky() == []
    assert f"::error title=skillopt-ci%3A not a valid command::{problem}" in res.out


@pytest.mark.parametrize("event_change", [
    {"comment": {"body": "Looks good to me. /skillopt eval later", "user": {"login": "alice", "type": "User"}}},
    {"comment": {"body": "/skillopt eval", "user": {"login": BOT_LOGIN, "type": "Bot"}}},
    {"issue": {"number": 7}},  # an issue, not a pull request
    {"action": "edited"},
])
def test_other_comments_are_ignored_quietly(skill_pr, fake, server, event_change):
    event = {**skill_pr.event("/skillopt eval"), **event_change}
    fake.clear_requests()
    res = run_cli("action", env=skill_pr.env(event), cwd=skill_pr.root)
    assert res.code == 0 and "::" not in res.out
    assert fake.requests == [] and server.call_count == 0 and skill_pr.verdict() == "ignored"


def test_a_head_that_moved_after_the_checks_is_not_run(skill_pr, fake, server):
    git(skill_pr.root, "checkout", "-q", "-b", "later", skill_pr.head_sha)
    (skill_pr.root / f"{SUITE}/scorer.py").write_text("def score(*a):\n    return 1.0\n")
    git(skill_pr.root, "add", "-A")
    git(skill_pr.root, "commit", "-q", "-m", "later")
    git(skill_pr.root, "push", "-q", "-f", "origin", "later:refs/pull/7/head")  # pushed, API not yet updated
    git(skill_pr.root, "checkout", "-q", "main")
    res = skill_pr.comment("/skillopt eval")
    assert res.code == 3
    assert "pull request #7 moved to" in res.out and "nothing was run" in res.out
    assert server.call_count == 0 and skill_pr.checked_out() == skill_pr.base_sha


def test_without_a_token_nothing_runs(skill_pr, server):
    res = skill_pr.comment("/skillopt eval", SKILLOPT_TOKEN="", GITHUB_TOKEN="")
    assert res.code == 2 and "needs a token" in res.out and server.call_count == 0


def test_parse_command_reads_the_first_line_only():
    assert parse_command("/skillopt eval ticket-triage\nbecause the rules changed") == Request("eval", "ticket-triage")
    assert parse_command("\n  /skillopt gate  \n") == Request("gate")
    assert parse_command("/skilloptx eval") is None and parse_command("please /skillopt eval") is None
    with pytest.raises(BadCommand, match="needs a subcommand"):
        parse_command("/skillopt")


def readme_workflow() -> dict:
    import yaml

    text = (REPO / "README.md").read_text()
    block = text[text.index("## Use it in your repository"):]
    block = block[block.index("```yaml\n") + 8:]
    return yaml.safe_load(block[:block.index("```")])


def repository_workflow() -> dict:
    import yaml

    return yaml.safe_load((REPO / ".github/workflows/skillopt.yml").read_text())


@pytest.mark.parametrize("load", [repository_workflow, readme_workflow], ids=["repository", "readme"])
def test_the_command_job_checks_out_the_default_branch_and_runs_nothing_after_the_action(load):
    workflow = load()
    triggers = workflow[True] if True in workflow else workflow["on"]  # YAML 1.1 reads "on" as true
    assert triggers["issue_comment"] == {"types": ["created"]}
    assert workflow["permissions"] == {}
    command_job = workflow["jobs"]["command"]
    assert command_job["if"].startswith("github.event.issue.pull_request")
    # contents: write for /skillopt train (stores the trained skill) and /skillopt apply (pushes it)
    assert command_job["permissions"] == {"contents": "write", "pull-requests": "write", "checks": "write"}
    checkout, action = command_job["steps"]  # nothing after the Action: the workspace holds the PR's code
    assert checkout["uses"].startswith("actions/checkout@") and "ref" not in checkout.get("with", {})
    assert checkout["with"].get("persist-credentials", True) is True  # apply's push uses the checkout's token
    assert action["uses"] in ("./", "OWNER/skillopt-ci@v0")
    assert "github.event" not in json.dumps(action)  # event data reaches the Action only as a file
    assert workflow["jobs"]["skillopt"]["if"] == "github.event_name != 'issue_comment'"


def test_train_command_runs_the_training_flow_and_answers_in_the_sticky_comment(skill_pr, server):
    # The example project has no optimizer model: training cannot start, and the comment says why.
    res = skill_pr.comment("/skillopt train ticket-triage")
    assert res.code == 2, res.err + res.out
    assert skill_pr.checked_out() == skill_pr.head_sha and server.call_count == 0
    [sticky] = skill_pr.sticky()
    assert sticky["body"].splitlines()[1] == "## skillopt-ci train: 💥 could not run"
    assert "training needs an optimizer model" in sticky["body"]


def test_an_eval_that_cannot_run_does_not_leave_the_comment_at_evaluating(tmp_path, fake, server):
    fake.set_permission("alice", "write")
    pr = CommentedPR(tmp_path, fake, server, {SKILL: better_skill(), f"{SUITE}/val.jsonl": ""})
    res = pr.comment("/skillopt eval")
    assert res.code == 2, res.err + res.out
    [sticky] = pr.sticky()
    assert sticky["body"].splitlines()[1] == "## skillopt-ci eval: 💥 could not run"
    assert "split has no tasks" in sticky["body"]
