"""Bad input gets one clear message naming the file (and line or path), exit 2, and no run
directory left behind. Also: what a valid project looks like to ``validate`` and ``init``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.cli import run_cli
from helpers.paths import REPO
from helpers.project import write_project
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.skill import estimate_tokens, load_skill, parse_skill
from skillopt_ci.inputs.scaffold import scaffold_files
from skillopt_ci.inputs.suite import load_suite


def eval_fails(project: Path, *args: str) -> str:
    out = project / "should-not-exist"
    res = run_cli("eval", "ticket-triage", "--out", str(out), "--quiet", *args, cwd=project)
    assert res.code == 2, (res.code, res.err)
    assert not out.exists()
    assert "Traceback" not in res.err
    return res.err


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


SUITE = "eval_suites/ticket-triage"


def test_no_config_found(tmp_path):
    res = run_cli("eval", "x", cwd=tmp_path)
    assert res.code == 2 and "no skillopt.yml" in res.err and "skillopt-ci init" in res.err


def test_config_yaml_syntax_error_names_line(project):
    (project / "skillopt.yml").write_text("models:\n  target: [unclosed\nskills: []\n")
    err = eval_fails(project)
    assert "skillopt.yml:3" in err and "not valid YAML" in err


def test_config_schema_error_names_path_and_allowed_values(project):
    edit(project / "skillopt.yml", "provider: openai-compatible", "provider: openia")
    err = eval_fails(project)
    assert ("skillopt.yml:4: models.target.provider: unknown provider 'openia'; "
            "known: openai, azure-openai, anthropic, openai-compatible") in err


def test_config_unknown_key(project):
    (project / "skillopt.yml").write_text((project / "skillopt.yml").read_text() + "concurency: 3\n")
    err = eval_fails(project)
    assert "unknown key 'concurency'" in err and "concurrency" in err


def test_config_missing_suite_directory(project):
    edit(project / "skillopt.yml", f"suite: {SUITE}", "suite: eval_suites/nope")
    err = eval_fails(project)
    assert "skills[0].suite: no such directory 'eval_suites/nope'" in err


def test_malformed_task_line_names_file_and_line(project):
    val = project / SUITE / "val.jsonl"
    lines = val.read_text().splitlines()
    lines[6] = lines[6][:-1]
    val.write_text("\n".join(lines) + "\n")
    err = eval_fails(project)
    assert "val.jsonl:7: not valid JSON" in err


def test_task_without_id(project):
    val = project / SUITE / "val.jsonl"
    val.write_text(val.read_text() + json.dumps({"input": "hi", "expected": "question/P3"}) + "\n")
    assert 'val.jsonl:13: task has no "id"' in eval_fails(project)


def test_task_id_in_two_splits_is_leakage(project):
    test = project / SUITE / "test.jsonl"
    lines = test.read_text().splitlines()
    lines[0] = lines[0].replace('"id": "test-01"', '"id": "val-03"')
    test.write_text("\n".join(lines) + "\n")
    err = eval_fails(project)
    assert "test.jsonl:1" in err and "'val-03'" in err and "leakage" in err and "val.jsonl:3" in err


def test_prompt_placeholder_missing_in_task(project):
    edit(project / SUITE / "suite.yaml", "{{ metadata.plan }}", "{{ metadata.tier }}")
    err = eval_fails(project)
    assert "{{ metadata.tier }}" in err and "train.jsonl:1" in err


def test_unknown_scorer(project):
    edit(project / SUITE / "suite.yaml", "type: python", "type: bleu")
    err = eval_fails(project)
    line = next(i for i, text in enumerate((project / SUITE / "suite.yaml").read_text().splitlines(), 1)
                if "type: bleu" in text)
    assert f"suite.yaml:{line}: scorer: unknown scorer 'bleu'; known: exact, contains" in err


def test_scorer_option_error(project):
    edit(project / SUITE / "suite.yaml", "function: scorer:score", "function: scorer:score\n  tolerance: 3")
    err = eval_fails(project)
    assert "tolerance" in err


def test_missing_split(project):
    res = run_cli("eval", "ticket-triage", "--split", "holdout", "--quiet", cwd=project)
    assert res.code == 2 and "no 'holdout' split" in res.err and "train, val, test" in res.err


def test_missing_skill_file(project):
    res = run_cli("eval", "skills/nope/SKILL.md", "--suite", SUITE, cwd=project)
    assert res.code == 2 and "no skill file or configured skill named 'skills/nope/SKILL.md'" in res.err


def test_bad_front_matter(project):
    skill = project / "skills/ticket-triage/SKILL.md"
    edit(skill, "name: ticket-triage", "name: ticket..triage")
    err = eval_fails(project)
    assert "SKILL.md:1" in err and "'ticket..triage' contains '..'" in err


def test_front_matter_yaml_error(project):
    skill = project / "skills/ticket-triage/SKILL.md"
    edit(skill, "description: Sort", "description: [Sort")
    assert "front matter is not valid YAML" in eval_fails(project)


def test_missing_key_says_which_variable(tmp_path, server):
    project = write_project(tmp_path / "p", server.openai_base_url, target={"provider": "openai", "model": "gpt-4o-mini"})
    err = eval_fails(project)
    assert "OPENAI_API_KEY" in err


def test_scorer_that_raises_names_its_file_and_line(project):
    scorer = project / SUITE / "scorer.py"
    edit(scorer, "    want_category, want_priority = task.expected.split(\"/\")",
         "    want_category, want_priority = task.expected.split(\"/\")\n    raise ValueError('boom')")
    out = project / "run"
    res = run_cli("eval", "ticket-triage", "--out", str(out), "--quiet", "--concurrency", "1", cwd=project)
    assert res.code == 2
    line = scorer.read_text().splitlines().index("    raise ValueError('boom')") + 1
    assert f"eval_suites/ticket-triage/scorer.py:{line}:" in res.err
    assert "ValueError" in res.err and "boom" in res.err and "val-01" in res.err
    assert not out.exists()


def test_out_directory_that_is_not_a_run(project):
    out = project / "somewhere"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    res = run_cli("eval", "ticket-triage", "--out", str(out), "--quiet", cwd=project)
    assert res.code == 2 and "not a run directory" in res.err
    assert (out / "notes.txt").read_text() == "mine"


def test_validate_lists_every_problem_at_once(project):
    edit(project / SUITE / "suite.yaml", "type: python", "type: bleu")
    val = project / SUITE / "val.jsonl"
    val.write_text(val.read_text() + "{broken\n")
    edit(project / "skills/ticket-triage/SKILL.md", "name: ticket-triage", "name: -bad-")
    res = run_cli("validate", cwd=project)
    assert res.code == 2
    assert "SKILL.md:1" in res.err and "scorer: unknown scorer 'bleu'" in res.err
    assert "3 problem(s) found" in res.err


def test_validate_reports_all_suite_problems(project):
    val = project / SUITE / "val.jsonl"
    val.write_text(val.read_text() + "{broken\n" + json.dumps({"id": "train-01", "input": "x"}) + "\n")
    res = run_cli("validate", cwd=project)
    assert res.code == 2
    assert "val.jsonl:13: not valid JSON" in res.err and "val.jsonl:14" in res.err and "leakage" in res.err


def test_trigger_tasks_need_a_boolean_and_both_kinds(project):
    val = project / SUITE / "val.jsonl"
    lines = val.read_text().splitlines()
    first = json.loads(lines[0])
    lines[0] = json.dumps({**first, "should_trigger": "yes"})
    val.write_text("\n".join(lines) + "\n")
    res = run_cli("validate", cwd=project)
    wrong = f'val.jsonl:1: task {first["id"]!r}: "should_trigger" must be true or false, got "yes"'
    assert res.code == 2 and wrong in res.err
    lines[0] = json.dumps({**first, "should_trigger": True})
    val.write_text("\n".join(lines) + "\n")
    res = run_cli("validate", cwd=project)
    assert res.code == 2 and "every trigger task says should_trigger: true; add tasks with should_trigger: false" in res.err
    lines[1] = json.dumps({**json.loads(lines[1]), "should_trigger": False})
    val.write_text("\n".join(lines) + "\n")
    res = run_cli("validate", cwd=project)  # both kinds now, but a chat rollout cannot say whether the skill was read
    assert res.code == 2 and "need an environment that records whether the agent consulted the skill" in res.err
    assert "environment 'chat' does not" in res.err
    evaluated = run_cli("eval", "ticket-triage", "--split", "val", cwd=project)
    assert evaluated.code == 2 and "environment 'chat' does not" in evaluated.err  # before any call
    assert not (project / ".skillopt").exists() or not list((project / ".skillopt").rglob("results.jsonl"))


def test_validate_ok(project):
    res = run_cli("validate", cwd=project)
    assert res.code == 0 and "1 skill(s)" in res.out


def test_init_scaffolds_and_refuses_to_overwrite(tmp_path):
    res = run_cli("init", str(tmp_path))
    assert res.code == 0
    for rel in ("skillopt.yml", "skills/ticket-triage/SKILL.md", "eval_suites/ticket-triage/suite.yaml",
                "skills/sales-analysis/SKILL.md", "eval_suites/sales-analysis/suite.yaml",
                "eval_suites/sales-analysis/data/rates.csv", "skills/release-notes/SKILL.md",
                "eval_suites/release-notes/siblings/commit-messages/SKILL.md", ".github/workflows/skillopt.yml"):
        assert (tmp_path / rel).is_file(), rel
    validated = run_cli("validate", cwd=tmp_path)
    assert validated.code == 0 and "3 skill(s)" in validated.out, validated.err
    before = (tmp_path / "skillopt.yml").read_text()
    (tmp_path / "skillopt.yml").write_text(before + "# mine\n")
    again = run_cli("init", str(tmp_path))
    assert again.code == 2 and "refusing to overwrite" in again.err
    assert (tmp_path / "skillopt.yml").read_text().endswith("# mine\n")


def test_repository_example_is_what_init_writes():
    """The repository's own skillopt.yml, skills/ and eval_suites/ are the scaffold, byte for byte."""
    for rel, content in scaffold_files().items():
        if rel.startswith(".github/"):
            continue
        assert (REPO / rel).read_bytes() == content, rel


