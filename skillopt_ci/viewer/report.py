"""``skillopt-ci report RUN_DIR --html FILE``: one self-contained HTML file for a run."""

from __future__ import annotations

from pathlib import Path

from skillopt_ci.engine.rundir import write_atomic
from skillopt_ci.viewer.bundle import build_bundle
from skillopt_ci.viewer.html import render_report


def write_html_report(run_dir: Path, html_file: Path) -> int:
    """Write the report atomically; returns its size in bytes."""
    html = render_report(build_bundle(run_dir))
    write_atomic(html_file, html)
    return len(html.encode("utf-8"))
