"""``skillopt-ci review``: the static review from a terminal; exit 1 on an error finding."""

from __future__ import annotations

from helpers.cli import run_cli
from helpers.project import write_project

SKILL = "skills/release-notes/SKILL.md"


def test_review_lists_findings_with_their_lines_and_fails_on_an_error(tmp_path):
    project = write_project(tmp_path / "p", "http://127.0.0.1:9/v1",
                            skills=[{"path": SKILL, "suite": "eval_suites/release-notes"}])
    res = run_cli("review", cwd=project)
    assert res.code == 0, res.err  # a vague description is a warning
    assert f"{SKILL}:3: warning: the description says what the skill is, not when to use it" in res.out
    skill = project / SKILL
    skill.write_text(skill.read_text() + "\nSee [the template](references/template.md).\n")
    res = run_cli("review", "--skill", "release-notes", cwd=project)
    assert res.code == 1 and "references/template.md" in res.out and "[missing-file]" in res.out
    assert run_cli("review", "--skill", "nope", cwd=project).code == 2