def test_example_suite_has_enough_disjoint_tasks():
    suite = load_suite(REPO / SUITE)
    sizes = {name: len(tasks) for name, tasks in suite.splits.items()}
    assert set(sizes) == {"train", "val", "test"} and sum(sizes.values()) >= 30


def test_skill_parsing():
    skill = parse_skill(
        "---\nname: demo\ndescription: Does things.\n---\n# Demo\n"
        "<!-- skillopt:protected:start durable -->\nkeep\n<!-- skillopt:protected:end durable -->\n",
        path="skills/demo/SKILL.md",
    )
    assert skill.name == "demo" and skill.body.startswith("# Demo")
    assert [r.name for r in skill.protected] == ["durable"]
    assert "keep" in skill.text[skill.protected[0].start:skill.protected[0].end]
    assert len(skill.hash) == 64 and skill.tokens > 0
    with pytest.raises(InputError, match="no end marker"):
        parse_skill("<!-- skillopt:protected:start -->\nx\n", path="s.md")
    # Soft Agent Skills rules are warnings on the record, not errors (agent tools load these skills).
    assert "differs from its folder 'demo'" in parse_skill("---\nname: other\n---\nx", path="skills/demo/SKILL.md").warnings[0]
    assert "1024" in parse_skill("---\ndescription: " + "x" * 1100 + "\n---\n", path="s.md").warnings[0]
    with pytest.raises(InputError, match="name 'a/b' contains '/'"):
        parse_skill("---\nname: a/b\n---\nx", path="s.md")
    with pytest.raises(InputError, match="no closing"):
        parse_skill("---\nname: x\n", path="s.md")


