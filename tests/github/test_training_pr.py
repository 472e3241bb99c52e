"""The nightly training pull request: its body (pure) and how it reaches GitHub (the real PyGithub
against the fake GitHub): one commit on the default branch's head changing only the skill, one PR
updated in place, labels, a check run with the scores, nothing when there is nothing to propose."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from fakes.github import FakeGitHub
from skillopt_ci.core.edits import Edit
from skillopt_ci.github.publisher import Publisher, PublishError
from skillopt_ci.github.retry import RetryPolicy
from skillopt_ci.github.training_pr import (
    TrainingPRIncomplete,
    TrainingPullRequest,
    git_blob_sha,
    propose_training_pr,
)
from skillopt_ci.train.pr_body import BODY_LIMIT, render_training_check, render_training_pr
from skillopt_ci.train.records import AcceptedEdit, SplitComparison, StepPoint, TrainingSummary

SKILL = "skills/ticket-triage/SKILL.md"
BRANCH = "skillopt/train/ticket-triage"
CURRENT = "# Ticket triage\n\nPick a label.\n"
TRAINED = "# Ticket triage\n\nPick exactly one label.\n- Refunds go to `billing`.\n"
MAIN_FILES = {SKILL: CURRENT, "README.md": "readme\n", "eval_suites/ticket-triage/suite.yaml": "name: t\n"}


# ---- building records -----------------------------------------------------------------------
def split(name: str = "val", current: float | None = 0.458, trained: float | None = 0.75,
          verdict: str = "improved", n: int = 24) -> SplitComparison:
    delta = None if current is None or trained is None else trained - current
    ci = None if delta is None else (delta - 0.15, delta + 0.15)
    return SplitComparison(name, current, trained, delta, ci, verdict, n)


def accepted(op: str = "append", text: str = "- Refunds go to `billing`.", *, anchor: str = "",
             rationale: str = "3 refund tickets went to account", step: str = "e0-s1",
             support: int = 2) -> AcceptedEdit:
    return AcceptedEdit(step, Edit(op, text, anchor, rationale, support))


def summary(*edits: AcceptedEdit, test: SplitComparison | None = None, cost: float | None = 0.1234,
            name: str = "ticket-triage", **overrides: Any) -> TrainingSummary:
    values: dict[str, Any] = dict(
        skill={"name": name, "path": SKILL, "hash": "h0"}, suite={"name": name, "path": "s", "hash": "s0"},
        baseline_hash="h0", best_hash="h2", final_hash="h3", best_version=2,
        val=split(), test=test if test is not None else split("test", 0.433, 0.7, n=30),
        final_val=0.7, final_test=0.68,
        accepted_edits=edits or (accepted(), accepted("replace", "Pick exactly one label.", anchor="Pick a label.",
                                                      step="e0-s3", support=1)),
        steps_accepted=2, steps_rejected=5, steps_skipped=1, points=(),
        input_tokens=120_000, output_tokens=23_456, cost_usd=cost, wall_time_s=723.0, improved=True,
    )
    values.update(overrides)
    return TrainingSummary(**values)


def fenced_lines(markdown: str) -> Iterator[tuple[str, bool]]:
    """Each line with whether it lies inside a fenced code block (CommonMark's backtick rule)."""
    fence = ""
    for line in markdown.splitlines():
        stripped = line.strip()
        if fence:
            if stripped.startswith(fence) and not stripped.strip("`"):
                fence = ""
                yield line, False
                continue
            yield line, True
        elif stripped.startswith("```"):
            fence = "`" * (len(stripped) - len(stripped.lstrip("`")))
            yield line, False
        else:
            yield line, False


# ---- the body ---------------------------------------------------------------------------------
def test_title_and_body_read_in_ten_seconds() -> None:
    title, body = render_training_pr(
        summary(), current_text=CURRENT, trained_text=TRAINED,
        run_url="https://github.com/octo/skills/actions/runs/42",
        artifact_hint="download the artifact `skillopt-run` for the full run directory")
    assert title == "skillopt: train ticket-triage (val 0.458 → 0.750)"
    lines = body.splitlines()
    assert lines[0] == "<!-- skillopt-ci:train:ticket-triage -->"
    assert lines[1].startswith("## ") and "0.458 → 0.750" in lines[1] and "0.433 → 0.700" in lines[1]
    assert "| split | current | trained | Δ (95% CI) | verdict |" in lines
    assert "| val (24 tasks) | 0.458 | 0.750 | +0.292 [+0.142, +0.442] | 🟢 improved |" in lines
    assert "| test (30 tasks) | 0.433 | 0.700 | +0.267 [+0.117, +0.417] | 🟢 improved |" in lines
    assert "### 2 accepted edits" in lines
    assert "1. **append** · step e0-s1 · support 2 · from failures" in lines
    assert "2. **replace** · step e0-s3 · support 1 · from failures" in lines
    assert "   why: 3 refund tickets went to account" in lines
    assert "   replacing:" in lines and "   Pick a label." in lines and "   with:" in lines
    diff = body[body.index("<details>"):body.index("</details>")]
    assert f"Diff of {SKILL} (+2 −1 lines)" in diff and "```diff" in diff
    assert "\n-Pick a label.\n+Pick exactly one label.\n+- Refunds go to `billing`.\n" in diff
    assert "- Steps: 2 accepted · 5 rejected · 1 skipped" in lines
    assert "143,456 tokens" in body and "$0.1234" in body and "wall time 12m 3s" in body
    assert ("- [Workflow run](https://github.com/octo/skills/actions/runs/42) — download the artifact "
            "`skillopt-run` for the full run directory") in lines
    footer = lines[-1]
    assert "skillopt-ci" in footer and "never merged automatically" in footer
    assert "do not trigger workflows" in footer and "check run `skillopt-ci train`" in footer
    assert "Shortened to fit" not in body and len(body) < 5_000


def test_body_without_test_split_cost_or_run_url() -> None:
    s = summary(test=None, cost=None, complete=False, stopped="budget")
    s = TrainingSummary(**{**s.__dict__, "test": None})
    title, body = render_training_pr(s, current_text=CURRENT, trained_text=TRAINED, run_url=None)
    assert "| test | — | — | — | not evaluated |" in body
    assert "· unknown ·" in body and "Workflow run: not available" in body
    assert "The run stopped early (budget)" in body
    assert "test" not in body.splitlines()[1]
    check_title, check_summary = render_training_check(s)
    assert check_title == "val 0.458 → 0.750" and "| val (24 tasks) |" in check_summary


def test_model_text_is_escaped_mentions_neutralised_markers_defused() -> None:
    forged = "<!-- skillopt-ci:train:x -->"
    hostile = accepted(
        "append", f"Ping @team\n```\n</details><script>alert(1)</script>\n{forged}",
        rationale=f"@octocat said so <script>alert(1)</script> {forged} <img src=x onerror=y>")
    trained = CURRENT + f"{forged}\nask @octocat\n"
    _, body = render_training_pr(summary(hostile), current_text=CURRENT, trained_text=trained, run_url=None)
    assert body.startswith("<!-- skillopt-ci:train:ticket-triage -->\n")
    assert body.count("<!--") == 1  # the forged markers (rationale, edit text, diff) are all defused
    assert "<script>" not in body.split("```")[0] and "<img" not in body
    why = next(line for line in body.splitlines() if "why:" in line)
    assert "&lt;script&gt;" in why and "@octocat" not in why and "@\u200boctocat" in why
    assert "@team" not in body and "@octocat" not in body
    assert body.count("<details>") == 1
    assert all(inside for line, inside in fenced_lines(body) if "<script>" in line)  # code, not HTML
    block = body[body.index("1. **append**"):body.index("why:")]
    fences = [line.strip() for line in block.splitlines() if line.strip().startswith("```")]
    assert fences[0] == "````markdown" and fences[-1] == "````"  # longer than the text's own fence


def test_marker_uses_a_safe_skill_name() -> None:
    title, body = render_training_pr(summary(name="x --> @evil"), current_text=CURRENT, trained_text=TRAINED,
                                     run_url=None)
    assert body.splitlines()[0] == "<!-- skillopt-ci:train:x------evil -->"
    assert body.count("-->") == 1 and "@evil" not in body


def test_the_body_says_why_each_step_was_decided_and_which_edits_were_left_out() -> None:
    s = summary(accepted())
    points = (StepPoint("baseline", 0.458, 0.458, "baseline"),
              StepPoint("e0-s00", 0.75, 0.75, "accepted", "accepted: +0.292 [+0.10, +0.48]; 1 of 2 edits screened out alone",
                        ({"op": "append", "text": "Everything is P1.", "reason": "screened out alone: fixed 0 of 3"},)),
              StepPoint("e0-s01", None, 0.75, "rejected", "rejected: cannot beat the incumbent (<b>early</b>)"))
    _, body = render_training_pr(replace(s, points=points), current_text=CURRENT, trained_text=TRAINED, run_url=None)
    folded = body.split("<details><summary>Why each step was decided</summary>", 1)[1].split("</details>", 1)[0]
    assert r"- **e0-s00** accepted: +0.292 \[+0.10, +0.48]; 1 of 2 edits screened out alone" in folded
    assert "  - left out `append` Everything is P1.: screened out alone: fixed 0 of 3" in folded
    assert "<b>" not in folded  # the reason is escaped like any text that came from a run
    _, tight = render_training_pr(replace(s, points=points), current_text=CURRENT, trained_text=TRAINED,
                                  run_url=None, limit=len(body) - 120)
    # the folded reasons are the first to go when the body must be cut
    assert "Why each step" not in tight and len(tight) <= len(body) - 120


def test_body_stays_under_githubs_limit_with_a_visible_note() -> None:
    many = tuple(accepted(text="rule " + "x" * 2_000 + "\n" + "`" * 30, rationale="because " * 200,
                          step=f"e{i}-s0") for i in range(120))
    trained = "".join(f"line {i} @someone <!-- marker -->\n" for i in range(20_000))
    title, body = render_training_pr(summary(*many), current_text=CURRENT, trained_text=trained,
                                     run_url="https://example.test/run/1")
    assert len(body) <= BODY_LIMIT
    assert body.startswith("<!-- skillopt-ci:train:ticket-triage -->")
    assert "| val (24 tasks) |" in body and "Shortened to fit GitHub's 65,536-character limit" in body
    assert "more edit(s), not shown" in body and "</details>" in body
    assert body.rstrip().endswith("`skillopt-ci train` on this commit._")
    assert body.count("<!--") == 1
    for size in (2_000, 6_000, 20_000):  # small limits too: never over, never without the table
        _, small = render_training_pr(summary(*many), current_text=CURRENT, trained_text=trained,
                                      run_url=None, limit=size)
        assert len(small) <= size and "| val (24 tasks) |" in small and "Shortened to fit" in small


# ---- the pull request on GitHub ---------------------------------------------------------------
@pytest.fixture
def fake(fake: FakeGitHub) -> FakeGitHub:
    """The shared fake GitHub with the skill's files on main."""
    fake.seed_files("main", MAIN_FILES)
    return fake


@pytest.fixture
def publisher(fake: FakeGitHub) -> Publisher:
    return Publisher(fake.token, fake.api_url, fake.full_name, throttle=False, retry=RetryPolicy(backoff=0))


def propose(publisher: Publisher, text: str = TRAINED, **overrides: Any) -> TrainingPullRequest:
    kwargs: dict[str, Any] = dict(skill_path=SKILL, trained_text=text, title="skillopt: train ticket-triage",
                                  body="<!-- skillopt-ci:train:ticket-triage -->\nfirst", branch=BRANCH,
                                  check_summary="| split | current | trained |", check_title="val 0.458 → 0.750")
    kwargs.update(overrides)
    return propose_training_pr(publisher, **kwargs)


def assert_one_commit_changing_only_the_skill(fake: FakeGitHub, head: str, main: str, text: str) -> None:
    assert fake.commit(head)["parents"] == [main]
    expected = {**fake.files_at(main), SKILL: text}
    assert fake.files_at(head) == expected  # every path: the same as main, except the skill
    for path, content in expected.items():
        assert fake.file_at(head, path) == content


def test_first_run_opens_a_pull_request(fake: FakeGitHub, publisher: Publisher) -> None:
    main = fake.branch_sha("main")
    result = propose(publisher, details_url="https://example.test/run/1")

    head = fake.branch_sha(BRANCH)
    assert result == TrainingPullRequest(1, f"{fake.url}/octo/skills/pull/1", BRANCH, head, created=True,
                                         updated=False)
    assert result.proposed
    assert_one_commit_changing_only_the_skill(fake, head, main, TRAINED)
    assert fake.branch_sha("main") == main and fake.files_at("main") == MAIN_FILES
    assert "only skills/ticket-triage/SKILL.md changes" in fake.commit(head)["message"]

    pr = fake.pulls[1]
    assert (pr["state"], pr["head_ref"], pr["base_ref"], pr["head_sha"]) == ("open", BRANCH, "main", head)
    assert pr["title"] == "skillopt: train ticket-triage" and pr["body"].endswith("first")
    assert fake.labels_on(1) == ["skillopt", "automated"]
    assert fake.labels["skillopt"]["color"] == "5319e7" and fake.labels["skillopt"]["description"]
    runs = fake.check_runs_for(head)
    assert len(runs) == 1
    run = runs[0]
    assert (run["name"], run["status"], run["conclusion"]) == ("skillopt-ci train", "completed", "success")
    assert run["output"]["summary"] == "| split | current | trained |"
    assert run["output"]["title"] == "val 0.458 → 0.750" and run["details_url"] == "https://example.test/run/1"
    # Never merged, never auto-merged: no merge endpoint, no GraphQL, no PUT at all.
    assert not [r for r in fake.requests if "merge" in r.path or "graphql" in r.path or r.method == "PUT"]


def test_second_run_updates_the_same_pull_request(fake: FakeGitHub, publisher: Publisher) -> None:
    main = fake.branch_sha("main")
    first = propose(publisher)
    fake.add_label("skillopt", "000000")  # exists already: left as the maintainer set it
    newer = TRAINED + "- Outages are `incident`.\n"
    second = propose(publisher, newer, title="skillopt: train ticket-triage (again)", body="second",
                     check_summary="second table")

    assert (second.number, second.created, second.updated) == (1, False, True)
    assert list(fake.pulls) == [1]
    head = fake.branch_sha(BRANCH)
    assert second.head_sha == head != first.head_sha
    assert_one_commit_changing_only_the_skill(fake, head, main, newer)  # force-moved, not stacked
    pr = fake.pulls[1]
    assert (pr["title"], pr["body"], pr["head_sha"]) == ("skillopt: train ticket-triage (again)", "second", head)
    assert fake.labels_on(1) == ["skillopt", "automated"]
    assert [r["output"]["summary"] for r in fake.check_runs_for(head)] == ["second table"]


def test_a_moved_default_branch_is_the_new_base(fake: FakeGitHub, publisher: Publisher) -> None:
    propose(publisher)
    moved = fake.seed_files("main", {"README.md": "readme v2\n", "docs/new.md": "new\n"})
    result = propose(publisher, TRAINED + "more\n")
    assert result.updated and fake.branch_sha(BRANCH) == result.head_sha
    assert_one_commit_changing_only_the_skill(fake, result.head_sha, moved, TRAINED + "more\n")
    assert fake.file_at(result.head_sha, "README.md") == "readme v2\n"


def test_the_same_proposal_again_reuses_the_commit(fake: FakeGitHub, publisher: Publisher) -> None:
    first = propose(publisher)
    fake.clear_requests()
    again = propose(publisher, body="refreshed")
    assert again.head_sha == first.head_sha == fake.branch_sha(BRANCH) and again.updated
    written = [(r.method, r.path.removeprefix("/repos/octo/skills")) for r in fake.writes()]
    assert ("POST", "/git/commits") not in written and not [w for w in written if "/git/refs" in w[1]]
    assert ("PATCH", "/pulls/1") in written
    assert fake.pulls[1]["body"] == "refreshed"


def test_nothing_to_propose_writes_nothing(fake: FakeGitHub, publisher: Publisher) -> None:
    fake.clear_requests()
    result = propose(publisher, CURRENT)
    assert result == TrainingPullRequest(None, None, BRANCH, None, created=False, updated=False)
    assert not result.proposed
    assert fake.writes() == [] and fake.pulls == {} and BRANCH not in fake.branches
    assert git_blob_sha(CURRENT.encode()) == fake.requests[-1].response["sha"]


def test_a_skill_that_main_does_not_have_yet_is_added(fake: FakeGitHub, publisher: Publisher) -> None:
    main = fake.branch_sha("main")
    result = propose(publisher, "# New\n", skill_path="skills/new/SKILL.md", branch="skillopt/train/new")
    assert result.created
    assert fake.files_at(result.head_sha) == {**MAIN_FILES, "skills/new/SKILL.md": "# New\n"}
    assert fake.commit(result.head_sha)["parents"] == [main]


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", ".git/config", "skills/../../x", "skills//x",
                                  "skills/x/", "./SKILL.md", ".GIT/hooks/pre-commit", "a/.git./config",
                                  "skills\\x.md", "C:/x.md", "", ".gitmodules", ".github/workflows/ci.yml",
                                  "skills/x\n.md"])
