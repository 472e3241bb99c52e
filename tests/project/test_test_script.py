"""``./test.sh``, the README's test command, and ``.ci/run`` calling it: run against stub system
commands on PATH (apt-get, sudo, id, python) so the branches can be checked without installing."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from helpers.paths import REPO

STUB = """#!/bin/sh
echo "{name} $*" >> "$STUB_LOG"
{extra}
exit 0
"""


def _stub(bin_dir: Path, name: str, extra: str = "") -> None:
    path = bin_dir / name
    path.write_text(STUB.format(name=name, extra=extra))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _checkout(tmp_path: Path, *, chromium: bool, uid: int) -> tuple[Path, Path, dict[str, str]]:
    """A copy of test.sh in an empty checkout, and a PATH of stubs plus the few real tools it uses."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    shutil.copy2(REPO / "test.sh", checkout / "test.sh")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("dirname", "mkdir", "mktemp", "rm", "env", "chmod"):
        real = shutil.which(tool)
        assert real, tool
        (bin_dir / tool).symlink_to(real)
    _stub(bin_dir, "apt-get")
    _stub(bin_dir, "bwrap")  # present: only Chromium's absence is under test here
    _stub(bin_dir, "sudo", 'exec "$@"')
    _stub(bin_dir, "id", f"echo {uid}; exit 0")
    # python in the active virtualenv: pip succeeds, lint-imports exits with $LINT_EXIT and mypy
    # with $MYPY_EXIT (0 unless set), pytest reports its TMPDIR and exits 5.
    _stub(bin_dir, "python", 'case "$*" in *importlinter*) exit "${LINT_EXIT:-0}";; '
                             '*mypy*) exit "${MYPY_EXIT:-0}";; '
                             '*pytest*) echo "TMPDIR=$TMPDIR" >> "$STUB_LOG"; exit 5;; esac')
    if chromium:
        _stub(bin_dir, "chromium")
    log = tmp_path / "calls.log"
    (tmp_path / "tmp").mkdir()
    env = {"PATH": str(bin_dir), "STUB_LOG": str(log), "VIRTUAL_ENV": str(tmp_path / "venv"), "HOME": str(tmp_path),
           "TMPDIR": str(tmp_path / "tmp"), "SKILLOPT_SKIP_REALMODEL": "1"}
    return checkout, log, env


LINT_IMPORTS = ("python -c import sys; from importlinter.cli import lint_imports_command; "
                "sys.exit(lint_imports_command()) --no-cache")
MYPY = "python -m mypy --cache-dir .test/mypy"


def _run(checkout: Path, env: dict[str, str], *args: str) -> tuple[int, list[str]]:
    bash = shutil.which("bash")
    assert bash
    proc = subprocess.run([bash, str(checkout / "test.sh"), *args], env=env, capture_output=True, text=True,
                          timeout=60)
    log = Path(env["STUB_LOG"])
    # The pin of installed versions is a temporary file: its name varies, its place in the call not.
    lines = log.read_text().splitlines() if log.exists() else []
    return proc.returncode, [re.sub(r"Dir::Etc::Preferences=\S+", "Dir::Etc::Preferences=PIN", line) for line in lines]


@pytest.mark.parametrize(
    ("uid", "apt_calls"),
    [(1000, ["sudo apt-get update -q", "apt-get update -q",
             "sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o Dir::Etc::Preferences=PIN chromium",
             "apt-get install -y -q -o Dir::Etc::Preferences=PIN chromium"]),
     (0, ["apt-get update -q", "apt-get install -y -q -o Dir::Etc::Preferences=PIN chromium"])],
    ids=["user-with-sudo", "root"],
)
def test_installs_chromium_when_absent_then_runs_pytest_with_its_exit_code(tmp_path, uid, apt_calls):
    checkout, _, env = _checkout(tmp_path, chromium=False, uid=uid)
    code, calls = _run(checkout, env, "-k", "torture")
    assert code == 5  # pytest's exit code comes through
    assert calls[:-1] == ["id -u", *apt_calls, "python -m pip install --quiet .[test]", LINT_IMPORTS, MYPY,
                          "python -m pytest -q -n 2 -k torture"]
    _assert_temporary_files_were_removed(calls[-1], tmp_path)


def _assert_temporary_files_were_removed(line: str, tmp_path: Path) -> None:
    """pytest ran with a TMPDIR of its own, which is gone once the script has finished."""
    assert line.startswith("TMPDIR=")
    tmpdir = Path(line.removeprefix("TMPDIR="))
    assert tmpdir.is_absolute() and not tmpdir.exists()
    assert tmpdir.parent == tmp_path / "tmp"


def test_nothing_is_installed_when_chromium_is_present(tmp_path):
    checkout, _, env = _checkout(tmp_path, chromium=True, uid=1000)
    code, calls = _run(checkout, env)
    assert code == 5
    assert not any(c.startswith(("apt-get", "sudo")) for c in calls)
    assert calls[-2] == "python -m pytest -q -n 2"
    _assert_temporary_files_were_removed(calls[-1], tmp_path)


def test_a_broken_import_contract_stops_before_pytest_with_its_exit_code(tmp_path):
    checkout, _, env = _checkout(tmp_path, chromium=True, uid=1000)
    env["LINT_EXIT"] = "1"
    bash = shutil.which("bash")
    assert bash
    proc = subprocess.run([bash, str(checkout / "test.sh")], env=env, capture_output=True, text=True, timeout=60)
    calls = Path(env["STUB_LOG"]).read_text().splitlines()
    assert proc.returncode == 1
    assert calls[-1] == LINT_IMPORTS and not any("pytest" in c for c in calls)
    assert "the import contract is broken (lint-imports exited 1)" in proc.stderr


def test_a_type_error_stops_before_pytest_with_its_exit_code(tmp_path):
    checkout, _, env = _checkout(tmp_path, chromium=True, uid=1000)
    env["MYPY_EXIT"] = "1"
    bash = shutil.which("bash")
    assert bash
    proc = subprocess.run([bash, str(checkout / "test.sh")], env=env, capture_output=True, text=True, timeout=60)
    calls = Path(env["STUB_LOG"]).read_text().splitlines()
    assert proc.returncode == 1
    assert calls[-2:] == [LINT_IMPORTS, MYPY] and not any("pytest" in c for c in calls)
    assert "the type checker found errors (mypy exited 1)" in proc.stderr


def test_readme_quick_start_and_ci_run_use_the_script():
    readme = (REPO / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    assert re.search(r"^\./test\.sh\s", quick_start, re.MULTILINE)
    ci_run = (REPO / ".ci/run").read_text()
    assert re.search(r"^exec \./test\.sh", ci_run, re.MULTILINE)
    assert "python3 -m venv" in ci_run and 'rm -rf "$venv"' in ci_run
    assert os.access(REPO / "test.sh", os.X_OK) and os.access(REPO / ".ci/run", os.X_OK)
