"""The Action on a pull request: a real repository mirrored in the fake GitHub (``PR``), the
reviewer-command variant whose ``origin`` serves ``refs/pull/N/head`` (``CommentedPR``), hostile
suite code for the fork tests, and the nightly training run."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fakes.github import FakeGitHub
from helpers.cli import run_cli
from helpers.paths import REPO
from helpers.repo import (
    BETTER_RULES,
    BUG_RULE,
    SKILL,
    commit_on_branch,
    git,
    make_repo,
)
from helpers.training import train_project
from skillopt_ci.github.publisher import read_marker
from skillopt_ci.sim import ScriptedModelServer


def outputs_of(path: Path) -> dict[str, str]:
    """Parse GITHUB_OUTPUT's heredoc blocks (the last value of a name wins)."""
    values: dict[str, str] = {}
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        name, _, delim = lines[i].partition("<<")
        end = lines.index(delim, i + 1)
        values[name] = "\n".join(lines[i + 1:end])
        i = end + 1
    return values


class PR:
    """A pull request in a real local repository, mirrored in the fake GitHub."""

    def __init__(self, tmp_path: Path, fake: FakeGitHub, server: ScriptedModelServer, edits: dict, number: int = 7,
                 labels: tuple[str, ...] = (), fork: bool = False, **config):
        self.tmp = tmp_path
        self.fake = fake
        self.root = make_repo(tmp_path, server.openai_base_url, **config)
        self.base_sha = git(self.root, "rev-parse", "main")
        self.head_sha = commit_on_branch(self.root, "feature", edits)
        self.number = number
        self.labels = list(labels)
        self.fork = fork
        fake.add_pull(number, self.head_sha, self.base_sha, labels=labels, fork=fork)

    def push(self, edits: dict) -> None:
        git(self.root, "checkout", "-q", "feature")
        for rel, text in edits.items():
            (self.root / rel).write_text(text)
        git(self.root, "commit", "-q", "-am", "push")
        self.head_sha = git(self.root, "rev-parse", "HEAD")
        self.fake.set_branch("feature", self.head_sha)

    def event(self) -> dict:
        head_repo = {"full_name": "someone/skills" if self.fork else "octo/skills"}
        return {
            "action": "synchronize",
            "number": self.number,
            "pull_request": {
                "number": self.number,
                "head": {"sha": self.head_sha, "ref": "feature", "repo": head_repo},
                "base": {"sha": self.base_sha, "ref": "main", "repo": {"full_name": "octo/skills"}},
                "labels": [{"name": name} for name in self.labels],
            },
            "repository": {"full_name": "octo/skills"},
        }

    def env(self, event_name: str = "pull_request", event: dict | None = None, **extra: str) -> dict[str, str]:
        event_file = self.tmp / "event.json"
        event_file.write_text(json.dumps(event if event is not None else self.event()))
        for name in ("output", "summary"):
            (self.tmp / name).touch()
        return {
            "GITHUB_EVENT_NAME": event_name,
            "GITHUB_EVENT_PATH": str(event_file),
            "GITHUB_REPOSITORY": self.fake.full_name,
            "GITHUB_API_URL": self.fake.api_url,
            "GITHUB_SERVER_URL": self.fake.url,
            "GITHUB_RUN_ID": "4242",
            "GITHUB_WORKSPACE": str(self.root),
            "GITHUB_OUTPUT": str(self.tmp / "output"),
            "GITHUB_STEP_SUMMARY": str(self.tmp / "summary"),
            "SKILLOPT_TOKEN": self.fake.token,
            "SKILLOPT_GITHUB_BACKOFF": "0",  # retries without waiting
            **extra,
        }

    def run(self, **kw):
        return run_cli("action", env=self.env(**kw), cwd=self.root)

    @property
    def summary(self) -> str:
        return (self.tmp / "summary").read_text()

    def outputs(self) -> dict[str, str]:
        return outputs_of(self.tmp / "output")

    def comments(self) -> list[dict]:
        return self.fake.comments_on(self.number)


SUITE = "eval_suites/ticket-triage"


def better_skill() -> str:
    return (REPO / SKILL).read_text().replace(BUG_RULE, BETTER_RULES)


@dataclass(frozen=True)
class Link:
    """A symbolic link to ``target``, as a file of a commit."""

    target: str