def test_unsafe_skill_paths_are_refused_before_any_write(fake: FakeGitHub, publisher: Publisher,
                                                         path: str) -> None:
    with pytest.raises(ValueError):
        propose(publisher, skill_path=path)
    assert fake.writes() == [] and fake.pulls == {}


@pytest.mark.parametrize("branch", ["main", "refs/heads/x", "a..b", "x y", "-x", "x.lock", ""])
def test_unsafe_branches_and_empty_text_are_refused(fake: FakeGitHub, publisher: Publisher, branch: str) -> None:
    with pytest.raises(ValueError):
        propose(publisher, branch=branch)
    with pytest.raises(ValueError):
        propose(publisher, " \n")
    assert fake.writes() == []


def test_actions_not_allowed_to_open_pull_requests(fake: FakeGitHub, publisher: Publisher) -> None:
    fake.fail_next("POST", r"/pulls$", 403)
    with pytest.raises(PublishError) as info:
        propose(publisher)
    message = str(info.value)
    assert message.startswith("opening the pull request: 403 Resource not accessible by integration")
    assert "allow GitHub Actions to create pull requests in the repository settings" in message
    assert "`contents: write`" in message and "`pull-requests: write`" in message
    assert fake.pulls == {}
    assert propose(publisher).created  # once the setting is fixed, the next run opens it


