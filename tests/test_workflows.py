"""action.yml and the workflows: linted by actionlint, and kept in agreement with the code and the
README (every input reaches the program through env:, none is interpolated into a script)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from skillopt_ci.inputs.scaffold import scaffold_files

ACTION = yaml.safe_load((REPO / "action.yml").read_text())


def actionlint() -> str:
    found = shutil.which("actionlint") or str(Path(sys.executable).with_name("actionlint"))
    assert Path(found).exists(), "actionlint is in the test extra: pip install '.[test]'"
    return found


def lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([actionlint(), "-no-color"], cwd=root, capture_output=True, text=True, timeout=120)


def test_repository_workflows_pass_actionlint():
    proc = lint(REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_scaffolded_workflow_passes_actionlint(tmp_path):
    (tmp_path / ".github/workflows").mkdir(parents=True)
    (tmp_path / ".github/workflows/skillopt.yml").write_bytes(scaffold_files()[".github/workflows/skillopt.yml"])
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    proc = lint(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_checks_inputs_against_action_yml(tmp_path):
    """A workflow passing an input action.yml does not declare is caught: the lint really reads it."""
    shutil.copy(REPO / "action.yml", tmp_path / "action.yml")
    (tmp_path / ".github/workflows").mkdir(parents=True)
    text = (REPO / ".github/workflows/skillopt.yml").read_text().replace(
        "      - uses: ./\n", "      - uses: ./\n        with:\n          mood: happy\n")
    (tmp_path / ".github/workflows/skillopt.yml").write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    proc = lint(tmp_path)
    assert proc.returncode == 1 and 'input "mood" is not defined' in proc.stdout


def steps() -> list[dict]:
    return ACTION["runs"]["steps"]


def test_action_is_composite_and_keeps_the_callers_python():
    assert ACTION["runs"]["using"] == "composite"
    setup = next(s for s in steps() if str(s.get("uses", "")).startswith("actions/setup-python@"))
    assert setup["with"]["update-environment"] is False


def test_no_expression_inside_any_script():
    for step in steps():
        if "run" in step:
            assert "${{" not in step["run"], step["name"]
            assert step.get("shell") == "bash", step["name"]


def test_every_input_reaches_the_program_through_env():
    run = next(s for s in steps() if s.get("id") == "run")
    settings = (REPO / "skillopt_ci/github/settings.py").read_text()
    for name in ACTION["inputs"]:
        if name in ("python-version", "artifact-name"):
            continue
        var = "SKILLOPT_" + name.upper().replace("-", "_")
        assert run["env"][var] == "${{ inputs." + name + " }}"
        assert f'"{var}"' in settings, f"settings.py never reads {var}"


def test_run_directories_are_uploaded_as_an_artifact():
    upload = next(s for s in steps() if str(s.get("uses", "")).startswith("actions/upload-artifact@"))
    assert upload["with"]["path"] == "${{ steps.run.outputs.run-dirs }}"
    assert upload["with"]["include-hidden-files"] is True  # run directories live under .skillopt/
    assert upload["if"].startswith("always()")


def test_every_output_comes_from_the_run_step():
    for name, spec in ACTION["outputs"].items():
        assert spec["value"] == "${{ steps.run.outputs." + name + " }}"
        assert f'"{name}"' in (REPO / "skillopt_ci/github/action.py").read_text()


def test_readme_documents_every_input_and_output():
    readme = (REPO / "README.md").read_text()
    for name in [*ACTION["inputs"], *ACTION["outputs"]]:
        assert re.search(rf"\|\s*`{re.escape(name)}`\s*\|", readme), f"README does not document {name}"


@pytest.mark.parametrize("workflow", sorted((REPO / ".github/workflows").glob("*.yml")))
def test_workflows_declare_least_permissions(workflow):
    data = yaml.safe_load(workflow.read_text())
    assert "permissions" in data, f"{workflow.name} has no top-level permissions"
    for job in data["jobs"].values():
        perms = job.get("permissions", data["permissions"])
        assert perms in ({}, None) or all(v in ("read", "write", "none") for v in perms.values())
        assert "write-all" not in str(perms)
