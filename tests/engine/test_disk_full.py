"""File-system failures while writing a run's files, injected at the atomic write's boundary (a
size-limited file system needs privileges, and root writes into any folder): a full disk is exit 3
with "no space left on device: PATH" and the results written so far kept; a folder that refuses
new files is named, never the temporary file the write would have used."""

from __future__ import annotations

import errno
import io
import os

from helpers.cli import run_cli
from skillopt_ci.inputs import writable


class FullDisk(io.TextIOWrapper):
    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def fill_the_disk_for(monkeypatch, name: str) -> None:
    real = os.fdopen

    def fdopen(fd, *args, **kwargs):
        if f".{name}." in os.readlink(f"/proc/self/fd/{fd}"):
            return FullDisk(real(fd, "wb"), encoding="utf-8")
        return real(fd, *args, **kwargs)

    monkeypatch.setattr(writable.os, "fdopen", fdopen)


def test_a_full_disk_while_writing_the_summary_is_exit_3_naming_the_file_and_keeps_the_results(
        project, tmp_path, monkeypatch):
    out = tmp_path / "run"
    fill_the_disk_for(monkeypatch, "summary.json")
    res = run_cli("eval", "ticket-triage", "--out", str(out), "--quiet", cwd=project)
    assert res.code == 3, res.err
    assert f"error: no space left on device: {out / 'summary.json'}" in res.err
    assert "Traceback" not in res.err and "a bug in skillopt-ci" not in res.err
    assert len((out / "results.jsonl").read_text().splitlines()) == 12
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]  # no temporary file left behind


def test_a_report_into_a_folder_that_refuses_new_files_names_the_folder_not_a_temporary_file(
        project, tmp_path, monkeypatch):
    out = tmp_path / "run"
    assert run_cli("eval", "ticket-triage", "--out", str(out), "--quiet", cwd=project).code == 0
    folder = tmp_path / "locked"
    folder.mkdir()
    real = os.open

    def refusing_open(path, flags, *args, **kwargs):
        if str(path).startswith(str(folder)):  # as a folder without write permission answers a non-root user
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(writable.os, "open", refusing_open)
    res = run_cli("report", str(out), "--html", str(folder / "report.html"), cwd=project)
    assert res.code == 2, res.err
    assert res.err.splitlines()[0].startswith(f"error: {folder}: Permission denied"), res.err
    assert ".tmp" not in res.err
