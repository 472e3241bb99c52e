"""``skillopt-ci install-agents``: the npm command it runs (a fake ``npm`` on PATH records its
arguments and installs stand-in binaries that report a version), ``--if-needed`` from the
configured suites' environments, the reuse of an up-to-date folder, GitHub Actions' runner files,
and a missing npm. No network."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import yaml

from helpers.cli import run_cli
from skillopt_ci.envs.agent_clis import AGENT_CLIS

CODEX, CLAUDE = AGENT_CLIS["codex"], AGENT_CLIS["claude-code"]

# Records its arguments, then puts a binary per package into PREFIX/node_modules/.bin that prints
# the version from the spec (or FAKE_NPM_VERSION), like `npm install --prefix PREFIX pkg@ver`.
FAKE_NPM = """#!/bin/sh
printf '%s\\n' "$@" > "$FAKE_NPM_LOG"
echo "added 2 packages" >&2
[ -n "$FAKE_NPM_EXIT" ] && exit "$FAKE_NPM_EXIT"
prefix="$3"
mkdir -p "$prefix/node_modules/.bin"
for spec in "$@"; do
  case "$spec" in
    @openai/codex@*) name=codex; version="${spec##*@}" ;;
    @anthropic-ai/claude-code@*) name=claude; version="${spec##*@}" ;;
    *) continue ;;
  esac
  printf '#!/bin/sh\\necho "%s %s"\\n' "$name" "${FAKE_NPM_VERSION:-$version}" > "$prefix/node_modules/.bin/$name"
  chmod +x "$prefix/node_modules/.bin/$name"
done
"""


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def npm(tmp_path, monkeypatch):
    """A fake npm first on PATH; yields the file its last arguments are written to."""
    folder = tmp_path / "fakebin"
    folder.mkdir()
    executable(folder / "npm", FAKE_NPM)
    log = tmp_path / "npm-args.txt"
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NPM_LOG", str(log))
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    return log


def project(root: Path, environments: list[str]) -> Path:
    skills = []
    for i, env in enumerate(environments):
        suite = root / f"eval_suites/s{i}"
        suite.mkdir(parents=True)
        (suite / "suite.yaml").write_text(yaml.safe_dump({"environment": {"type": env}, "scorer": {"type": "exact"}}))
        (suite / "val.jsonl").write_text(json.dumps({"id": "a", "input": "x", "expected": "y"}) + "\n")
        skill = root / f"skills/s{i}/SKILL.md"
        skill.parent.mkdir(parents=True)
        skill.write_text(f"---\nname: s{i}\ndescription: d\n---\nbody\n")
        skills.append({"path": f"skills/s{i}/SKILL.md", "suite": f"eval_suites/s{i}"})
    (root / "skillopt.yml").write_text(yaml.safe_dump({
        "version": 1, "models": {"target": {"provider": "openai", "model": "m"}}, "skills": skills}))
    return root


def test_installs_both_pinned_clis_and_says_how_to_put_them_on_path(tmp_path, npm):
    prefix = tmp_path / "agents"
    res = run_cli("install-agents", "--prefix", str(prefix))
    assert res.code == 0, res.err
    assert npm.read_text().splitlines() == ["install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                                            CODEX.npm_spec, CLAUDE.npm_spec]
    bin_dir = prefix / "node_modules" / ".bin"
    assert res.out.splitlines() == [
        f"installed: codex {CODEX.version}, claude {CLAUDE.version} in {bin_dir}",
        f'put them on PATH: export PATH="{bin_dir}:$PATH"',
    ]


def test_an_up_to_date_folder_is_reused_without_npm(tmp_path, npm):
    prefix = tmp_path / "agents"
    assert run_cli("install-agents", "--prefix", str(prefix), "--only", "codex").code == 0
    npm.unlink()
    res = run_cli("install-agents", "--prefix", str(prefix), "--only", "codex")
    assert res.code == 0 and res.out.startswith(f"already installed: codex {CODEX.version}")
    assert not npm.exists()  # npm was not run


def test_an_outdated_folder_is_installed_again(tmp_path, npm, monkeypatch):
    prefix = tmp_path / "agents"
    monkeypatch.setenv("FAKE_NPM_VERSION", "0.0.1")
    assert run_cli("install-agents", "--prefix", str(prefix), "--only", "claude-code").code == 3
    monkeypatch.delenv("FAKE_NPM_VERSION")
    npm.unlink()
    res = run_cli("install-agents", "--prefix", str(prefix), "--only", "claude-code")
    assert res.code == 0 and res.out.startswith("installed: claude")
    assert npm.read_text().splitlines()[-1] == CLAUDE.npm_spec


def test_if_needed_installs_only_what_the_suites_use(tmp_path, npm):
    root = project(tmp_path / "p", ["chat", "claude-code", "tools"])
    res = run_cli("install-agents", "--if-needed", "--prefix", str(tmp_path / "a"), cwd=root)
    assert res.code == 0, res.err
    assert npm.read_text().splitlines()[5:] == [CLAUDE.npm_spec]


def test_if_needed_does_nothing_when_no_suite_runs_an_agent(tmp_path, npm):
    root = project(tmp_path / "p", ["chat", "tools"])
    res = run_cli("install-agents", "--if-needed", "--prefix", str(tmp_path / "a"), cwd=root)
    assert (res.code, res.out) == (0, "no configured suite runs an agent CLI (codex, claude-code): nothing to install\n")
    assert not npm.exists()


def test_under_github_actions_the_bin_folder_goes_to_github_path(tmp_path, npm, monkeypatch):
    root = project(tmp_path / "p", ["codex"])
    path_file, output_file = tmp_path / "path.txt", tmp_path / "output.txt"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_PATH", str(path_file))
    monkeypatch.setenv("GITHUB_OUTPUT", str(output_file))
    dry = run_cli("install-agents", "--if-needed", "--dry-run", cwd=root)
    assert dry.code == 0 and dry.out == f"would install codex {CODEX.version}\n" and not npm.exists()
    assert "needed<<" in output_file.read_text() and "\ntrue\n" in output_file.read_text()
    prefix = tmp_path / "agents"
    res = run_cli("install-agents", "--if-needed", "--prefix", str(prefix), cwd=root)
    assert res.code == 0, res.err
    assert path_file.read_text() == f"{prefix / 'node_modules' / '.bin'}\n"
    assert "added" in res.out and "GITHUB_PATH" in res.out


def test_missing_npm_is_exit_2_with_the_install_hint(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    res = run_cli("install-agents", "--prefix", str(tmp_path / "a"))
    assert res.code == 2
    assert res.err.startswith("error: npm is not on PATH") and "actions/setup-node" in res.err


def test_npm_failing_is_exit_3_naming_its_exit_code(tmp_path, npm, monkeypatch):
    monkeypatch.setenv("FAKE_NPM_EXIT", "7")
    res = run_cli("install-agents", "--prefix", str(tmp_path / "a"), "--only", "codex")
    assert res.code == 3 and "npm install exited with code 7" in res.err