def test_a_read_only_token_names_contents_write(fake: FakeGitHub, publisher: Publisher) -> None:
    fake.read_only = True
    with pytest.raises(PublishError, match=r"committing skills/ticket-triage/SKILL.md: 403 .*contents: write"):
        propose(publisher)
    assert BRANCH not in fake.branches


def test_failures_after_the_pr_exists_still_return_it(fake: FakeGitHub, publisher: Publisher) -> None:
    fake.fail_next("POST", r"/check-runs$", 403)
    fake.fail_next("POST", r"/labels$", 500, times=None)  # every retry fails too
    with pytest.raises(TrainingPRIncomplete) as info:
        propose(publisher)
    assert info.value.pull_request.number == 1 and info.value.pull_request.created
    message = str(info.value)
    assert message.startswith(f"pull request #1 was opened ({fake.url}/octo/skills/pull/1), but")
    assert "checks: write" in message and "creating labels: GitHub answered 500" in message
    assert info.value.permission == "checks: write"
    assert isinstance(info.value, PublishError)
    assert len([r for r in fake.requests if r.method == "POST" and r.path.endswith("/labels")]) == 3


def test_transient_failures_are_retried(fake: FakeGitHub, publisher: Publisher) -> None:
    fake.fail_next("POST", r"/git/commits$", 0)  # a dropped connection
    fake.fail_next("POST", r"/pulls$", 502)
    fake.fail_next("POST", r"/check-runs$", 403, "You have exceeded a secondary rate limit. Please wait a few "
                   "minutes before you try again.")
    result = propose(publisher)
    assert result.created and list(fake.pulls) == [result.number]
    assert [c["conclusion"] for c in fake.check_runs_for(result.head_sha)] == ["success"]
    assert fake.file_at(BRANCH, SKILL) == TRAINED
    assert [r.status for r in fake.requests if r.status in (0, 403, 502)] == [0, 502, 403]


