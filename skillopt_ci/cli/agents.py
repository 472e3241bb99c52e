"""``install-agents``: install the pinned agent CLIs (Codex, Claude Code) with npm."""

from __future__ import annotations

import os
from pathlib import Path

import click

from skillopt_ci.cli.common import State, load_project_config


@click.command("install-agents")
@click.option("--prefix", type=click.Path(path_type=Path),
              help="npm prefix to install into (default: the user cache, skillopt-ci/agents).")
@click.option("--only", type=click.Choice(["codex", "claude-code"]), help="Install only this environment's CLI.")
@click.option("--if-needed", is_flag=True,
              help="Only the CLIs a configured suite's environment uses; nothing when none does.")
@click.option("--dry-run", is_flag=True,
              help="Say what would be installed and install nothing (in a GitHub Actions step, also set the outputs needed=true|false and versions).")
@click.pass_obj
def install_agents(state: State, prefix: Path | None, only: str | None, if_needed: bool, dry_run: bool) -> None:
    """Install the agent CLIs the codex and claude-code environments run, at the tested versions."""
    from skillopt_ci.engine.agents_install import default_prefix, install, needed_clis, select
    from skillopt_ci.github.runner_files import add_path, write_outputs

    clis = select(only)
    if if_needed:
        clis = needed_clis(load_project_config(state), clis)
    names = ", ".join(f"{c.binary} {c.version}" for c in clis)
    if dry_run:
        versions = "-".join(f"{c.package.rsplit('/', 1)[-1]}@{c.version}" for c in clis)  # the CLI cache key
        write_outputs(_runner_file("GITHUB_OUTPUT"), {"needed": "true" if clis else "false", "versions": versions})
        click.echo(f"would install {names}" if clis else "no configured suite runs an agent CLI: nothing to install")
        return
    if not clis:
        click.echo("no configured suite runs an agent CLI (codex, claude-code): nothing to install")
        return
    done = install(prefix or default_prefix(), clis)
    click.echo(f"{'installed' if done.ran_npm else 'already installed'}: {names} in {done.bin_dir}")
    if add_path(_runner_file("GITHUB_PATH"), done.bin_dir):
        click.echo(f"added {done.bin_dir} to GITHUB_PATH for the next steps of this job")
    else:
        click.echo(f'put them on PATH: export PATH="{done.bin_dir}:$PATH"')


def _runner_file(name: str) -> Path | None:
    """A runner file (GITHUB_OUTPUT, GITHUB_PATH) when running in a GitHub Actions step."""
    value = os.environ.get(name)
    return Path(value) if value and os.environ.get("GITHUB_ACTIONS") == "true" else None
