"""The example project in a real git repository: the skill's rules the tests drop or add, and
branches with edits committed on them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from helpers.project import write_project
from skillopt_ci.inputs.yamlfile import schema_validator

SKILL = "skills/ticket-triage/SKILL.md"


BUG_RULE = '- If the ticket mentions "crash" or "error", the category is bug.\n'


ACCOUNT_RULE = '- If the ticket mentions "password" or "log in", the category is account.\n'


# Dropping the bug, account and billing rules breaks 6 of the 12 validation tasks and fixes none:
# the fewest the gate's exact paired test calls significant (4 of 12 give p = 0.125).
BILLING_RULE = '- If the ticket mentions "invoice", "refund" or "charged", the category is billing.\n'


BETTER_RULES = (
    '- If the ticket mentions "breach", "hacked", "leaked" or "phishing", the category is security.\n'
    '- If the ticket mentions "crash", "error", "broken" or "freezes", the category is bug.\n'
)


PRIORITY_RULES = (
    '- If the ticket mentions "breach", "hacked", "leaked" or "phishing", the priority is P1.\n'
    '- If the ticket mentions "outage", "down for everyone" or "all users", the priority is P1.\n'
    "- Bug tickets have priority P2.\n"
)


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


def commit_base(root: Path) -> Path:
    """``root`` made a git repository whose ``main`` holds everything in it (``.skillopt/`` ignored)."""
    (root / ".gitignore").write_text(".skillopt/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "dev@example.com")
    git(root, "config", "user.name", "Dev")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root


def make_repo(tmp_path: Path, base_url: str, **config) -> Path:
    return commit_base(write_project(tmp_path / "repo", base_url, **config))


def commit_on_branch(root: Path, branch: str, edits: dict[str, str | None], message: str = "change") -> str:
    git(root, "checkout", "-q", "-B", branch, "main")
    for rel, text in edits.items():
        path = root / rel
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


def skill_text(root: Path) -> str:
    return (root / SKILL).read_text()


def gate_json(out: Path) -> dict:
    data = json.loads((out / "gate.json").read_text())
    schema_validator("gate.schema.json").validate(data)
    return data
