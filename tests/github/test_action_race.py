"""Two pushes, two runs, the older one finishing last: the sticky comment shows the newest push.

Both runs go through the real entry point (``run_action``) against the fake GitHub and the
scripted model. The interleaving is made, not hoped for: the older push's run is held inside its
first head-side model call (the scripted policy waits on an event) until the newer push's run has
finished, and the test checks that it was held there before going on.
"""

from __future__ import annotations

import io
import json
import subprocess
import threading

import pytest

from helpers.action import PR
from helpers.paths import REPO
from helpers.repo import ACCOUNT_RULE, BETTER_RULES, BILLING_RULE, BUG_RULE, SKILL, git
from skillopt_ci.github.action import run_action
from skillopt_ci.github.publisher import marker, read_marker
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.triage import TriagePolicy

HELD = 120  # seconds: only a bound on a broken test; the release is an event, never a sleep


class HoldingPolicy:
    """The triage model, except that calls whose skill says ``word`` wait until :attr:`release`."""

    def __init__(self, word: str):
        self.word = word
        self.inner = TriagePolicy()
        self.holding = threading.Event()
        self.release = threading.Event()

    def __call__(self, request):  # type: ignore[no-untyped-def]
        if self.word in request.system and not self.release.is_set():
            self.holding.set()
            self.release.wait(HELD)
        return self.inner(request)


def original() -> str:
    return (REPO / SKILL).read_text()


def workspace(pr: PR, name: str, sha: str) -> dict[str, str]:
    """A checkout of ``sha`` of its own (each run has its own runner) and the env of its run."""
    root = pr.tmp / name
    subprocess.run(["git", "clone", "-q", str(pr.root), str(root)], check=True)
    git(root, "checkout", "-q", "--detach", sha)
    files = pr.tmp / f"{name}-files"
    files.mkdir()
    event = pr.event()
    event["pull_request"]["head"]["sha"] = sha
    (files / "event.json").write_text(json.dumps(event))
    for part in ("output", "summary"):
        (files / part).touch()
    return {**pr.env(), "GITHUB_WORKSPACE": str(root), "GITHUB_EVENT_PATH": str(files / "event.json"),
            "GITHUB_OUTPUT": str(files / "output"), "GITHUB_STEP_SUMMARY": str(files / "summary")}


def test_the_older_push_finishing_last_never_overwrites_the_newest_verdict(tmp_path, fake):
    policy = HoldingPolicy("hacked")  # only the older push's skill has BETTER_RULES
    with ScriptedModelServer(policy) as server:
        pr = PR(tmp_path, fake, server, {SKILL: original().replace(BUG_RULE, BETTER_RULES)})
        older = pr.head_sha
        env_older = workspace(pr, "older", older)
        out_older = io.StringIO()
        codes: dict[str, int] = {}
        thread = threading.Thread(target=lambda: codes.setdefault("older", run_action(env_older, out=out_older)))
        thread.start()
        try:
            assert policy.holding.wait(HELD), out_older.getvalue()  # the premise: held mid-evaluation
            [evaluating] = pr.comments()
            assert "evaluating" in evaluating["body"] and read_marker(evaluating["body"]) == ("gate", older)

            pr.push({SKILL: original().replace(BUG_RULE, "").replace(ACCOUNT_RULE, "").replace(BILLING_RULE, "")})
            newer = pr.head_sha
            assert fake.pulls[pr.number]["head_sha"] == newer
            out_newer = io.StringIO()
            assert run_action(workspace(pr, "newer", newer), out=out_newer) == 1, out_newer.getvalue()
        finally:
            policy.release.set()
            thread.join(HELD)
        assert not thread.is_alive()
    assert codes["older"] == 0, out_older.getvalue()  # the older push passed, on its own commit
    [comment] = pr.comments()  # one sticky comment, showing the newest push's verdict
    assert comment["body"].startswith(marker("gate", newer))
    assert "## skillopt-ci gate: ❌ failed" in comment["body"] and "✅ passed" not in comment["body"]
    # The older run says why it left the comment alone; its check run is on its own commit.
    assert f"the pull request's head is now {newer[:7]}" in out_older.getvalue()
    assert f"the pull request's head is now {newer[:7]}" in (tmp_path / "older-files/summary").read_text()
    assert [c["conclusion"] for c in fake.check_runs_for(older)] == ["success"]
    assert [c["conclusion"] for c in fake.check_runs_for(newer)] == ["failure"]


