"""The default branch's last score beside each skill's score: written by the scheduled eval,
restored for ``/skillopt eval``, recomputed when missing; and action.yml's cache steps."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from helpers.action import CommentedPR, better_skill
from helpers.cli import run_cli
from helpers.paths import REPO
from helpers.repo import SKILL
from skillopt_ci.github.trend import SCORES_FILE, LastScore, read_scores, write_scores

ACTION = yaml.safe_load((REPO / "action.yml").read_text())


@pytest.fixture
def pr(tmp_path, fake, server):  # noqa: F811
    fake.set_permission("alice", "write")
    return CommentedPR(tmp_path, fake, server, {SKILL: better_skill()})


def scheduled(pr: CommentedPR, scores, event_name="schedule", event=None, ref="refs/heads/main"):
    env = pr.env(event or {}, event_name=event_name, SKILLOPT_SCORES_DIR=str(scores), GITHUB_REF=ref)
    return run_cli("action", env=env, cwd=pr.root)


def test_last_score_reads_like_the_comment():
    score = LastScore(0.712, 0.65, 0.77, 36, "abc1234def5678", "2026-11-30")
    assert score.line() == "0.712 [0.65, 0.77] (abc1234, 2026-11-30)"
    assert LastScore(0.5, None, None, 0, "", "2026-11-30", recomputed=True).line() == (
        "0.500 (2026-11-30), recomputed: no stored score")


def test_scores_merge_and_bad_files_are_ignored_with_a_warning(tmp_path):
    write_scores(tmp_path, {"a": LastScore(0.1, 0.0, 0.2, 3, "aa", "2026-11-01")})
    write_scores(tmp_path, {"b": LastScore(0.9, 0.8, 1.0, 3, "bb", "2026-11-02")})
    scores, warning = read_scores(tmp_path)
    assert sorted(scores) == ["a", "b"] and warning is None
    (tmp_path / SCORES_FILE).write_text("{not json")
    assert read_scores(tmp_path)[0] == {} and "cannot be read" in read_scores(tmp_path)[1]
    (tmp_path / SCORES_FILE).write_text(json.dumps({"version": 1, "skills": {"a": {
        "mean": 0.5, "low": 0.4, "high": 0.6, "n": 3, "commit": "<img src=x>", "date": "2026-11-01"}}}))
    scores, warning = read_scores(tmp_path)
    assert scores == {} and "the entry of a is not a score" in warning


def test_the_scheduled_eval_stores_the_scores_and_shows_the_previous_ones(pr, tmp_path):
    scores = tmp_path / "scores"
    res = scheduled(pr, scores)
    assert res.code == 0, res.err + res.out
    stored = json.loads((scores / SCORES_FILE).read_text())["skills"]["ticket-triage"]
    assert stored["commit"] == pr.base_sha and re.fullmatch(r"\d{4}-\d{2}-\d{2}", stored["date"])
    assert stored["n"] == 12 and stored["low"] <= stored["mean"] <= stored["high"] and stored["split"] == "val"
    assert "scores-saved<<" in (tmp_path / "output").read_text()
    assert "| ticket-triage |" in pr.summary and "no earlier score" in pr.summary
    # The next night shows the stored score beside its own.
    res = scheduled(pr, scores)
    assert res.code == 0
    shown = f"{stored['mean']:.3f} [{stored['low']:.2f}, {stored['high']:.2f}] ({pr.base_sha[:7]}, {stored['date']})"
    [row] = [line for line in pr.summary.splitlines() if line.startswith("| ticket-triage | ") and "(n=" in line]
    assert row.endswith(f"| {shown} |")


def test_a_manual_eval_on_another_branch_stores_nothing(pr, tmp_path):
    scores = tmp_path / "scores"
    event = {"ref": "refs/heads/feature", "repository": {"default_branch": "main"}}
    assert scheduled(pr, scores, "workflow_dispatch", event, ref="refs/heads/feature").code == 0
    assert not (scores / SCORES_FILE).exists() and "scores-saved" not in (tmp_path / "output").read_text()
    assert scheduled(pr, scores, "workflow_dispatch", event, ref="refs/heads/main").code == 0
    assert (scores / SCORES_FILE).exists()


def test_a_pr_eval_shows_the_stored_default_branch_score(pr, tmp_path, server):
    scores = tmp_path / "scores"
    write_scores(scores, {"ticket-triage": LastScore(0.712, 0.65, 0.77, 36, "abc1234" + "0" * 33, "2026-11-30")})
    res = pr.comment("/skillopt eval", SKILLOPT_SCORES_DIR=str(scores))
    assert res.code == 0, res.err + res.out
    [sticky] = pr.sticky()
    [row] = [line for line in sticky["body"].splitlines() if line.startswith("| ticket-triage")]
    assert row.endswith("| 0.712 [0.65, 0.77] (abc1234, 2026-11-30) |")
    assert not list((pr.root / ".skillopt/runs").glob("default-branch-*"))  # nothing recomputed
    assert json.loads((scores / SCORES_FILE).read_text())["skills"]["ticket-triage"]["mean"] == 0.712  # untouched


def test_a_missing_score_is_recomputed_from_the_default_branch(pr, tmp_path):
    """The recomputed number is the default branch's skill on this suite: the same number the
    scheduled eval stores for the default branch."""
    nightly = tmp_path / "nightly"
    assert scheduled(pr, nightly).code == 0
    stored = json.loads((nightly / SCORES_FILE).read_text())["skills"]["ticket-triage"]
    res = pr.comment("/skillopt eval", SKILLOPT_SCORES_DIR=str(tmp_path / "empty"))
    assert res.code == 0, res.err + res.out
    [sticky] = pr.sticky()
    [row] = [line for line in sticky["body"].splitlines() if line.startswith("| ticket-triage")]
    assert f"| {stored['mean']:.3f} [{stored['low']:.2f}, {stored['high']:.2f}] ({pr.base_sha[:7]}, " in row
    assert row.endswith(", recomputed: no stored score |")
    assert list((pr.root / ".skillopt/runs").glob("default-branch-ticket-triage-*"))
    assert not (tmp_path / "empty" / SCORES_FILE).exists()  # a PR never writes the default branch's scores


def step(name: str) -> dict:
    return next(s for s in ACTION["runs"]["steps"] if s.get("name") == name)


def test_action_yml_restores_the_newest_scores_and_saves_only_after_a_scheduled_eval():
    names = [s.get("name") for s in ACTION["runs"]["steps"]]
    restore, save = step("Restore the default branch's last scores"), step("Save the default branch's scores")
    run = next(s for s in ACTION["runs"]["steps"] if s.get("id") == "run")
    assert names.index(restore["name"]) < names.index(run["name"]) < names.index(save["name"])
    assert restore["uses"].startswith("actions/cache/restore@") and save["uses"].startswith("actions/cache/save@")
    folder = run["env"]["SKILLOPT_SCORES_DIR"]
    assert restore["with"]["path"] == save["with"]["path"] == folder
    key = restore["with"]["key"]
    assert key == save["with"]["key"] and "${{ github.run_id }}" in key  # a new entry per run
    assert key.startswith(restore["with"]["restore-keys"])  # the prefix restores the newest
    assert "steps.run.outputs.scores-saved == 'true'" in save["if"]
