"""The ``--help`` of the group and of every command is pinned: splitting the CLI into modules
must keep the command order, every option and its help text. Refresh the golden file with
``SKILLOPT_REFRESH_GOLDEN=1 pytest tests/cli/test_cli_help.py`` after an intended change."""

from __future__ import annotations

import os

from helpers.cli import run_cli
from helpers.paths import GOLDEN

HELP_GOLDEN = GOLDEN / "cli_help.txt"
COMMANDS = ["", "action", "bench", "bench import", "bench run", "cache-key", "compare", "demo", "eval", "gate", "init", "install-agents", "merge", "report", "review", "train", "validate", "view"]


def all_help() -> str:
    parts = []
    for command in COMMANDS:
        args = [*command.split(), "--help"]
        result = run_cli(*args, env={"COLUMNS": "80"})
        assert result.code == 0, result.err
        parts.append(f"$ skillopt-ci {' '.join(args)}\n{result.out}")
    return "\n".join(parts)


def test_help_of_every_command_is_unchanged():
    text = all_help()
    if os.environ.get("SKILLOPT_REFRESH_GOLDEN"):
        HELP_GOLDEN.write_text(text)
    assert text == HELP_GOLDEN.read_text()


def test_every_command_is_pinned():
    listed = run_cli("--help", env={"COLUMNS": "80"}).out.split("Commands:\n", 1)[1]
    assert [line.split()[0] for line in listed.splitlines() if line.strip()] == [c for c in COMMANDS[1:] if " " not in c]