def write_files(root: Path, files: dict[str, str | bytes | Link | None]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.exists():
            path.unlink()
        if isinstance(content, Link):
            path.symlink_to(content.target)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        elif content is not None:
            path.write_text(content)
    git(root, "add", "-A")


class CommentedPR:
    """Pull request #7 in a real repository (``origin`` is a bare repository holding ``main`` and
    ``refs/pull/7/head``, the workspace is checked out at ``main`` as the workflow leaves it), the
    same pull request in the fake GitHub, and the comment events a reviewer sends."""

    def __init__(self, tmp_path: Path, fake: FakeGitHub, server, edits: dict[str, str | bytes | Link], *,
                 fork: bool = False, number: int = 7, before: Callable[[Path], dict] | None = None,
                 main_after: Callable[[Path], dict] | None = None):
        """``edits`` make the head (text, bytes, or a :class:`Link`). ``before(root)`` and
        ``main_after(root)`` return files committed on main before the head branches off and after
        (so the head is based on an older main)."""
        self.tmp, self.fake, self.number = tmp_path, fake, number
        self.root = make_repo(tmp_path, server.openai_base_url)
        if before:
            write_files(self.root, before(self.root))
            git(self.root, "commit", "-q", "-m", "older main")
        git(self.root, "checkout", "-q", "-b", "feature")
        write_files(self.root, edits)
        git(self.root, "commit", "-q", "-m", "change")
        self.head_sha = git(self.root, "rev-parse", "HEAD")
        git(self.root, "checkout", "-q", "main")
        if main_after:
            write_files(self.root, main_after(self.root))
            git(self.root, "commit", "-q", "-m", "main moves on")
        self.base_sha = git(self.root, "rev-parse", "main")
        origin = tmp_path / "origin.git"
        subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
        git(self.root, "remote", "add", "origin", str(origin))
        git(self.root, "push", "-q", "origin", "main", f"feature:refs/pull/{number}/head")
        git(self.root, "checkout", "-q", "main")
        git(self.root, "branch", "-q", "-D", "feature")  # only origin has the head, as on a runner
        fake.add_pull(number, self.head_sha, self.base_sha, fork=fork)
        fake.set_pull_files(number, [{"filename": p, "status": "modified", "additions": 1, "deletions": 1,
                                      "changes": 2} for p in edits])

    def event(self, body: str, login: str = "alice", **comment) -> dict:
        return {
            "action": "created",
            "issue": {"number": self.number, "pull_request": {"url": f"{self.fake.api_url}/pulls/{self.number}"}},
            "comment": {"id": 1, "body": body, "user": {"login": login, "type": "User"}, **comment},
            "repository": {"full_name": "octo/skills", "default_branch": "main"},
        }

    def env(self, event: dict, event_name: str = "issue_comment", **extra: str) -> dict[str, str]:
        event_file = self.tmp / "event.json"
        event_file.write_text(json.dumps(event))
        for name in ("output", "summary"):
            (self.tmp / name).write_text("")
        return {
            "GITHUB_EVENT_NAME": event_name,
            "GITHUB_EVENT_PATH": str(event_file),
            "GITHUB_REPOSITORY": self.fake.full_name,
            "GITHUB_API_URL": self.fake.api_url,
            "GITHUB_SERVER_URL": self.fake.url,
            "GITHUB_RUN_ID": "4242",
            "GITHUB_SHA": self.base_sha,
            "GITHUB_REF": "refs/heads/main",
            "GITHUB_WORKSPACE": str(self.root),
            "GITHUB_OUTPUT": str(self.tmp / "output"),
            "GITHUB_STEP_SUMMARY": str(self.tmp / "summary"),
            "SKILLOPT_TOKEN": self.fake.token,
            "SKILLOPT_GITHUB_BACKOFF": "0",
            **extra,
        }

    def comment(self, body: str, login: str = "alice", **extra: str):
        return self.run(self.event(body, login), **extra)

    def run(self, event: dict, event_name: str = "issue_comment", **extra: str):
        return run_cli("action", env=self.env(event, event_name, **extra), cwd=self.root)

    def comments(self) -> list[dict]:
        return self.fake.comments_on(self.number)

    def sticky(self) -> list[dict]:
        return [c for c in self.comments() if read_marker(c["body"])]  # any kind: gate, eval, train

    def replies(self) -> list[str]:
        return [c["body"] for c in self.comments() if not read_marker(c["body"])]

    def checked_out(self) -> str:
        return git(self.root, "rev-parse", "HEAD")

    @property
    def summary(self) -> str:
        return (self.tmp / "summary").read_text()

    def outputs(self) -> dict[str, str]:
        return outputs_of(self.tmp / "output")

    def verdict(self) -> str:
        lines = (self.tmp / "output").read_text().splitlines()
        i = max(i for i, line in enumerate(lines) if line.startswith("verdict<<"))
        return lines[i + 1]


def hostile(marker: Path, body: str = "return 1.0") -> str:
    """Python that leaves ``marker`` behind when it runs (at import and when called)."""
    return (f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n\n"
            f"def score(output, task):\n    Path({str(marker)!r}).write_text('ran')\n    {body}\n")


def assert_refused(pr: CommentedPR, server, marker: Path, *paths: str) -> str:
    [reply] = pr.replies()
    assert "comes from a fork and changes files that select or are code" in reply, reply
    for path in paths:
        assert f"`{path}`" in reply, reply
    assert "Nothing was run" in reply
    assert server.call_count == 0 and pr.sticky() == []
    assert pr.checked_out() == pr.base_sha  # nothing of the fork on disk
    assert not marker.exists()
    assert pr.verdict() == "refused"
    return reply


def nightly(tmp_path, fake, server) -> PR:
    pr = PR(tmp_path, fake, server, {"README.md": "x\n"})
    train_project(pr.root / "_unused", server.openai_base_url)  # a config with the optimizer role
    (pr.root / "skillopt.yml").write_text((pr.root / "_unused/skillopt.yml").read_text())
    fake.seed_files("main", {SKILL: (pr.root / SKILL).read_text(), "README.md": "hello\n"})
    return pr


def run_train(pr: PR):
    return run_cli("action", env=pr.env(event_name="schedule", event={}, SKILLOPT_MODE="train"), cwd=pr.root)


def training_pulls(fake: FakeGitHub) -> list[dict]:
    return [p for p in fake.pulls.values() if p["head_ref"] == "skillopt/train/ticket-triage"]
