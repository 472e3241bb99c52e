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
@click.option("--skill", "skills", multiple=True, help="Review only this configured skill (repeatable).")
@click.option("--base", help="A git ref to compare sizes against (e.g. origin/main).")
@click.pass_obj
def review(state: State, skills: tuple[str, ...], base: str | None) -> None:
    """Static review of the configured skills: no model, no key, nothing run. Exit 1 on an error finding."""
    import os

    from skillopt_ci.cli.common import load_project_config
    from skillopt_ci.gate.git import Git
    from skillopt_ci.gate.review import review_skills
    from skillopt_ci.github.runner_files import command
    from skillopt_ci.render.skill_review import finding_line

    config = load_project_config(state)
    unknown = [n for n in skills if config.skill(n) is None]
    if unknown:
        raise InputError(f"no configured skill named {unknown[0]!r}", where=config.file,
                         hint="configured skills: " + (", ".join(e.name for e in config.skills) or "none"))
    git = Git(config.root) if base else None
    reviews = review_skills(config, git, base, skills)
    in_actions = os.environ.get("GITHUB_ACTIONS") == "true"
    for r in reviews:
        click.echo(f"{r.name}: {len(r.findings)} finding(s)")
        for f in r.findings:
            click.echo(f"  {finding_line(f)}")
            if in_actions:  # an annotation on the line in the pull request's diff, with no token at all
                command({"error": "error", "warning": "warning"}.get(f.level, "notice"), f.message, file=f.path,
                        line=f.line, title=f"skillopt-ci review: {f.rule}")
    sys.exit(1 if any(r.errors for r in reviews) else 0)


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
