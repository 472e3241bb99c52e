"""action.yml and the workflows: linted by actionlint, and kept in agreement with the code and the
README (every input reaches the program through env:, none is interpolated into a script)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers.paths import REPO
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
        if name in ("python-version", "artifact-name", "cache"):  # cache: action.yml's own steps
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
        assert f'"{name}"' in "".join(path.read_text() for path in (REPO / "skillopt_ci/github").glob("*.py"))


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


def test_agent_clis_are_installed_before_the_run_step_only_when_a_suite_needs_them():
    names = [s.get("id") or s["name"] for s in steps()]
    check, node, install = (next(s for s in steps() if s["name"] == n) for n in (
        "Check whether a suite runs an agent CLI", "Set up Node for the agent CLIs", "Install the agent CLIs"))
    assert names.index(check["id"]) < names.index(node["name"]) < names.index(install["name"]) < names.index("run")
    assert "install-agents --if-needed --dry-run" in check["run"]
    assert "install-agents --if-needed --prefix" in install["run"]
    assert node["uses"].startswith("actions/setup-node@")
    assert "steps.agents.outputs.needed == 'true'" in node["if"] and "node-ok" in node["if"]
    assert install["if"] == "steps.agents.outputs.needed == 'true'"
    cache = next(s for s in steps() if s["name"] == "Restore the agent CLIs from the cache")
    assert names.index(cache["name"]) < names.index(install["name"]) and cache["uses"].startswith("actions/cache@")
    assert cache["with"]["path"] == install["env"]["SKILLOPT_AGENTS"]  # restores the folder it installs into
    assert "steps.agents.outputs.versions" in cache["with"]["key"]
    for step in (check, install):  # fork-safe: no token, secret or event data reaches them
        assert set(step["env"]) <= {"SKILLOPT_CONFIG", "SKILLOPT_VENV", "SKILLOPT_AGENTS"}
        assert all("inputs.token" not in v and "github.event" not in v for v in step["env"].values())


@pytest.mark.parametrize(("environment", "needed"), [("codex", "true"), ("chat", "false")])
def test_the_check_step_says_whether_an_agent_cli_is_needed(tmp_path, environment, needed):
    """The step's own script, run by bash with the Action's variables, in a project whose one
    suite runs ``environment``."""
    venv = Path(sys.executable).parent.parent
    if not (venv / "bin/skillopt-ci").exists():
        pytest.skip("skillopt-ci is not installed next to this Python")
    suite = tmp_path / "eval_suites/s"
    suite.mkdir(parents=True)
    (suite / "suite.yaml").write_text(yaml.safe_dump({"environment": {"type": environment}, "scorer": {"type": "exact"}}))
    (tmp_path / "skills/s").mkdir(parents=True)
    (tmp_path / "skills/s/SKILL.md").write_text("---\nname: s\ndescription: d\n---\nbody\n")
    (tmp_path / "skillopt.yml").write_text(yaml.safe_dump({
        "version": 1, "models": {"target": {"provider": "openai", "model": "m"}},
        "skills": [{"path": "skills/s/SKILL.md", "suite": "eval_suites/s"}]}))
    output = tmp_path / "output.txt"
    check = next(s for s in steps() if s.get("id") == "agents")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(output),
           "SKILLOPT_CONFIG": "skillopt.yml", "SKILLOPT_VENV": str(venv)}
    proc = subprocess.run(["bash", "-e", "-c", check["run"]], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    written = output.read_text()
    assert re.search(rf"needed<<(\w+)\n{needed}\n\1\n", written), written
    versions = re.search(r"versions<<(\w+)\n(.*)\n\1\n", written).group(2)
    assert versions == ("codex@0.171.0" if needed == "true" else "")  # the CLI cache's key
    assert re.search(r"^node-ok=(true|false)$", written, re.M)


SHARDED = REPO / ".github/workflows/skillopt-sharded.yml"


def sharded() -> dict:
    return yaml.safe_load(SHARDED.read_text())


def test_sharded_workflow_passes_actionlint_and_its_action_inputs_are_checked(tmp_path):
    """actionlint reads action.yml through ``uses: $/./``: an input it does not declare is caught."""
    shutil.copy(REPO / "action.yml", tmp_path / "action.yml")
    (tmp_path / ".github/workflows").mkdir(parents=True)
    shutil.copy(SHARDED, tmp_path / ".github/workflows/skillopt-sharded.yml")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    proc = lint(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = SHARDED.read_text().replace("          shards-path:", "          shards-pth:")
    (tmp_path / ".github/workflows/skillopt-sharded.yml").write_text(text)
    proc = lint(tmp_path)
    assert proc.returncode == 1 and 'input "shards-pth" is not defined' in proc.stdout


def test_sharded_workflow_is_callable_with_its_inputs_and_explicit_secrets():
    call = sharded()[True]["workflow_call"]  # YAML 1.1 reads the key `on` as true
    assert call["inputs"]["shards"]["type"] == "number"
    assert {"shards", "mode", "skills", "config", "python-version"} <= set(call["inputs"])
    assert all(spec["required"] is False for spec in call["secrets"].values())
    assert {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"} <= set(call["secrets"])


def test_sharded_workflow_matrix_shards_and_merges_even_after_a_failure():
    jobs = sharded()["jobs"]
    assert jobs["shard"]["strategy"]["matrix"]["shard"] == "${{ fromJSON(needs.plan.outputs.shards) }}"
    assert jobs["shard"]["strategy"]["fail-fast"] is False
    [run] = [s for s in jobs["shard"]["steps"] if s.get("uses") == "$/./"]
    assert run["with"]["shard"] == "${{ matrix.shard }}/${{ inputs.shards }}" and run["with"]["cache"] == "true"
    assert run["with"]["artifact-name"] == "skillopt-shard-${{ matrix.shard }}"
    # A failed shard still gets its (incomplete) report; a run cancelled by a newer push publishes nothing.
    assert jobs["merge"]["needs"] == ["plan", "shard"] and jobs["merge"]["if"].startswith("${{ !cancelled()")
    download = next(s for s in jobs["merge"]["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact@"))
    [merge] = [s for s in jobs["merge"]["steps"] if s.get("uses") == "$/./"]
    assert download["with"]["pattern"] == "skillopt-shard-*"
    assert merge["with"]["shards-path"] == download["with"]["path"]
    # Least privilege: only the merge job writes to GitHub, and only the shard jobs see model keys.
    assert jobs["shard"]["permissions"] == {"contents": "read"} and jobs["plan"]["permissions"] == {}
    assert jobs["merge"]["permissions"] == {"contents": "read", "pull-requests": "write", "checks": "write"}
    assert "secrets." not in yaml.safe_dump(jobs["merge"]) and "secrets." not in yaml.safe_dump(jobs["plan"])
    for job in jobs.values():
        for step in job.get("steps", []):
            assert "${{" not in step.get("run", ""), step


@pytest.mark.parametrize(("shards", "mode", "code", "listed"), [
    ("3", "gate", 0, "[1,2,3]"), ("1", "eval", 0, "[1]"), ("0", "gate", 2, None), ("257", "gate", 2, None),
    ("2.5", "gate", 2, None), ("4", "train", 2, None)])
def test_sharded_workflow_plan_step_lists_the_shards(tmp_path, shards, mode, code, listed):
    step = sharded()["jobs"]["plan"]["steps"][0]
    output = tmp_path / "output"
    output.touch()
    env = {"PATH": os.environ["PATH"], "GITHUB_OUTPUT": str(output), "SHARDS": shards, "MODE": mode}
    proc = subprocess.run(["bash", "-e", "-c", step["run"]], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert output.read_text() == (f"shards={listed}\n" if listed else "")
    if code:
        assert proc.stdout.startswith("::error title=skillopt sharded::the input")


def test_the_cache_step_keys_actions_cache_by_the_printed_key(tmp_path):
    """action.yml's cache-key step, run by bash with the Action's variables, feeds actions/cache."""
    venv = Path(sys.executable).parent.parent
    if not (venv / "bin/skillopt-ci").exists():
        pytest.skip("skillopt-ci is not installed next to this Python")
    shutil.copytree(REPO / "skillopt_ci/inputs/example", tmp_path, dirs_exist_ok=True)
    output = tmp_path / "output.txt"
    step = next(s for s in steps() if s.get("id") == "cache-key")
    restore = next(s for s in steps() if s["name"] == "Restore the response cache")
    assert step["if"] == "inputs.cache == 'true'" and restore["uses"].startswith("actions/cache@")
    assert restore["with"]["path"] == "${{ steps.cache-key.outputs.path }}"
    assert restore["with"]["key"].startswith("${{ steps.cache-key.outputs.key }}-${{ github.run_id }}")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GITHUB_OUTPUT": str(output),
           "SKILLOPT_CONFIG": "skillopt.yml", "SKILLOPT_VENV": str(venv), "SKILLOPT_SKILLS": "", "SKILLOPT_SHARD": "2/4"}
    proc = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    values = dict(line.split("=", 1) for line in output.read_text().splitlines())
    assert values["key"].endswith("-shard2of4") and values["key"].startswith(values["restore-key"])
    assert values["path"] == ".skillopt/cache.sqlite"


# ---- the newest push wins: one run per pull request ------------------------------------------
PER_PR = "${{ github.event.pull_request.number || github.ref }}"
CANCEL_PR = "${{ github.event_name == 'pull_request' }}"


def readme_workflow_text() -> str:
    """The workflow the README tells users to copy: its YAML block with the gate and command jobs."""
    blocks = re.findall(r"```yaml\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    return next(b for b in blocks if "\n  skillopt:" in b and "\n  command:" in b)


def readme_workflow() -> dict:
    return yaml.safe_load(readme_workflow_text())


def assert_gate_group(concurrency: dict, prefix: str) -> None:
    """A group per pull request (per ref elsewhere), and a new push cancels the older push's gate."""
    assert concurrency["group"] == f"{prefix}{PER_PR}"
    assert concurrency["cancel-in-progress"] == CANCEL_PR


@pytest.mark.parametrize("source", ["repository", "readme", "init"])
def test_the_gate_job_has_a_concurrency_group_per_pull_request(source):
    data = {"repository": lambda: yaml.safe_load((REPO / ".github/workflows/skillopt.yml").read_text()),
            "readme": readme_workflow,
            "init": lambda: yaml.safe_load(scaffold_files()[".github/workflows/skillopt.yml"])}[source]()
    assert_gate_group(data["jobs"]["skillopt"]["concurrency"], "skillopt-")


def test_the_sharded_workflow_has_one_group_per_pull_request_and_cancelled_runs_publish_nothing():
    data = sharded()
    assert_gate_group(data["concurrency"], "skillopt-sharded-${{ github.workflow }}-")
    assert "always()" not in data["jobs"]["merge"]["if"]


def test_the_readme_workflow_passes_actionlint(tmp_path):
    (tmp_path / ".github/workflows").mkdir(parents=True)
    (tmp_path / ".github/workflows/skillopt.yml").write_text(readme_workflow_text())
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    proc = lint(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
