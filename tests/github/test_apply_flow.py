"""``/skillopt apply``'s push against a real ``origin`` whose branch moved after the checks: git
refuses the fast-forward and the reply says the branch moved (github/apply_flow.py)."""

from __future__ import annotations

import subprocess

from helpers.repo import git
from skillopt_ci.gate.git import Git
from skillopt_ci.github.apply_flow import Stored, apply_stored
from skillopt_ci.github.settings import PullRequest


def test_a_branch_that_moves_between_the_checks_and_the_push_is_refused_as_moved(tmp_path):
    origin, work = tmp_path / "origin.git", tmp_path / "work"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    subprocess.run(["git", "clone", "-q", str(origin), str(work)], check=True, capture_output=True)
    commit = ["-c", "user.name=dev", "-c", "user.email=dev@example.com", "commit", "-q", "--allow-empty", "-m"]
    git(work, *commit, "head")
    head = git(work, "rev-parse", "HEAD")
    git(work, "push", "-q", "origin", "HEAD:refs/heads/feature")
    git(work, *commit, "trained")
    trained = git(work, "rev-parse", "HEAD")
    git(work, "reset", "-q", "--hard", head)
    git(work, *commit, "the author pushes meanwhile")
    git(work, "push", "-q", "origin", "HEAD:refs/heads/feature")
    moved = git(work, "rev-parse", "HEAD")
    pr = PullRequest(number=7, head_sha=head, base_sha=head, head_ref="feature", base_ref="main",
                     labels=(), fork=False, head_repo="octo/skills")
    why = apply_stored(Git(work), Stored(trained, head, {}, "4242"), pr)
    assert why == "the branch `feature` moved while applying; comment `/skillopt train` again. Nothing was changed."
    assert subprocess.run(["git", "rev-parse", "feature"], cwd=origin, capture_output=True, text=True,
                          check=True).stdout.strip() == moved


def test_a_refused_push_says_what_the_remote_said(tmp_path):
    origin, work = tmp_path / "origin.git", tmp_path / "work"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    hook = origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'Permission to octo/skills.git denied to github-actions[bot].' >&2\nexit 1\n")
    hook.chmod(0o755)
    subprocess.run(["git", "clone", "-q", str(origin), str(work)], check=True, capture_output=True)
    git(work, "-c", "user.name=dev", "-c", "user.email=dev@example.com", "commit", "-q", "--allow-empty", "-m", "x")
    said = Git(work).push("origin", "HEAD:refs/heads/feature")
    assert said == ("remote: Permission to octo/skills.git denied to github-actions[bot].; "
                    "[remote rejected] (pre-receive hook declined)")
