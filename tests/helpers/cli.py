"""``skillopt-ci`` run in this process through the real entry point, its output captured."""

from __future__ import annotations

import io
import os
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from skillopt_ci.cli import main


@dataclass
class CliResult:
    code: int
    out: str
    err: str


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> CliResult:
    """Run ``skillopt-ci`` in this process (through the real entry point) and capture its output."""
    out, err = io.StringIO(), io.StringIO()
    old_cwd = Path.cwd()
    old_env = dict(os.environ)
    try:
        if cwd is not None:
            os.chdir(cwd)
        if env is not None:
            os.environ.update(env)
        with redirect_stdout(out), redirect_stderr(err):
            try:
                main(list(args))
                code = 0
            except SystemExit as exc:
                code = int(exc.code or 0)
    finally:
        os.chdir(old_cwd)
        os.environ.clear()
        os.environ.update(old_env)
    return CliResult(code, out.getvalue(), err.getvalue())
