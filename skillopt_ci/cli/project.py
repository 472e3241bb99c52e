"""``init``, ``validate`` and ``demo``: set a project up, check it, try it offline."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from skillopt_ci.cli import options
from skillopt_ci.cli.common import State, config_path
from skillopt_ci.core.errors import EXIT_INPUT, InputError
from skillopt_ci.core.paths import display_path


@click.command()
@click.argument("directory", type=click.Path(path_type=Path), default=".")
def init(directory: Path) -> None:
    """Scaffold skillopt.yml, an example skill and suite, and a workflow in DIRECTORY."""
    from skillopt_ci.inputs.scaffold import init_project
    from skillopt_ci.inputs.writable import check_dir

    check_dir(directory, "DIRECTORY")
    had_gitignore = (directory / ".gitignore").is_file()
    written = init_project(directory)
    for rel in written:
        updated = rel == ".gitignore" and had_gitignore
        click.echo(f"{'added .skillopt/ to' if updated else 'created'} {directory / rel}")
    click.echo("next: skillopt-ci validate, then skillopt-ci eval ticket-triage (needs OPENAI_API_KEY), or skillopt-ci demo")


@click.command()
@options.strict
@click.pass_obj
def validate(state: State, strict: bool) -> None:
    """Check the config, every suite and every skill; list all problems (and warnings) at once."""
    from skillopt_ci.engine.validate import validate_project

    path = config_path(state)
    if path is None:
        raise InputError("no skillopt.yml in this directory or above", hint="run skillopt-ci init or pass --config")
    config, problems = validate_project(path, display=display_path(path))
    for problem in problems:
        click.echo(f"{'warning' if problem.is_warning else 'error'}: {problem}", err=True)
    errors = [p for p in problems if strict or not p.is_warning]
    if errors:
        click.echo(f"{len(errors)} problem(s) found" + (" (--strict: warnings count)" if strict else ""), err=True)
        sys.exit(EXIT_INPUT)
    n = len(config.skills) if config else 0
    warned = f", with {len(problems)} warning(s)" if problems else ""
    click.echo(f"ok: {path} with {n} skill(s) and their suites are valid{warned}")


@click.command()
@click.option("--out", type=click.Path(path_type=Path), help="Where to keep the run directories (default: a temporary directory).")
@click.option("--benchmark", help="Run a few fixture tasks of one of the method's benchmarks instead (e.g. searchqa).")
@click.option("--skill", type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="With --benchmark: the skill to evaluate (default: a starter skill).")
def demo(out: Path | None, benchmark: str | None, skill: Path | None) -> None:
    """Offline demo: evaluate the bundled example on a simulated model (no key, no network)."""
    from skillopt_ci.inputs.writable import check_dir

    if out is not None:
        check_dir(out, "--out")
    if benchmark is not None:
        from skillopt_ci.demo import run_benchmark_demo

        sys.exit(run_benchmark_demo(benchmark, out, skill, echo=click.echo))
    if skill is not None:
        raise InputError("--skill needs --benchmark", hint="skillopt-ci demo --benchmark NAME --skill SKILL.md")
    from skillopt_ci.demo import run_demo

    run_demo(out, echo=click.echo)