def test_an_older_push_whose_run_is_alone_updates_its_own_comment_marked_outdated(tmp_path, fake, server):
    """The newer push's run has not written yet: the older run's "evaluating…" must not stay."""
    pr = PR(tmp_path, fake, server, {SKILL: original().replace(BUG_RULE, BETTER_RULES)})
    older = pr.head_sha
    env_older = workspace(pr, "older", older)
    body = f"{marker('gate', older)}\n## skillopt-ci gate: ⏳ evaluating…\n"
    fake.add_comment(pr.number, body)
    pr.push({".gitignore": ".skillopt/\n# a newer push\n"})
    assert run_action(env_older, out=io.StringIO()) == 0
    [comment] = pr.comments()
    assert comment["body"].startswith(marker("gate", older)) and "✅ passed" in comment["body"]
    assert f"⚠️ Outdated: this is the result for `{older[:7]}`" in comment["body"]


def test_duplicate_sticky_comments_collapse_into_one(improving_pr, fake):
    """Two runs that both created a comment (neither saw the other's): the next write keeps one."""
    pr = improving_pr
    for _ in range(2):
        fake.add_comment(pr.number, f"{marker('gate', pr.head_sha)}\n## skillopt-ci gate: ⏳ evaluating…\n")
    assert pr.run().code == 0
    [comment] = pr.comments()
    assert "✅ passed" in comment["body"]


@pytest.fixture
def improving_pr(tmp_path, fake, server):
    return PR(tmp_path, fake, server, {SKILL: original().replace(BUG_RULE, BETTER_RULES)})


def test_markers_cannot_be_forged_and_kinds_stay_apart():
    assert read_marker(marker("eval", "a" * 40)) == ("eval", "a" * 40)
    assert read_marker("<!-- skillopt-ci:gate -->\n## old") == ("gate", None)
    assert read_marker("text <!-- skillopt-ci:gate -->") is None  # only at the very start
    with pytest.raises(ValueError):
        marker("gate", "HEAD --> <!-- x")
    with pytest.raises(ValueError):
        marker("other", "a" * 40)


def test_an_eval_command_gets_its_own_comment_and_leaves_a_failing_gate_alone(tmp_path, fake, server):
    from helpers.action import CommentedPR, better_skill

    fake.set_permission("alice", "write")
    pr = CommentedPR(tmp_path, fake, server, {SKILL: better_skill()})
    gate = fake.add_comment(pr.number, f"{marker('gate', pr.head_sha)}\n## skillopt-ci gate: ❌ failed\n")
    res = pr.comment("/skillopt eval")
    assert res.code == 0, res.err + res.out
    by_kind = {read_marker(c["body"])[0]: c for c in pr.comments()}
    assert set(by_kind) == {"gate", "eval"}
    assert by_kind["gate"]["id"] == gate["id"] and "❌ failed" in by_kind["gate"]["body"]
    assert by_kind["eval"]["body"].startswith(marker("eval", pr.head_sha))
    assert "## skillopt-ci eval: ✅ 1 skill(s)" in by_kind["eval"]["body"]


def test_an_older_push_starting_late_touches_neither_the_newer_comment_nor_posts_evaluating(tmp_path, fake, server):
    pr = PR(tmp_path, fake, server, {SKILL: original().replace(BUG_RULE, BETTER_RULES)})
    older = pr.head_sha
    env_older = workspace(pr, "older", older)
    pr.push({".gitignore": ".skillopt/\n# a newer push\n"})
    newer_body = f"{marker('gate', pr.head_sha)}\n## skillopt-ci gate: ❌ failed\n"
    fake.add_comment(pr.number, newer_body)
    fake.clear_requests()
    out = io.StringIO()
    assert run_action(env_older, out=out) == 0
    [comment] = pr.comments()
    assert comment["body"] == newer_body
    assert not [r for r in fake.writes() if "comments" in r.path]  # no "evaluating…", no result
    assert out.getvalue().count(f"the pull request's head is now {pr.head_sha[:7]}") == 2