def test_retry_gives_up_after_its_attempts(fake: FakeGitHub) -> None:
    publisher = Publisher(fake.token, fake.api_url, fake.full_name, throttle=False,
                          retry=RetryPolicy(attempts=2, backoff=0))
    fake.fail_next("POST", r"/pulls$", 503, times=None)
    with pytest.raises(PublishError, match="opening the pull request: GitHub answered 503"):
        propose(publisher)
    assert len([r for r in fake.requests if r.method == "POST" and r.path.endswith("/pulls")]) == 2


def test_backoff_doubles_and_is_capped() -> None:
    policy = RetryPolicy(attempts=5, backoff=2.0, max_wait=5.0)
    assert [policy.wait(n, None) for n in (1, 2, 3)] == [2.0, 4.0, 5.0]
    assert policy.wait(1, 30.0) == 5.0 and policy.wait(1, 3.0) == 3.0
    assert RetryPolicy(backoff=0).wait(3, None) == 0.0


def test_rendered_body_reaches_the_pull_request(fake: FakeGitHub, publisher: Publisher) -> None:
    s = summary()
    title, body = render_training_pr(s, current_text=CURRENT, trained_text=TRAINED, run_url=None)
    check_title, check_summary = render_training_check(s)
    result = propose(publisher, title=title, body=body, check_title=check_title, check_summary=check_summary)
    assert fake.pulls[result.number]["body"] == body and fake.pulls[result.number]["title"] == title
    assert fake.check_runs_for(result.head_sha)[0]["output"]["summary"] == check_summary


def test_body_carries_a_validation_chart_github_renders() -> None:
    points = (StepPoint("baseline", 0.458, 0.458, "baseline"), StepPoint("e0-s00", 0.625, 0.625, "accepted"),
              StepPoint("e0-s01", None, 0.625, "rejected"), StepPoint("e0-s02", None, 0.625, "skipped"))
    s = summary(accepted(), points=points)
    _, body = render_training_pr(s, current_text=CURRENT, trained_text=TRAINED, run_url=None)
    chart = body.split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert chart.startswith("xychart-beta\n")
    assert 'x-axis ["baseline", "e0-s00", "e0-s01", "e0-s02"]' in chart
    assert "line [0.458, 0.625, 0.625, 0.625]" in chart
