"""A pull request from this repository whose skill a reviewer trains and applies: a real repository
with the optimizer role configured, an ``origin`` that behaves as GitHub does on a push (a bare
repository whose hook moves ``refs/pull/N/head`` with the branch and tells the fake GitHub, so the
API's pull request follows), and the pull request's files with the patch GitHub would show."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import yaml

from fakes.github import FakeGitHub
from helpers.action import CommentedPR
from helpers.paths import REPO
from helpers.repo import BUG_RULE, SKILL, commit_base, git
from helpers.training import train_project

ENTERPRISE = "- Tickets from the Enterprise plan are P2.\n"


def add_enterprise_rule(text: str) -> str:
    """The pull request's change: one priority rule more."""
    return text.replace("- The default priority is P3.\n", "- The default priority is P3.\n" + ENTERPRISE)


def accept(head: str, suggestions) -> str:
    """What GitHub's "Commit suggestion" makes of ``head``, for each suggestion (bottom up)."""
    lines = head.splitlines()
    for s in sorted(suggestions, key=lambda s: -s.first):
        lines[s.first - 1:s.last] = list(s.lines)
    return "\n".join(lines) + "\n"


SEEDED = ("- See `references/escalation.md` for the escalation rules of every category.\n"
          "- Always answer with the category first and the priority second.\n"
          "- Never answer with the category first and the priority second.\n")


def seeded_skill() -> str:
    """The example skill with what the static review finds: a missing file, a contradiction, an
    unclosed fence."""
    return (REPO / SKILL).read_text().replace(BUG_RULE, SEEDED) + "\n```text\nan example never closed\n"


HOOK = """#!{python}
import json, subprocess, sys, urllib.request
for line in sys.stdin:
    old, new, ref = line.split()
    if ref == "refs/heads/{head_ref}" and set(new) != {{"0"}}:
        subprocess.run(["git", "update-ref", "refs/pull/{number}/head", new], check=True)
    request = urllib.request.Request({url!r}, method="POST", data=json.dumps(
        {{"ref": ref, "sha": new, "parent": old}}).encode(), headers={{"Authorization": "token {token}",
        "Content-Type": "application/json"}})
    urllib.request.urlopen(request).read()
"""


class ReviewPR(CommentedPR):
    """Pull request #7 from the branch ``feature`` of this repository, changing the skill with
    ``skill_edit(text) -> text``; ``origin`` holds ``main``, ``feature`` and ``refs/pull/7/head``."""

    def __init__(self, tmp_path: Path, fake: FakeGitHub, server, skill_edit, *, number: int = 7,
                 train: dict | None = None, skill: str = SKILL, suite: str | None = None):
        """``skill`` and ``suite``: the one configured skill (default: the example's ticket-triage)."""
        self.tmp, self.fake, self.number, self.skill = tmp_path, fake, number, skill
        project = train_project(tmp_path / "repo", server.openai_base_url, train=train)
        if suite:
            data = yaml.safe_load((project / "skillopt.yml").read_text())
            data["skills"] = [{"path": skill, "suite": suite}]
            (project / "skillopt.yml").write_text(yaml.safe_dump(data))
        self.root = commit_base(project)
        self.base_sha = git(self.root, "rev-parse", "main")
        git(self.root, "checkout", "-q", "-b", "feature")
        path = self.root / skill
        path.write_text(skill_edit(path.read_text()))
        git(self.root, "commit", "-q", "-am", "change the skill")
        self.head_sha = git(self.root, "rev-parse", "HEAD")
        git(self.root, "checkout", "-q", "main")
        self.origin = tmp_path / "origin.git"
        subprocess.run(["git", "init", "-q", "--bare", str(self.origin)], check=True)
        hook = self.origin / "hooks" / "post-receive"
        hook.write_text(HOOK.format(python=sys.executable, head_ref="feature", number=number,
                                    url=f"{fake.api_url}/repos/{fake.full_name}/_fake/push", token=fake.token))
        hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
        fake.add_pull(number, self.head_sha, self.base_sha)
        git(self.root, "remote", "add", "origin", str(self.origin))
        git(self.root, "push", "-q", "origin", "main", "feature")
        git(self.root, "branch", "-q", "-D", "feature")  # only origin has the head, as on a runner
        self.show_files()

    def show_files(self) -> None:
        """The pull request's files as GitHub lists them, each with its patch (hunks only)."""
        head = self.origin_sha("feature")
        diff = subprocess.run(["git", "diff", "-U3", f"{self.base_sha}...{head}", "--", self.skill],
                              cwd=self.origin, capture_output=True, text=True, check=True).stdout
        patch = diff[diff.index("@@"):] if "@@" in diff else ""
        self.fake.set_pull_files(self.number, [{"filename": self.skill, "status": "modified", "additions": 1,
                                                "deletions": 1, "changes": 2, "patch": patch}])

    def origin_sha(self, ref: str) -> str:
        return subprocess.run(["git", "rev-parse", ref], cwd=self.origin, capture_output=True, text=True,
                              check=True).stdout.strip()

    def origin_file(self, ref: str, path: str | None = None) -> bytes:
        return subprocess.run(["git", "show", f"{ref}:{path or self.skill}"], cwd=self.origin, capture_output=True,
                              check=True).stdout

    def push_to_feature(self, text: str) -> str:
        """Another commit on the pull request's branch (the author pushes again); its SHA."""
        work = self.tmp / "author"
        if not work.exists():
            subprocess.run(["git", "clone", "-q", str(self.origin), str(work)], check=True)
            git(work, "config", "user.email", "dev@example.com")
            git(work, "config", "user.name", "Dev")
        git(work, "fetch", "-q", "origin")
        git(work, "checkout", "-q", "-B", "feature", "origin/feature")
        (work / self.skill).write_text(text)
        git(work, "commit", "-q", "-am", "push again")
        git(work, "push", "-q", "origin", "feature")
        self.head_sha = git(work, "rev-parse", "HEAD")
        self.show_files()
        return self.head_sha


def stored_message(pr: ReviewPR) -> str:
    return subprocess.run(["git", "log", "-1", "--format=%B", "skillopt/suggest/pr-7"], cwd=pr.origin,
                          capture_output=True, text=True, check=True).stdout
