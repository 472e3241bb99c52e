"""A full disk while a run writes its files: exit 3 with "no space left on device: PATH", the
results written so far kept, no traceback. The disk fills at the write boundary: the file object
an atomic write gets for one file raises ENOSPC (a size-limited file system needs privileges)."""

from __future__ import annotations

import errno
import io
import os

from conftest import run_cli
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
