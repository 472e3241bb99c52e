"""Skill names reach branch names and directory names: unusable names are refused up front (exit 2,
naming the file and the rule), and every derived name goes through one safe slug."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from helpers.cli import run_cli
from helpers.project import write_project
from skillopt_ci.core.names import name_problem, run_dir_name, slug, training_branch
from skillopt_ci.github.training_pr import check_branch

NASTY = ["rules..x", "rules.lock", "my skill", "$(touch pwned);|&*?", "x" * 300, "-lead", "trail.", "a/b",
         "refs/heads/main", "@{u}", "ünï", "..", ".hidden", "a\\b", "x~1^2:3", ""]


def ref_ok(branch: str) -> bool:
    return subprocess.run(["git", "check-ref-format", "--branch", branch], capture_output=True).returncode == 0


@pytest.mark.parametrize("name", NASTY)
def test_slug_makes_valid_branch_and_directory_names(tmp_path, name):
    s = slug(name)
    assert name_problem(s) is None and len(s) <= 64
    assert ref_ok(training_branch(name)) and check_branch(training_branch(name)) == training_branch(name)
    (tmp_path / run_dir_name("eval", name, "val", "0123456789")).mkdir()  # no "File name too long"


def test_slug_keeps_valid_names_and_never_merges_two_names():
    for name in ("ticket-triage", "AGENTS", "v1.2_notes"):
        assert slug(name) == name
    names = ["my skill", "my-skill", "my_skill", "My skill", "rules.lock", "rules", "x" * 300, "x" * 301]
    assert len({slug(n) for n in names}) == len(names)


def config_with_name(project: Path, name: str) -> None:
    data = yaml.safe_load((project / "skillopt.yml").read_text())
    data["skills"][0]["name"] = name
    (project / "skillopt.yml").write_text(yaml.safe_dump(data, sort_keys=False))


@pytest.mark.parametrize("name, rule", [("rules..x", "contains '..'"), ("rules.lock", "ends in '.lock'"),
                                        ("$(touch p);|&*?", "contains ' $&()*;?|'"),
                                        ("x" * 300, "is 300 characters long")])
def test_unusable_config_name_fails_validate_and_every_command_before_any_call(project, server, name, rule):
    config_with_name(project, name)
    res = run_cli("validate", cwd=project)
    assert res.code == 2 and "skillopt.yml:" in res.err and "skills[0].name" in res.err and rule in res.err
    assert "branch and directory names" in res.err
    for args in (["eval", "ticket-triage"], ["train", "--skill", name], ["gate", "--base", "HEAD"]):
        res = run_cli(*args, "--quiet", cwd=project)
        assert res.code == 2 and "skills[0].name" in res.err and "Traceback" not in res.err, (args, res.err)
    assert server.calls == [] and not (project / ".skillopt/runs").exists()


def test_folder_with_a_space_needs_a_name(project):
    (project / "skills/ticket-triage").rename(project / "skills/my skill")
    skill = project / "skills/my skill/SKILL.md"
    skill.write_text(skill.read_text().replace("name: ticket-triage\n", ""))
    data = yaml.safe_load((project / "skillopt.yml").read_text())
    data["skills"][0]["path"] = "skills/my skill/SKILL.md"
    (project / "skillopt.yml").write_text(yaml.safe_dump(data, sort_keys=False))
    res = run_cli("validate", cwd=project)
    assert res.code == 2 and "skills[0].path" in res.err and "'my skill' (taken from the path) contains ' '" in res.err
    config_with_name(project, "my-skill")
    assert run_cli("validate", cwd=project).code == 0


def test_ad_hoc_skill_with_a_long_odd_folder_gets_a_safe_run_dir(project):
    """A skill file evaluated by path (not in skillopt.yml) may sit anywhere: its run dir is slugged."""
    folder = project / ("odd; $(name) *?" + "y" * 230)
    folder.mkdir()
    text = (project / "skills/ticket-triage/SKILL.md").read_text().replace("name: ticket-triage\n", "")
    (folder / "SKILL.md").write_text(text)
    res = run_cli("eval", str(folder / "SKILL.md"), "--suite", "eval_suites/ticket-triage", "--quiet", cwd=project)
    assert res.code == 0, res.err
    (run,) = (project / ".skillopt/runs").iterdir()
    assert len(run.name.encode()) < 255
    assert all(c.isalnum() or c in "._-" for c in run.name) and (run / "summary.json").is_file()


def test_two_configured_names_differing_in_case_are_refused(tmp_path, server):
    project = write_project(tmp_path / "p", server.openai_base_url)
    data = yaml.safe_load((project / "skillopt.yml").read_text())
    data["skills"] = [dict(data["skills"][0], name="Triage"), dict(data["skills"][0], name="triage")]
    (project / "skillopt.yml").write_text(yaml.safe_dump(data, sort_keys=False))
    res = run_cli("validate", cwd=project)
    assert res.code == 2 and "'triage' is used twice" in res.err
