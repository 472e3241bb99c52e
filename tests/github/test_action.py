"""``skillopt-ci action`` end to end: the real entry point, the real PyGithub against the fake
GitHub, the real OpenAI SDK against the scripted model, a real git repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.action import PR
from helpers.cli import run_cli
from helpers.paths import REPO
from helpers.repo import (
    ACCOUNT_RULE,
    BETTER_RULES,
    BILLING_RULE,
    BUG_RULE,
    PRIORITY_RULES,
    SKILL,
    skill_text,
)
from skillopt_ci.github.publisher import MARKER
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.triage import TriagePolicy


@pytest.fixture
def regressing(tmp_path, fake, server):
    root_text = (REPO / SKILL).read_text()
    return PR(tmp_path, fake, server, {SKILL: root_text.replace(BUG_RULE, "").replace(ACCOUNT_RULE, "").replace(BILLING_RULE, "")})


def test_regressing_pr_fails_and_comments_once(regressing, fake):
    res = regressing.run()
    assert res.code == 1, res.err + res.out
    [comment] = regressing.comments()
    assert comment["body"].startswith(MARKER)
    assert "## skillopt-ci gate: ❌ failed" in comment["body"] and "🔴 regressed" in comment["body"]
    assert "To merge anyway, add the label `skillopt:allow-regression`" in comment["body"]
    assert "[Workflow run](" + fake.url + "/octo/skills/actions/runs/4242)" in comment["body"]
    # The "evaluating…" note came first and was then edited in place.
    comment_writes = [r for r in fake.writes() if "comments" in r.path]
    assert [r.method for r in comment_writes] == ["POST", "PATCH"]
    assert "evaluating" in comment_writes[0].body["body"]
    [check] = fake.check_runs_for(regressing.head_sha)
    assert check["name"] == "skillopt-ci gate" and check["conclusion"] == "failure"
    assert check["output"]["annotations"][0]["path"] == SKILL
    assert check["output"]["annotations"][0]["annotation_level"] == "failure"
    assert "ticket-triage" in regressing.summary and "🔴 regressed" in regressing.summary
    outputs = regressing.outputs()
    assert outputs["verdict"] == "failed" and outputs["comment-url"] == comment["html_url"]
    assert Path(outputs["report-path"]).read_text().startswith("## skillopt-ci gate")
    assert f"::error file={SKILL},line=1,title=skillopt-ci%3A ticket-triage regressed::" in res.out


def test_second_push_edits_the_same_comment(regressing, fake):
    assert regressing.run().code == 1
    [first] = regressing.comments()
    regressing.push({SKILL: skill_text(regressing.root).replace("- Otherwise the category is question.\n",
                                                                 BETTER_RULES + "- Otherwise the category is question.\n")})
    res = regressing.run()
    comments = regressing.comments()
    assert len(comments) == 1 and comments[0]["id"] == first["id"]
    assert comments[0]["body"] != first["body"]
    assert len(fake.check_runs_for(regressing.head_sha)) == 1
    assert res.code == 0


def test_override_label_passes_and_says_so(tmp_path, fake, server):
    text = (REPO / SKILL).read_text()
    pr = PR(tmp_path, fake, server, {SKILL: text.replace(BUG_RULE, "").replace(ACCOUNT_RULE, "").replace(BILLING_RULE, "")},
            labels=("skillopt:allow-regression",))
    res = pr.run()
    assert res.code == 0, res.err
    [comment] = pr.comments()
    body = comment["body"]
    assert "🟡 regression allowed by label" in body
    assert "The label `skillopt:allow-regression` is set" in body
    # The row agrees with the headline: overridden, not "fails the check".
    [row] = [line for line in body.splitlines() if line.startswith("| ticket-triage")]
    assert "🔴 regressed · allowed by label" in row and "fails the check" not in body
    assert "fails the check" not in pr.summary
    assert pr.outputs()["verdict"] == "overridden"
    [check] = fake.check_runs_for(pr.head_sha)
    assert check["conclusion"] == "success"
    assert check["output"]["title"] == "Overridden: regression allowed by the label skillopt:allow-regression"
    assert "fails the check" not in check["output"]["summary"]
    assert [a["annotation_level"] for a in check["output"]["annotations"]] == ["notice"]
    assert "overridden by the label skillopt:allow-regression" in check["output"]["annotations"][0]["message"]
    # No error annotation in the log: a notice that says the regression was allowed.
    assert "::error" not in res.out
    assert f"::notice file={SKILL},line=1,title=skillopt-ci%3A ticket-triage regressed%2C overridden::" in res.out
    assert "allowed by the label skillopt:allow-regression" in res.out
    # The run directory (the HTML report reads gate.json) says overridden too.
    run_dir = Path(pr.outputs()["run-dirs"])
    assert json.loads((run_dir / "gate.json").read_text())["overridden"] is True


def test_label_added_after_the_event_is_read_from_the_api(regressing, fake):
    fake.add_label_to_pull(regressing.number, "skillopt:allow-regression")  # payload still has no label
    assert regressing.run().code == 0


def test_improving_pr_passes(tmp_path, fake, server):
    text = (REPO / SKILL).read_text()
    default = "- The default priority is P3.\n"
    better = text.replace(BUG_RULE, BETTER_RULES).replace(default, PRIORITY_RULES + default)
    pr = PR(tmp_path, fake, server, {SKILL: better})
    res = pr.run()
    assert res.code == 0, res.err
    [comment] = pr.comments()
    assert "✅ passed" in comment["body"] and "🟢 improved" in comment["body"]
    assert fake.check_runs_for(pr.head_sha)[0]["conclusion"] == "success"
    assert pr.outputs()["verdict"] == "passed"


def test_fork_pr_skips_paid_work_and_posts_nothing(tmp_path, fake, server):
    text = (REPO / SKILL).read_text()
    pr = PR(tmp_path, fake, server, {SKILL: text.replace(BUG_RULE, "")}, fork=True)
    fake.read_only = True
    res = pr.run()
    assert res.code == 0, res.err
    assert server.call_count == 0
    assert fake.writes() == [] and pr.comments() == []
    assert "Pull request from a fork" in pr.summary and "without secrets" in pr.summary
    assert "static review ✅" in pr.summary and "no findings" in pr.summary  # the free review, in the summary only
    assert pr.outputs()["verdict"] == "skipped"


def test_pr_touching_no_skill(tmp_path, fake, server):
    pr = PR(tmp_path, fake, server, {"README.md": "docs only\n"})
    res = pr.run()
    assert res.code == 0, res.err
    assert server.call_count == 0 and pr.comments() == []
    assert fake.check_runs_for(pr.head_sha)[0]["conclusion"] == "success"
    assert "no skill changed" in pr.summary
    assert pr.outputs()["verdict"] == "skipped"


def test_no_model_key_is_a_neutral_skip_with_the_static_review(tmp_path, fake, server):
    text = (REPO / SKILL).read_text()
    pr = PR(tmp_path, fake, server, {SKILL: text.replace(BUG_RULE, "")},
            target={"provider": "openai", "model": "gpt-4o-mini"})
    res = pr.run()
    assert res.code == 0, res.err
    assert server.call_count == 0 and [w.path for w in fake.writes()] == ["/repos/octo/skills/issues/7/comments",
                                                                          "/repos/octo/skills/check-runs"]
    assert fake.check_runs_for(pr.head_sha)[0]["conclusion"] == "neutral"  # no measurement: it blocks nothing
    assert "No model key" in pr.summary and "OPENAI_API_KEY" in pr.summary
    [comment] = pr.comments()  # the static review instead of the scores, and how to get them
    assert "static review ✅" in comment["body"] and "OPENAI_API_KEY" in comment["body"]


def test_missing_comment_permission_keeps_scores_in_the_summary(regressing, fake):
    fake.fail_next("POST", r"/issues/\d+/comments", 403, "Resource not accessible by integration")
    fake.fail_next("POST", r"/issues/\d+/comments", 403, "Resource not accessible by integration")
    res = regressing.run()
    assert res.code == 1  # the gate's verdict still decides: the skill regressed
    assert "pull-requests: write" in res.out and "::warning title=skillopt-ci could not update GitHub::" in res.out
    assert "🔴 regressed" in regressing.summary
    assert "could not update GitHub" in regressing.summary and "`permissions: pull-requests: write`" in regressing.summary
    assert fake.check_runs_for(regressing.head_sha)[0]["conclusion"] == "failure"


@pytest.fixture
def improving(tmp_path, fake, server):
    text = (REPO / SKILL).read_text()
    return PR(tmp_path, fake, server, {SKILL: text.replace(BUG_RULE, BETTER_RULES)})


def test_missing_checks_permission_keeps_a_passing_gate_green(improving, fake):
    fake.fail_next("POST", r"/check-runs", 403, "Resource not accessible by integration", times=None)
    res = improving.run()
    assert res.code == 0, res.out
    assert "::warning title=skillopt-ci could not update GitHub::creating the check run: 403" in res.out
    assert "checks: write" in res.out and "::error" not in res.out
    assert "✅ passed" in improving.summary
    assert "## ⚠️ skillopt-ci could not update GitHub" in improving.summary
    assert "add `permissions: checks: write`" in improving.summary
    assert fake.check_runs_for(improving.head_sha) == []
    assert "✅ passed" in improving.comments()[0]["body"]
    assert improving.outputs()["verdict"] == "passed"


def test_one_500_on_the_placeholder_is_retried(improving, fake):
    fake.fail_next("POST", r"/issues/\d+/comments$", 500)
    res = improving.run()
    assert res.code == 0, res.out
    assert "::warning" not in res.out
    [comment] = improving.comments()
    assert "✅ passed" in comment["body"] and "evaluating" not in comment["body"]
    assert [(r.method, r.status) for r in fake.requests if "comments" in r.path and r.method != "GET"] == \
        [("POST", 500), ("POST", 201), ("PATCH", 200)]
    assert fake.check_runs_for(improving.head_sha)[0]["conclusion"] == "success"


def test_a_placeholder_that_fails_every_attempt_is_a_warning_and_the_result_still_posts(improving, fake):
    fake.fail_next("POST", r"/issues/\d+/comments$", 500)
    res = improving.run(SKILLOPT_GITHUB_ATTEMPTS="1")  # retrying off: the one 500 is final
    assert res.code == 0, res.out
    assert "::warning title=skillopt-ci could not update GitHub::commenting on the pull request: GitHub answered 500" \
        in res.out
    [comment] = improving.comments()
    assert "✅ passed" in comment["body"]
    assert fake.check_runs_for(improving.head_sha)[0]["conclusion"] == "success"


def test_dropped_connections_and_secondary_rate_limits_are_retried(improving, fake):
    fake.fail_next("POST", r"/check-runs", 0)  # connection closed without an answer
    fake.fail_next("POST", r"/check-runs", 403, headers={"Retry-After": "0"})
    fake.fail_next("PATCH", r"/issues/comments/\d+$", 502)
    res = improving.run()
    assert res.code == 0, res.out
    assert "::warning" not in res.out
    assert [c["conclusion"] for c in fake.check_runs_for(improving.head_sha)] == ["success"]
    assert "✅ passed" in improving.comments()[0]["body"]


@pytest.mark.parametrize("delete_allowed", [True, False])
def test_a_comment_that_cannot_be_edited_is_replaced_by_the_result(improving, fake, delete_allowed):
    fake.fail_next("PATCH", r"/issues/comments/\d+$", 403, times=None)
    if not delete_allowed:
        fake.fail_next("DELETE", r"/issues/comments/\d+$", 403, times=None)
    res = improving.run()
    assert res.code == 0, res.out
    comments = improving.comments()
    final = comments[-1]
    assert "✅ passed" in final["body"] and final["body"].startswith(MARKER)
    assert improving.outputs()["comment-url"] == final["html_url"]
    if delete_allowed:  # the stuck "evaluating…" placeholder is gone
        assert len(comments) == 1
    else:  # it stays, with the result posted below it
        assert len(comments) == 2 and "evaluating" in comments[0]["body"]
    assert "::warning" not in res.out


def test_retry_settings_are_validated(improving):
    res = improving.run(SKILLOPT_GITHUB_ATTEMPTS="0")
    assert res.code == 2 and "SKILLOPT_GITHUB_ATTEMPTS='0' is not a whole number of at least 1" in res.out + res.err
    res = improving.run(SKILLOPT_GITHUB_BACKOFF="soon")
    assert res.code == 2 and "SKILLOPT_GITHUB_BACKOFF='soon'" in res.out + res.err


def test_rate_limit_and_404_are_explained(regressing, fake):
    fake.fail_next("GET", r"/issues/\d+/comments", 403, headers={"X-RateLimit-Remaining": "0"})
    res = regressing.run()
    assert "rate limit exceeded" in res.out and "re-run the job later" in res.out
    assert "🔴 regressed" in regressing.summary


def test_model_output_is_escaped_in_the_comment(tmp_path, fake, server):
    evil = ("@octocat <script>alert(1)</script> <img src=x onerror=alert(2)> " + MARKER +
            " ``` </details> <!-- x -->")
    # The head's answers to Enterprise tickets (the head skill lacks the bug rule): tasks it then
    # loses, so the comment quotes them as the head's answers.
    server.policy = lambda request: (evil if "Enterprise" in request.last_user and BUG_RULE not in request.system
                                     else TriagePolicy()(request))
    text = (REPO / SKILL).read_text()
    pr = PR(tmp_path, fake, server, {SKILL: text.replace(BUG_RULE, "").replace(ACCOUNT_RULE, "").replace(BILLING_RULE, "")})
    pr.run()
    [comment] = pr.comments()
    body = comment["body"]
    assert body.count(MARKER) == 1 and body.startswith(MARKER)
    # Quoted whole in a fence longer than its own backtick run, the mention and the comment openers
    # broken by a zero-width space: it reads the same, notifies nobody and closes nothing.
    shown = evil.replace("@octocat", "@\u200boctocat").replace("<!--", "<!\u200b--")
    assert body.count(f"Head answer:\n````text\n{shown}\n````\n") == 3
    assert "@octocat" not in body
    outside_code = _outside_code_blocks(body)
    assert "<script>" not in outside_code and "<img" not in outside_code and "@octocat" not in outside_code
    assert "<!--" not in body.replace(MARKER, "")


def _outside_code_blocks(markdown: str) -> str:
    out, fence = [], None
    for line in markdown.splitlines():
        stripped = line.lstrip()
        if fence is None and stripped.startswith("```"):
            fence = stripped[: len(stripped) - len(stripped.lstrip("`"))]
            continue
        if fence is not None and stripped == fence:
            fence = None
            continue
        if fence is None:
            out.append(line)
    return "\n".join(out)


def test_comment_stays_under_githubs_limit():
    from skillopt_ci.core.records import TaskResult, summarize
    from skillopt_ci.gate.report import render_gate
    from skillopt_ci.gate.verdict import GateReport, SkillChange, decide
    from skillopt_ci.inputs.config import GatePolicy

    def side(score: float) -> list[TaskResult]:
        return [TaskResult(f"t{i}", 0, "in " * 400, "@someone " + "y" * 5000, score, score >= 1, expected="z" * 3000)
                for i in range(30)]

    ids = [f"t{i}" for i in range(30)]
    skills = []
    for k in range(40):
        base, head = side(1.0), side(0.0)
        summary = summarize(base, ids, skill={}, suite={}, split="val", model={}, repeats=1, wall_time_s=1)
        skills.append(decide(SkillChange(f"skill-{k}", f"skills/s{k}.md", "suite", "modified", f"skills/s{k}.md"),
                             base, head, ids, GatePolicy(), summary, summary, tuple(ids)))
    report = GateReport("main", "pr", "a" * 40, "b" * 40, "a" * 40, GatePolicy(), skills)
    body = render_gate(report, header=MARKER)
    assert len(body) <= 65_536
    assert body.startswith(MARKER) and body.count("| skill-") == 40  # every skill keeps its row
    assert "Report truncated to fit" in body and "… (truncated)" in body
    assert "@someone" not in body


def test_secrets_never_reach_logs_reports_or_comments(regressing, fake):
    secret = "sk-live-very-secret-123456"
    res = run_cli("action", env=regressing.env(OPENAI_API_KEY=secret), cwd=regressing.root)
    assert res.code == 1
    places = [res.out, res.err, regressing.summary, json.dumps(regressing.comments())]
    places += [p.read_text(errors="replace") for p in regressing.root.joinpath(".skillopt").rglob("*") if p.is_file()
               and p.suffix in (".json", ".md", ".jsonl")]
    assert all(secret not in place for place in places)
    assert all(fake.token not in place for place in places)


def test_schedule_evaluates_every_skill(tmp_path, fake, server):
    pr = PR(tmp_path, fake, server, {"README.md": "x\n"}, gate={"min_score": 0.4})
    res = pr.run(event_name="schedule", event={})
    assert res.code == 0, res.err
    assert "## skillopt-ci eval: ✅ 1 skill(s)" in pr.summary and "ticket-triage" in pr.summary
    assert "no skill" not in pr.summary  # only with the input baseline: none
    assert pr.outputs()["verdict"] == "passed"
    assert fake.writes() == []


def test_baseline_none_shows_what_each_skill_adds_in_the_summary_and_the_comment(tmp_path, fake, server):
    scheduled = PR(tmp_path, fake, server, {"README.md": "x\n"}, gate={"min_score": 0.4})
    res = scheduled.run(event_name="schedule", event={}, SKILLOPT_BASELINE="none")
    assert res.code == 0, res.err
    assert "- ticket-triage: no skill: 0.000 [0.000, 0.000]; the skill adds +" in scheduled.summary
    assert "(paired over 12 tasks)" in scheduled.summary


def test_gate_with_baseline_none_keeps_its_verdict_and_says_what_the_skill_adds(regressing, fake):
    res = regressing.run(SKILLOPT_BASELINE="none")
    assert res.code == 1  # the same verdict as without it
    body = regressing.comments()[-1]["body"]
    assert "no skill" in body and "the skill adds" in body


def test_an_unknown_baseline_input_is_exit_2(regressing):
    res = regressing.run(SKILLOPT_BASELINE="zero")
    assert res.code == 2 and "SKILLOPT_BASELINE (input baseline) is 'zero'" in res.err


def test_workflow_dispatch_below_minimum_fails(tmp_path, fake, server):
    pr = PR(tmp_path, fake, server, {"README.md": "x\n"}, gate={"min_score": 0.9})
    res = pr.run(event_name="workflow_dispatch", event={"inputs": {}})
    assert res.code == 1
    assert "❌" in pr.summary and "below the threshold 0.900" in pr.summary


def test_bad_config_is_an_annotated_input_error(regressing):
    (regressing.root / "skillopt.yml").write_text("models: [\n")
    res = regressing.run()
    assert res.code == 2
    assert "::error file=skillopt.yml,line=2,title=skillopt-ci::" in res.out
    assert "could not run" in regressing.summary


def test_unknown_mode(regressing):
    res = regressing.run(SKILLOPT_MODE="deploy")
    assert res.code == 2 and "SKILLOPT_MODE" in res.err


def test_real_process_entry_point(regressing):
    env = {**os.environ, **regressing.env()}
    proc = subprocess.run([sys.executable, "-m", "skillopt_ci", "action"], env=env, cwd=regressing.root,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert len(regressing.comments()) == 1


def test_deleted_fork_is_treated_as_a_fork(tmp_path, fake, server):
    text = (REPO / SKILL).read_text()
    pr = PR(tmp_path, fake, server, {SKILL: text.replace(BUG_RULE, "")})
    event = pr.event()
    event["pull_request"]["head"]["repo"] = None
    res = pr.run(event=event)
    assert res.code == 0 and server.call_count == 0 and "Pull request from a fork" in pr.summary


def test_provider_down_updates_the_comment_and_exits_3(tmp_path, fake):
    with ScriptedModelServer(TriagePolicy()) as server:
        text = (REPO / SKILL).read_text()
        pr = PR(tmp_path, fake, server, {SKILL: text.replace(BUG_RULE, "")}, target={"max_retries": 0})
    res = pr.run()  # the model server is gone
    assert res.code == 3
    [comment] = pr.comments()
    assert "💥 could not run" in comment["body"] and "aborted after" in comment["body"]
    assert "could not run" in pr.summary
    assert pr.outputs()["verdict"] == "error"


def test_run_directory_with_html_report_is_handed_to_the_upload_step(regressing):
    assert regressing.run().code == 1
    [run_dir] = regressing.outputs()["run-dirs"].splitlines()
    html = (Path(run_dir) / "report.html").read_text()
    assert html.lower().startswith("<!doctype html>") and "Content-Security-Policy" in html
    assert (Path(run_dir) / "gate.json").is_file()
