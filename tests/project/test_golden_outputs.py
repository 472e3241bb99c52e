"""Golden files for what a reviewer reads: the gate's sticky comment, the job summary and the check
run's text on a regressing pull request, and the nightly training pull request's body. Each is
produced through the real Action entry point (real PyGithub against the fake GitHub, the real
OpenAI SDK against the scripted model, a real git repository) and compared byte for byte with
``tests/golden/<name>``, after the parts that differ from run to run (commit ids, temporary
paths, timings) are replaced by placeholders.

Refresh them, after a change that means to alter what a reviewer reads, with one command::

    SKILLOPT_REFRESH_GOLDEN=1 pytest tests/project/test_golden_outputs.py tests/cli/test_cli_help.py

and read the diff before committing it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from helpers.action import PR, nightly, run_train, training_pulls
from helpers.paths import GOLDEN, REPO
from helpers.repo import ACCOUNT_RULE, BILLING_RULE, BUG_RULE, SKILL
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.sim_models import SimulatedModels
from skillopt_ci.sim.triage import TriagePolicy

UPDATE = os.environ.get("SKILLOPT_REFRESH_GOLDEN") == "1"
VOLATILE = [
    (re.compile(r"\b[0-9a-f]{40}\b"), "<sha>"),
    (re.compile(r"(/[^\s/`'\")\]]+)*/(pytest-of-[^/\s]+|tmp[^/\s]*)/[^\s`'\")\]]*"), "<tmp>"),
    (re.compile(r"\b\d+(\.\d+)? ?(s|ms|min)\b(?! \w)"), "<duration>"),
    (re.compile(r"http://127\.0\.0\.1:\d+"), "http://127.0.0.1:<port>"),
]


def stable(text: str, *known: tuple[str, str]) -> str:
    for value, name in known:
        text = text.replace(value, name)
        if len(value) == 40:
            text = re.sub(rf"\b{value[:7]}[0-9a-f]{{0,33}}\b", f"{name[:-1]}:short>", text)
    for pattern, name in VOLATILE:
        text = pattern.sub(name, text)
    return text


def check(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.is_file(), f"no golden file {path.name}: run SKILLOPT_REFRESH_GOLDEN=1 pytest {Path(__file__).name}"
    expected = path.read_text(encoding="utf-8")
    assert text == expected, f"{name} differs from tests/golden/{name} (refresh: SKILLOPT_REFRESH_GOLDEN=1)"


def test_the_gate_comment_summary_and_check_run_of_a_regression(tmp_path, fake):
    root_text = (REPO / SKILL).read_text()
    with ScriptedModelServer(TriagePolicy()) as server:
        pr = PR(tmp_path, fake, server, {SKILL: root_text.replace(BUG_RULE, "").replace(ACCOUNT_RULE, "")
                                         .replace(BILLING_RULE, "")})
        res = pr.run()
    assert res.code == 1, res.err + res.out
    known = ((pr.head_sha, "<head>"), (pr.base_sha, "<base>"))
    [comment] = pr.comments()
    [run] = fake.check_runs_for(pr.head_sha)
    check("gate_comment.md", stable(comment["body"], *known))
    check("gate_summary.md", stable(pr.summary, *known))
    check("gate_check_run.md", stable(f"# {run['output']['title']}\n\n{run['output']['summary']}", *known))


def test_the_training_pull_request_body(tmp_path, fake):
    with ScriptedModelServer(SimulatedModels()) as server:
        pr = nightly(tmp_path, fake, server)
        res = run_train(pr)
    assert res.code == 0, res.err + res.out
    [opened] = training_pulls(fake)
    known = ((fake.branch_sha("main"), "<base>"), (fake.branch_sha("skillopt/train/ticket-triage"), "<head>"))
    check("training_pr_body.md", stable(opened["body"], *known))
    check("training_summary.md", stable(pr.summary, *known))


def test_the_review_of_a_trained_pull_request_and_the_gate_after_apply(tmp_path, fake):
    from helpers.review_pr import ReviewPR, add_enterprise_rule

    fake.set_permission("alice", "write")
    with ScriptedModelServer(SimulatedModels()) as server:
        pr = ReviewPR(tmp_path, fake, server, add_enterprise_rule)
        trained = pr.comment("/skillopt train")
        stored = pr.origin_sha("skillopt/suggest/pr-7")
        applied = pr.comment("/skillopt apply")
    assert trained.code == 0 and applied.code == 0, trained.err + applied.err
    known = ((pr.head_sha, "<head>"), (pr.base_sha, "<base>"), (stored, "<trained>"))
    [review] = fake.reviews_on(7)
    [train_comment, gate_comment] = pr.sticky()
    check("review_body.md", stable(review["body"], *known))
    check("review_comment.md", stable(review["comments"][0]["body"], *known))
    check("train_on_pr_comment.md", stable(train_comment["body"], *known))
    check("gate_after_apply.md", stable(gate_comment["body"], *known))


def test_the_static_review_of_a_forks_pull_request(tmp_path, fake):
    from helpers.review_pr import seeded_skill

    with ScriptedModelServer(TriagePolicy()) as server:
        pr = PR(tmp_path, fake, server, {SKILL: seeded_skill()}, fork=True)
        res = pr.run(event_name="pull_request_target")
    assert res.code == 0 and server.call_count == 0, res.err
    [comment] = pr.comments()
    check("static_review_comment.md", stable(comment["body"], (pr.head_sha, "<head>"), (pr.base_sha, "<base>")))


def test_the_review_example_in_the_docs_is_what_the_action_posts():
    """docs/review.md shows the golden texts above, so the example cannot drift from the product."""
    doc = (REPO / "docs/review.md").read_text()
    for name in ("static_review_comment.md", "review_body.md", "review_comment.md", "train_on_pr_comment.md"):
        shown = (GOLDEN / name).read_text().rstrip("\n")
        assert shown in doc, f"docs/review.md no longer shows tests/golden/{name}: paste it again"
