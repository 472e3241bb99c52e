"""The ``skillopt-ci`` command: parse, call the engine, print, pick the exit code.

One module per command group (project, evaluate, gate, train, view, action); each command parses
its options, calls one engine function, prints, and exits with the code of DESIGN's table. This
module holds the group and :func:`main`, which turns expected errors into one line. Engine modules
are imported inside the commands so that ``skillopt-ci --help`` stays fast.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import click

from skillopt_ci import __version__
from skillopt_ci.cli import action, agents, bench, cache, evaluate, gate, project, train, view
from skillopt_ci.cli.common import State
from skillopt_ci.core.errors import EXIT_INPUT, EXIT_OK, EXIT_RUNTIME, SkilloptError
from skillopt_ci.core.paths import display_path


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="Path to skillopt.yml (default: found in . or above).")
@click.version_option(__version__, prog_name="skillopt-ci")
@click.pass_context
def cli(ctx: click.Context, config_path: Path | None) -> None:
    """Evaluate, gate and train LLM agent skill documents.

    Exit codes: 0 ok, 1 a gate or threshold failed, 2 bad usage or input, 3 runtime failure.
    """
    ctx.obj = State(config_path)


# click lists the commands by name, so the order here does not change --help.
for _command in (project.init, project.validate, project.review, evaluate.eval_cmd, gate.compare, gate.gate, gate.merge,
                 train.train, view.report, view.view, action.action, project.demo, agents.install_agents,
                 bench.bench, cache.cache_key):
    cli.add_command(_command)


def interrupted_message() -> str:
    """What a Ctrl-C kept, from the run directories this process was writing."""
    from skillopt_ci.engine.rundir import count_kept
    from skillopt_ci.engine.runlock import interrupted_runs

    runs = interrupted_runs()
    if not runs:
        return "interrupted: no run directory was written"
    kept = [(run, count_kept(run)) for run in runs]
    where = ", ".join(display_path(run) for run, _ in kept)
    total = sum(n for _, n in kept)
    if total == 0:
        return f"interrupted: no result had finished, nothing was kept ({where})"
    return (f"interrupted: {total} finished result{'s' if total != 1 else ''} kept in {where}; "
            "re-run the same command to resume")


def main(argv: list[str] | None = None) -> None:
    """Entry point: one line for expected errors, a traceback only for bugs. Everything printed
    passes through :class:`~skillopt_ci.core.redact.SafeStream`: no secret, no workflow command."""
    import os

    from skillopt_ci.core.redact import SECRETS, SafeStream
    from skillopt_ci.engine.runlock import set_command

    set_command(["skillopt-ci", *(sys.argv[1:] if argv is None else argv)])
    SECRETS.add_env(os.environ)
    raw_out, raw_err = sys.stdout, sys.stderr
    safe_out, safe_err = SafeStream(raw_out), SafeStream(raw_err)
    sys.stdout, sys.stderr = safe_out, safe_err
    try:
        _run(argv)
    finally:  # what a stream held back (a possible start of a key) is written, redacted, now
        safe_out.release()
        safe_err.release()
        sys.stdout, sys.stderr = raw_out, raw_err


def _run(argv: list[str] | None) -> None:
    try:
        cli.main(args=argv, prog_name="skillopt-ci", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_INPUT)
    except click.Abort as exc:
        # click turns Ctrl-C into Abort; say what the interrupted run kept.
        interrupted = isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt)
        click.echo(interrupted_message() if interrupted else "aborted", err=True)
        sys.exit(EXIT_RUNTIME)
    except SkilloptError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo(interrupted_message(), err=True)
        sys.exit(EXIT_RUNTIME)
    except BrokenPipeError:
        sys.exit(EXIT_OK)
    except Exception as exc:  # a file-system error on a named path is one line; anything else is a bug
        from skillopt_ci.inputs.writable import os_error_message

        known = os_error_message(exc) if isinstance(exc, OSError) else None
        if known is None:
            traceback.print_exc()
            click.echo("error: unexpected failure (a bug in skillopt-ci; please report it with the traceback above)",
                       err=True)
            sys.exit(EXIT_RUNTIME)
        click.echo(f"error: {known[0]}", err=True)
        sys.exit(known[1])
    sys.exit(EXIT_OK)
