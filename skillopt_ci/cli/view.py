"""``report`` and ``view``: look at finished or running runs, as one HTML file or in a browser."""

from __future__ import annotations

from pathlib import Path

import click

from skillopt_ci.cli.common import State, config_path
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.paths import display_path


@click.command()
@click.argument("run_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--html", "html_file", type=click.Path(path_type=Path), required=True,
              help="Where to write the self-contained HTML report.")
def report(run_dir: Path, html_file: Path) -> None:
    """Write one self-contained HTML report (no network requests) for an eval, gate or training run."""
    from skillopt_ci.inputs.writable import check_file
    from skillopt_ci.viewer.report import write_html_report

    check_file(html_file, "--html")
    size = write_html_report(run_dir, html_file)
    click.echo(f"wrote {display_path(html_file)} ({size / 1024:.0f} KiB)")


@click.command()
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False), required=False)
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind (keep 127.0.0.1 unless you mean it).")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="Port (0: any free one).")
@click.pass_obj
def view(state: State, directory: Path | None, host: str, port: int) -> None:
    """Browse the runs under DIRECTORY (default: runs_dir of skillopt.yml, else .skillopt/runs) in a browser;
    runs in progress update themselves. Ctrl-C stops."""
    import threading

    from skillopt_ci.inputs.config import load_config
    from skillopt_ci.viewer.server import ViewerServer

    if directory is None:
        path = config_path(state)
        directory = load_config(path).runs_dir if path else Path(".skillopt/runs")
    if not directory.is_dir():
        raise InputError("no such directory", where=str(directory), hint="run an eval, gate or train first, or pass DIRECTORY")
    try:
        server = ViewerServer(directory, host=host, port=port).start()
    except OSError as exc:
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror}", hint="pass --port 0 for any free port") from None
    click.echo(f"skillopt-ci viewer on {server.url}/ for {display_path(directory)} (Ctrl-C to stop)", err=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        click.echo("stopping the viewer", err=True)
    finally:
        server.stop()
