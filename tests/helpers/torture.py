"""What every torture case asserts besides its exit code: no traceback, no secret anywhere the
tool wrote or printed, and the first error line a user reads."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

# Values that must never leave the process. They are set in the environment of every case.
OPENAI_KEY = "sk-test-SECRET-0penai-7f3a9c2e"
ANTHROPIC_KEY = "sk-test-SECRET-anthr0pic-41d8b6"
GITHUB_TOKEN = "ghs_TORTURE0token0value0000000000001"
SECRETS = (OPENAI_KEY, ANTHROPIC_KEY, GITHUB_TOKEN)
SECRET_ENV = {"OPENAI_API_KEY": OPENAI_KEY, "ANTHROPIC_API_KEY": ANTHROPIC_KEY, "GITHUB_TOKEN": GITHUB_TOKEN}


def first_error_line(err: str) -> str:
    """The first line of stderr that reports an error (ours say ``error:``, click's ``Error:``) or
    a run that could not be completed (``incomplete:``, ``inconclusive:``)."""
    for line in err.splitlines():
        if line.lower().startswith(("error", "incomplete", "inconclusive")):
            return line
    return ""


def assert_no_traceback(out: str, err: str) -> None:
    assert "Traceback (most recent call last)" not in out + err, err
    assert "a bug in skillopt-ci" not in err, err


def files_holding_secrets(root: Path) -> list[str]:
    """Every file under ``root`` (bytes, so SQLite and binary files count) holding a secret."""
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            found += [f"{path.relative_to(root)} holds {s[:14]}…" for s in SECRETS if s.encode() in data]
    return found


def assert_no_secret(root: Path, *texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text, f"a secret was printed: {text[:2000]}"
    found = files_holding_secrets(root)
    assert not found, f"secrets written to files: {found}"


def result_keys(run: Path) -> tuple[Counter, Counter]:
    """(every task × repeat in results.jsonl, the successful ones), each with its count."""
    every, ok = Counter(), Counter()
    file = run / "results.jsonl"
    if not file.exists():
        return every, ok
    for line in file.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        key = (record["task_id"], record["repeat"])
        every[key] += 1
        if not record.get("error"):
            ok[key] += 1
    return every, ok
