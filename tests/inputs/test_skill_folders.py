"""Skills as folders: ``SKILL.md`` plus resources is one skill, hashed, versioned and trained as
one; only ``SKILL.md`` is ever edited."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import yaml

from helpers.cli import run_cli
from helpers.paths import REPO
from helpers.repo import SKILL, commit_on_branch, gate_json, git, make_repo
from helpers.training import train, train_project
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.skill import load_skill, parse_skill, skill_hash
from skillopt_ci.inputs.suite import load_suite
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.sim_models import SimulatedModels
from skillopt_ci.train.evaluate import StageEvaluator
from skillopt_ci.train.state import TrainState

TEXT = "---\nname: demo\ndescription: A demo skill.\n---\nAnswer briefly.\n"


def folder_skill(root: Path) -> Path:
    folder = root / "demo"
    (folder / "scripts").mkdir(parents=True)
    (folder / "references").mkdir()
    (folder / "SKILL.md").write_text(TEXT)
    (folder / "scripts" / "check.py").write_text("print('ok')\n")
    (folder / "references" / "api.md").write_text("# API\n")
    return folder


def test_a_lone_skill_file_keeps_the_hash_of_its_text(tmp_path):
    (tmp_path / "demo.md").write_text(TEXT)
    skill = load_skill(tmp_path / "demo.md")
    assert skill.hash == "0d4b7985852fa5c39831c05a08cc46d778233eb8c9a68fc830bfae7517d5c5b1"
    assert skill.folder is None and skill.resources == ()
    assert skill.identity() == {"name": "demo", "path": str(tmp_path / "demo.md"), "hash": skill.hash,
                                "tokens": skill.tokens}
    # A SKILL.md alone in its folder is a lone file too.
    (tmp_path / "solo").mkdir()
    (tmp_path / "solo" / "SKILL.md").write_text(TEXT)
    solo = load_skill(tmp_path / "solo")
    assert solo.folder is None and solo.hash == skill.hash


def test_a_skill_folder_hashes_every_file_and_skips_junk(tmp_path):
    folder = folder_skill(tmp_path)
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (folder / "scripts" / "__pycache__").mkdir()
    (folder / "scripts" / "__pycache__" / "check.cpython-311.pyc").write_bytes(b"\0junk")
    (folder / ".DS_Store").write_bytes(b"junk")
    skill = load_skill(folder / "SKILL.md")
    assert skill.folder == folder.resolve()
    assert skill.resources == (
        ("references/api.md", hashlib.sha256(b"# API\n").hexdigest()),
        ("scripts/check.py", hashlib.sha256(b"print('ok')\n").hexdigest()),
    )
    assert skill.hash != hashlib.sha256(TEXT.encode()).hexdigest()
    assert skill.identity()["resources"] == [{"path": p, "sha256": h} for p, h in skill.resources]
    # Any byte of any resource is part of the identity; junk is not.
    (folder / ".DS_Store").write_bytes(b"other junk")
    assert load_skill(folder).hash == skill.hash
    (folder / "scripts" / "check.py").write_text("print('changed')\n")
    assert load_skill(folder).hash != skill.hash


def test_a_symlink_inside_the_folder_is_followed_one_outside_is_refused(tmp_path):
    folder = folder_skill(tmp_path)
    os.symlink("api.md", folder / "references" / "alias.md")
    skill = load_skill(folder)
    assert ("references/alias.md", hashlib.sha256(b"# API\n").hexdigest()) in skill.resources
    (tmp_path / "secret.txt").write_text("outside\n")
    os.symlink(tmp_path / "secret.txt", folder / "scripts" / "leak.txt")
    with pytest.raises(InputError) as exc:
        load_skill(folder / "SKILL.md", display="skills/demo/SKILL.md")
    assert exc.value.where == "skills/demo/scripts/leak.txt"
    assert "outside the skill folder" in exc.value.message


def test_a_dangling_link_and_a_huge_tree_are_named(tmp_path, monkeypatch):
    import skillopt_ci.core.skill as skill_module

    folder = folder_skill(tmp_path)
    os.symlink("gone.md", folder / "references" / "old.md")
    with pytest.raises(InputError) as exc:
        load_skill(folder, display="demo")
    assert exc.value.where == "demo/references/old.md" and "points nowhere" in exc.value.message
    (folder / "references" / "old.md").unlink()
    monkeypatch.setattr(skill_module, "MAX_RESOURCES", 1)
    with pytest.raises(InputError) as exc:
        load_skill(folder, display="demo")
    assert exc.value.where == "demo" and "more than 1 files" in exc.value.message


def test_validate_names_a_symlink_leaving_the_skill_folder(project, tmp_path):
    (tmp_path / "elsewhere.md").write_text("not part of the skill\n")
    os.symlink(tmp_path / "elsewhere.md", project / "skills" / "ticket-triage" / "notes.md")
    res = run_cli("validate", cwd=project)
    assert res.code == 2
    assert "skills/ticket-triage/notes.md" in res.out + res.err
    assert "outside the skill folder" in res.out + res.err


def test_a_candidate_keeps_the_folder_and_only_its_text_changes(tmp_path):
    folder = folder_skill(tmp_path)
    parent = load_skill(folder)
    suite = load_suite(REPO / "skillopt_ci/inputs/example/eval_suites/ticket-triage")
    evaluator = StageEvaluator(None, suite, "demo", tmp_path / "run", 1, lambda: None, parent=parent)  # type: ignore[arg-type]
    same = evaluator.candidate(TEXT)
    assert same.hash == parent.hash and same.folder == parent.folder
    edited = evaluator.candidate(TEXT + "Cite the reference.\n")
    assert edited.resources == parent.resources and edited.folder == parent.folder
    assert edited.hash == skill_hash(edited.text, parent.resources) != parent.hash
    # Parsing still applies: a broken front matter in a candidate is an error, as in a file.
    with pytest.raises(InputError):
        evaluator.candidate("---\nname: [\n---\n")
    assert parse_skill(TEXT).hash == hashlib.sha256(TEXT.encode()).hexdigest()


def test_training_a_folder_skill_versions_the_folder(tmp_path):
    with ScriptedModelServer(SimulatedModels()) as server:
        project = train_project(tmp_path / "p", server.openai_base_url, train={"epochs": 1})
        check = project / "skills" / "ticket-triage" / "scripts" / "check.py"
        check.parent.mkdir()
        check.write_text("print('check')\n")
        run = tmp_path / "run"
        res = train(project, run)
    assert res.code == 0, res.err
    resources = (("scripts/check.py", hashlib.sha256(b"print('check')\n").hexdigest()),)
    state = TrainState.load(run)
    assert len(state.versions) >= 2  # at least one accepted edit
    for version in state.versions:
        text = (run / "skills" / f"v{version.number:03d}.md").read_text()
        assert version.hash == skill_hash(text, resources) != hashlib.sha256(text.encode()).hexdigest()
        # What was evaluated is that version with its folder (the eval run's identity says so).
        manifest = json.loads((run / version.val_dir / "run.json").read_text())
        assert manifest["skill_hash"] == version.hash
    summary = json.loads((run / "summary.json").read_text())
    assert summary["skill"]["resources"] == [{"path": "scripts/check.py", "sha256": resources[0][1]}]
    assert summary["baseline_hash"] == load_skill(project / SKILL).hash
    # The skill folder on disk is untouched: training edits SKILL.md's text only.
    assert check.read_text() == "print('check')\n"


def test_validate_warns_when_the_suite_lives_in_the_skill_folder(project):
    data = yaml.safe_load((project / "skillopt.yml").read_text())
    (project / "eval_suites" / "ticket-triage").rename(project / "skills" / "ticket-triage" / "evals")
    data["skills"][0]["suite"] = "skills/ticket-triage/evals"
    (project / "skillopt.yml").write_text(yaml.safe_dump(data))
    res = run_cli("validate", cwd=project)
    assert "the suite is inside the skill's folder" in res.out + res.err


def folder_repo(tmp_path: Path, base_url: str) -> Path:
    """The example project in a git repository whose skill is a folder with a script."""
    root = make_repo(tmp_path, base_url)
    (root / "skills/ticket-triage/scripts").mkdir()
    (root / "skills/ticket-triage/scripts/check.py").write_text("print('v1')\n")
    (root / "skills/ticket-triage/references").mkdir()
    (root / "skills/ticket-triage/references/labels.md").write_text("# Labels\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "folder skill")
    return root


def run_hash(run: Path) -> str:
    return json.loads((run / "run.json").read_text())["skill_hash"]


def test_a_pr_changing_only_a_script_of_a_skill_folder_gates_the_skill(tmp_path, server):
    root = folder_repo(tmp_path, server.openai_base_url)
    base_skill = load_skill(root / SKILL)
    commit_on_branch(root, "script", {"skills/ticket-triage/scripts/check.py": "print('v2')\n",
                                      "skills/ticket-triage/references/new.md": "# New\n",
                                      "skills/ticket-triage/scripts/__pycache__/check.cpython-311.pyc": "junk"})
    out = tmp_path / "g"
    res = run_cli("gate", "--base", "main", "--head", "script", "--out", str(out), "--quiet", cwd=root)
    assert res.code == 0, res.err
    skill = gate_json(out)["skills"][0]
    assert skill["status"] == "modified" and skill["verdict"] == "unchanged"
    assert skill["files"] == [{"path": "references/new.md", "change": "added"},
                              {"path": "scripts/check.py", "change": "changed"}]
    assert "references/new.md added, scripts/check.py changed" in (out / "report.md").read_text()
    assert "ticket-triage: references/new.md added, scripts/check.py changed" in res.out
    # Each side ran with its own folder: the base's script, not the checked-out one.
    assert run_hash(out / "ticket-triage" / "base") == base_skill.hash
    head_skill = load_skill(root / SKILL)  # the branch is checked out
    assert run_hash(out / "ticket-triage" / "head") == head_skill.hash != base_skill.hash


def test_a_junk_file_in_a_skill_folder_is_no_change(tmp_path, server):
    root = folder_repo(tmp_path, server.openai_base_url)
    commit_on_branch(root, "junk", {"skills/ticket-triage/.DS_Store": "junk"})
    res = run_cli("gate", "--base", "main", "--head", "junk", "--out", str(tmp_path / "g"), "--quiet", cwd=root)
    assert res.code == 0 and server.call_count == 0
    assert gate_json(tmp_path / "g")["verdict"] == "skipped"


def test_the_working_tree_gate_sees_a_new_file_in_the_skill_folder(tmp_path, server):
    root = folder_repo(tmp_path, server.openai_base_url)
    (root / "skills/ticket-triage/scripts/extra.sh").write_text("echo hi\n")
    (root / "skills/ticket-triage/references/labels.md").unlink()
    out = tmp_path / "g"
    res = run_cli("gate", "--out", str(out), "--quiet", cwd=root)
    assert res.code == 0, res.err
    skill = gate_json(out)["skills"][0]
    assert skill["status"] == "modified"
    assert skill["files"] == [{"path": "references/labels.md", "change": "deleted"},
                              {"path": "scripts/extra.sh", "change": "added"}]
    assert run_hash(out / "ticket-triage" / "head") == load_skill(root / SKILL).hash
