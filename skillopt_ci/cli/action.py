"""``action``: the GitHub Action's entry point (its inputs come from the environment)."""

from __future__ import annotations

import sys

import click


@click.command()
def action() -> None:
    """Run as the GitHub Action (reads GITHUB_* and SKILLOPT_* variables; see action.yml)."""
    import os

    from skillopt_ci.github.action import run_action

    sys.exit(run_action(os.environ))