def test_skill_directory_resolves_to_skill_md(tmp_path):
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo/SKILL.md").write_text("# hi\n")
    assert load_skill(tmp_path / "demo").name == "demo"


def test_token_estimate_is_plausible():
    # ~1.3 tokens per English word on common tokenizers
    text = "Read the ticket and the customer's plan, then decide its category and its priority."
    assert 14 <= estimate_tokens(text) <= 24


def test_cache_modes_are_defined_once_and_match_the_schema():
    from skillopt_ci.core.cache_modes import CACHE_MODES

    schema = json.loads((REPO / "skillopt_ci/inputs/schemas/config.schema.json").read_text())
    enum = schema["properties"]["cache"]["properties"]["mode"]["enum"]
    assert tuple(m for m in enum if m is not False) == CACHE_MODES
    eval_help = run_cli("eval", "--help", env={"COLUMNS": "200"}).out
    assert "[" + "|".join(CACHE_MODES) + "]" in eval_help


def png(rgb: tuple[int, int, int]) -> bytes:
    """A valid 1×1 PNG of one colour (model APIs refuse malformed images)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(bytes([0, *rgb])))
            + chunk(b"IEND", b""))


def set_task_fields(project: Path, line: int, **fields) -> None:
    """Add fields to the task on ``line`` (1-based) of the val split."""
    val = project / SUITE / "val.jsonl"
    lines = val.read_text().splitlines()
    lines[line - 1] = json.dumps({**json.loads(lines[line - 1]), **fields})
    val.write_text("\n".join(lines) + "\n")


def test_task_files_and_images_in_subfolders_are_part_of_the_suite_hash(project):
    images = project / SUITE / "media" / "shots"
    images.mkdir(parents=True)
    (images / "screen.png").write_bytes(png((255, 0, 0)))
    (project / SUITE / "data").mkdir()
    (project / SUITE / "data" / "orders.csv").write_text("id,total\n1,9.5\n")
    before = load_suite(project / SUITE).hash
    set_task_fields(project, 2, images=["media/shots/screen.png"], files={"orders.csv": "data/orders.csv"})
    with_refs = load_suite(project / SUITE)
    assert with_refs.hash != before
    (images / "screen.png").write_bytes(png((0, 0, 255)))
    assert load_suite(project / SUITE).hash != with_refs.hash
    (project / SUITE / "data" / "orders.csv").write_text("id,total\n1,9.75\n")
    changed_csv = load_suite(project / SUITE).hash
    assert changed_csv not in (with_refs.hash, before)
    # A file no task references is not part of the suite.
    (project / SUITE / "media" / "unused.png").write_bytes(png((1, 2, 3)))
    assert load_suite(project / SUITE).hash == changed_csv


@pytest.mark.parametrize("field", ["images", "files"])
def test_a_changed_image_invalidates_a_resumed_run(project, field):
    (project / SUITE / "img").mkdir()
    (project / SUITE / "img" / "shot.png").write_bytes(png((255, 0, 0)))
    set_task_fields(project, 1, **{field: "img/shot.png"})
    out = project / "run"
    assert run_cli("eval", "ticket-triage", "--out", str(out), "--quiet", cwd=project).code == 0
    again = run_cli("eval", "ticket-triage", "--out", str(out), "--quiet", cwd=project)
    assert again.code == 0, again.err  # unchanged: resumes (nothing left to run)
    (project / SUITE / "img" / "shot.png").write_bytes(png((0, 255, 0)))
    res = run_cli("eval", "ticket-triage", "--out", str(out), "--quiet", cwd=project)
    assert res.code == 2
    assert "holds a different run (suite_hash differ)" in res.err


@pytest.mark.parametrize(("fields", "message"), [
    ({"images": ["img/missing.png"]}, "task 'val-03': images 'img/missing.png' does not exist in the suite directory"),
    ({"files": "../train.jsonl"}, "task 'val-03': files path '../train.jsonl' leaves the suite directory"),
    ({"files": {"data.csv": "/etc/hostname"}}, "task 'val-03': files path '/etc/hostname' leaves the suite directory"),
    ({"files": {"../../out.csv": "scorer.py"}}, "task 'val-03': files path '../../out.csv' leaves the suite directory"),
    ({"images": 7}, "task 'val-03': 'images' must be a path, a list of paths or a mapping of paths"),
    ({"files": ["ok.txt", 3]}, "task 'val-03': 'files' must be a path, a list of paths or a mapping of paths"),
    ({"images": ["scorer.py"]}, "task 'val-03': images 'scorer.py' is not PNG, JPEG, GIF or WebP"),
])
def test_a_bad_task_file_reference_is_named_at_its_line(project, fields, message):
    set_task_fields(project, 3, **fields)
    err = eval_fails(project)
    assert f"val.jsonl:3: {message}" in err.splitlines()[0]
    res = run_cli("validate", cwd=project)
    assert res.code == 2 and f"val.jsonl:3: {message}" in res.err


def test_a_task_file_linked_from_outside_the_suite_is_refused(project, tmp_path):
    import os

    (tmp_path / "private.csv").write_text("secret\n")
    os.symlink(tmp_path / "private.csv", project / SUITE / "linked.csv")
    set_task_fields(project, 4, files=["linked.csv"])
    err = eval_fails(project)
    assert "val.jsonl:4: task 'val-04': files 'linked.csv' leaves the suite directory" in err


def test_image_suffixes_are_the_environments_image_types():
    from skillopt_ci.envs.base import IMAGE_TYPES
    from skillopt_ci.inputs.suite import IMAGE_SUFFIXES

    assert set(IMAGE_SUFFIXES) == set(IMAGE_TYPES)
