"""``skillopt-ci gate``, ``compare`` and ``merge`` on real git repositories with the scripted model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from helpers.cli import run_cli
from helpers.project import write_project
from helpers.repo import (
    ACCOUNT_RULE,
    BETTER_RULES,
    BILLING_RULE,
    BUG_RULE,
    PRIORITY_RULES,
    SKILL,
    commit_on_branch,
    gate_json,
    git,
    make_repo,
    skill_text,
)


def test_regressing_pr_fails_with_details(tmp_path, server):
    root = make_repo(tmp_path, server.openai_base_url)
    commit_on_branch(root, "worse", {SKILL: skill_text(root).replace(BUG_RULE, "").replace(ACCOUNT_RULE, "").replace(BILLING_RULE, "")})
    out = tmp_path / "gate"
    res = run_cli("gate", "--base", "main", "--head", "worse", "--out", str(out), "--quiet", cwd=root)
    assert res.code == 1, res.err
    assert "ticket-triage" in res.out and "regressed (fails)" in res.out
    data = gate_json(out)
    skill = data["skills"][0]
    assert skill["status"] == "modified" and skill["verdict"] == "regressed" and skill["failed"]
    c = skill["comparison"]
    assert c["delta"] < 0 and c["ci"][1] < 0 and c["regressed"] >= 3 and c["improved"] == 0
    assert c["n_paired"] == 12
    report = (out / "report.md").read_text()
    assert "## skillopt-ci gate: ❌ failed" in report
    assert "| ticket-triage |" in report and "🔴 regressed" in report
    assert "<details><summary>ticket-triage: tasks that lost the most" in report
    assert "To merge anyway, add the label `skillopt:allow-regression`" in report
    # Both sides' run directories are kept, with the base skill as it was at main.
    assert (out / "ticket-triage/base/skill.md").read_text() == git(root, "show", f"main:{SKILL}") + "\n"
    assert BUG_RULE not in (out / "ticket-triage/head/skill.md").read_text()


def test_improving_pr_passes(tmp_path, server):
    root = make_repo(tmp_path, server.openai_base_url)
    text = skill_text(root).replace(BUG_RULE, BETTER_RULES).replace("- The default priority is P3.\n",
                                                                     PRIORITY_RULES + "- The default priority is P3.\n")
    commit_on_branch(root, "better", {SKILL: text})
    out = tmp_path / "gate"
    res = run_cli("gate", "--base", "main", "--head", "better", "--out", str(out), "--quiet", cwd=root)
    assert res.code == 0, res.err
    skill = gate_json(out)["skills"][0]
    assert skill["verdict"] == "improved" and not skill["failed"]
    assert skill["comparison"]["head_mean"] > skill["comparison"]["base_mean"]
    assert "✅ passed" in (out / "report.md").read_text()


def test_no_skill_changed(tmp_path, server):
    root = make_repo(tmp_path, server.openai_base_url)
    commit_on_branch(root, "docs", {"README.md": "hello\n"})
    res = run_cli("gate", "--base", "main", "--head", "docs", "--out", str(tmp_path / "g"), "--quiet", cwd=root)
    assert res.code == 0
    assert server.call_count == 0
    assert gate_json(tmp_path / "g")["verdict"] == "skipped"
    assert "no configured skill or suite changed" in res.out


def test_suite_change_reevaluates_the_skill(tmp_path, server):
    root = make_repo(tmp_path, server.openai_base_url)
    suite_yaml = root / "eval_suites/ticket-triage/suite.yaml"
    commit_on_branch(root, "suite", {str(suite_yaml.relative_to(root)): suite_yaml.read_text() + "# tweak\n"})
    res = run_cli("gate", "--base", "main", "--head", "suite", "--out", str(tmp_path / "g"), "--quiet", cwd=root)
    assert res.code == 0, res.err
    skill = gate_json(tmp_path / "g")["skills"][0]
    assert skill["status"] == "suite-changed" and skill["verdict"] == "unchanged"
    assert skill["comparison"]["delta"] == 0


def test_new_and_deleted_skills(tmp_path, server):
    root = make_repo(tmp_path, server.openai_base_url, gate={"min_score": 0.9})
    config = yaml.safe_load((root / "skillopt.yml").read_text())
    config["skills"] = [{"path": "skills/newbie/SKILL.md", "suite": "eval_suites/ticket-triage"}]
    commit_on_branch(root, "swap", {
        "skillopt.yml": yaml.safe_dump(config),
        "skills/newbie/SKILL.md": "---\nname: newbie\n---\n# Triage\n\nAnswer with only category/priority.\n"
                                  '- Otherwise the category is question.\n',
        SKILL: None,
    })
    out = tmp_path / "g"
    res = run_cli("gate", "--base", "main", "--head", "swap", "--out", str(out), "--quiet", cwd=root)
    skills = {s["name"]: s for s in gate_json(out)["skills"]}
    assert skills["ticket-triage"]["verdict"] == "deleted" and not skills["ticket-triage"]["failed"]
    assert skills["newbie"]["verdict"] == "new" and skills["newbie"]["base"] is None
    # A new skill is judged only against the absolute minimum: it scores well below 0.9.
    assert skills["newbie"]["failed"] and "below the minimum 0.900" in skills["newbie"]["reason"]
    assert res.code == 1
    assert server.call_count == 12  # head only; the deleted skill is not evaluated


def test_renamed_skill_is_compared_with_its_old_file(tmp_path, server):
    root = make_repo(tmp_path, server.openai_base_url)
    config = yaml.safe_load((root / "skillopt.yml").read_text())
    config["skills"] = [{"path": "skills/triage/SKILL.md", "suite": "eval_suites/ticket-triage"}]
    commit_on_branch(root, "rename", {
        "skillopt.yml": yaml.safe_dump(config),
        "skills/triage/SKILL.md": skill_text(root).replace("name: ticket-triage", "name: triage"),
        SKILL: None,
    })
    res = run_cli("gate", "--base", "main", "--head", "rename", "--out", str(tmp_path / "g"), "--quiet", cwd=root)
    assert res.code == 0, res.err
    [skill] = gate_json(tmp_path / "g")["skills"]
    assert skill["status"] == "modified" and skill["base_path"] == SKILL and skill["verdict"] == "unchanged"


def test_second_push_costs_only_the_head_side(tmp_path, server):
    root = make_repo(tmp_path, server.openai_base_url)
    commit_on_branch(root, "pr", {SKILL: skill_text(root).replace(BUG_RULE, "")})
    assert run_cli("gate", "--base", "main", "--head", "pr", "--out", str(tmp_path / "g1"), "--quiet", cwd=root).code == 0
    assert server.call_count == 24
    git(root, "checkout", "-q", "pr")
    (root / SKILL).write_text(skill_text(root).replace(ACCOUNT_RULE, "").replace(BILLING_RULE, ""))
    git(root, "commit", "-q", "-am", "second push")
    assert run_cli("gate", "--base", "main", "--head", "pr", "--out", str(tmp_path / "g2"), "--quiet", cwd=root).code == 1
    assert server.call_count == 36  # the base side came from the response cache


def test_gate_on_working_tree_by_default(tmp_path, server):
    root = make_repo(tmp_path, server.openai_base_url)
    (root / SKILL).write_text(skill_text(root).replace(BUG_RULE, "").replace(ACCOUNT_RULE, "").replace(BILLING_RULE, ""))
    res = run_cli("gate", "--out", str(tmp_path / "g"), "--quiet", cwd=root)
    assert res.code == 1, res.err
    data = gate_json(tmp_path / "g")
    assert data["base_ref"] == "main" and data["head_ref"] == "WORKTREE"


def test_unknown_ref_is_bad_input(tmp_path, server):
    root = make_repo(tmp_path, server.openai_base_url)
    res = run_cli("gate", "--base", "main", "--head", "no-such-branch", "--quiet", cwd=root)
    assert res.code == 2 and "unknown git ref 'no-such-branch'" in res.err and "fetch" in res.err


def test_suite_without_val_split(tmp_path, server):
    root = make_repo(tmp_path, server.openai_base_url)
    (root / "eval_suites/ticket-triage/val.jsonl").rename(root / "eval_suites/ticket-triage/dev.jsonl")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "no val")
    commit_on_branch(root, "pr", {SKILL: skill_text(root).replace(BUG_RULE, "")})
    res = run_cli("gate", "--base", "main", "--head", "pr", "--quiet", cwd=root)
    assert res.code == 2 and "no 'val' split" in res.err


def test_not_a_git_repository(tmp_path, server):
    project = write_project(tmp_path / "p", server.openai_base_url)
    res = run_cli("gate", "--base", "main", "--quiet", cwd=project)
    assert res.code == 2 and "not a git repository" in res.err and "unknown git ref" not in res.err


def test_compare_two_files(tmp_path, server):
    root = write_project(tmp_path / "p", server.openai_base_url)
    worse = root / "worse.md"
    worse.write_text(skill_text(root).replace(BUG_RULE, "").replace(ACCOUNT_RULE, "").replace(BILLING_RULE, ""))
    res = run_cli("compare", SKILL, "worse.md", "--suite", "eval_suites/ticket-triage", "--out", str(tmp_path / "c"),
                  "--quiet", cwd=root)
    assert res.code == 1, res.err
    skill = gate_json(tmp_path / "c")["skills"][0]
    assert skill["verdict"] == "regressed"
    same = run_cli("compare", SKILL, SKILL, "--suite", "eval_suites/ticket-triage", "--out", str(tmp_path / "s"),
                   "--quiet", cwd=root)
    assert same.code == 0 and gate_json(tmp_path / "s")["skills"][0]["verdict"] == "unchanged"


def _strip_timing(data):
    if isinstance(data, dict):
        return {k: _strip_timing(v) for k, v in data.items()
                if k not in ("wall_time_s", "cache_hits", "spent_usd", "shard", "latency_s", "cached")}
    if isinstance(data, list):
        return [_strip_timing(v) for v in data]
    return data


def test_sharded_gate_merges_to_the_single_run_report(tmp_path, server):
    root = make_repo(tmp_path, server.openai_base_url, cache={"mode": "off"})
    commit_on_branch(root, "pr", {SKILL: skill_text(root).replace(BUG_RULE, "").replace(ACCOUNT_RULE, "").replace(BILLING_RULE, "")})
    single = tmp_path / "single"
    assert run_cli("gate", "--base", "main", "--head", "pr", "--out", str(single), "--quiet", cwd=root).code == 1
    shards = []
    for i in (1, 2, 3):
        out = tmp_path / f"shard{i}"
        run_cli("gate", "--base", "main", "--head", "pr", "--shard", f"{i}/3", "--out", str(out), "--quiet", cwd=root)
        shards.append(str(out))
        assert gate_json(out)["shard"] == f"{i}/3"
    merged = tmp_path / "merged"
    res = run_cli("merge", *shards, "--out", str(merged), cwd=root)
    assert res.code == 1, res.err  # the merged gate fails like the single run
    assert _strip_timing(gate_json(merged)) == _strip_timing(gate_json(single))
    assert (merged / "report.md").read_text().split("| side |")[0] == (single / "report.md").read_text().split("| side |")[0]


def test_sharded_eval_merges_to_the_single_run_summary(project, tmp_path):
    single = tmp_path / "single"
    assert run_cli("eval", "ticket-triage", "--split", "train", "--out", str(single), "--quiet", cwd=project).code == 0
    shards = []
    for i in (1, 2):
        out = tmp_path / f"s{i}"
        assert run_cli("eval", "ticket-triage", "--split", "train", "--shard", f"{i}/2", "--out", str(out), "--quiet",
                       cwd=project).code == 0
        shards.append(str(out))
    sizes = [json.loads((Path(s) / "summary.json").read_text())["n_tasks"] for s in shards]
    assert sum(sizes) == 18 and all(sizes)
    res = run_cli("merge", *shards, "--out", str(tmp_path / "m"), cwd=project)
    assert res.code == 0, res.err
    merged = json.loads((tmp_path / "m/summary.json").read_text())
    assert _strip_timing(merged) == _strip_timing(json.loads((single / "summary.json").read_text()))


def test_merge_refuses_shards_of_different_runs(project, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    run_cli("eval", "ticket-triage", "--shard", "1/2", "--out", str(a), "--quiet", cwd=project)
    run_cli("eval", "ticket-triage", "--split", "test", "--shard", "2/2", "--out", str(b), "--quiet", cwd=project)
    res = run_cli("merge", str(a), str(b), "--out", str(tmp_path / "m"), cwd=project)
    assert res.code == 2 and "different run" in res.err and "split" in res.err


def test_bad_shard_spec(project):
    res = run_cli("eval", "ticket-triage", "--shard", "3/2", cwd=project)
    assert res.code == 2 and "i/n" in res.err


@pytest.mark.parametrize("spec", ["1/1", "2/5"])
def test_shards_partition_the_tasks(spec):
    from skillopt_ci.core.shard import Shard, parse_shard
    from skillopt_ci.core.task import Task

    tasks = [Task(id=f"t{i}", input=i) for i in range(200)]
    n = parse_shard(spec).count
    slices = [Shard(i, n).select(tasks) for i in range(1, n + 1)]
    assert sorted(t.id for s in slices for t in s) == sorted(t.id for t in tasks)
    # Adding tasks never moves an existing task to another shard.
    more = tasks + [Task(id=f"x{i}", input=i) for i in range(50)]
    assert all({t.id for t in s} <= {t.id for t in Shard(i, n).select(more)} for i, s in enumerate(slices, start=1))


def _compare_runs(root: Path) -> list[Path]:
    return sorted((root / ".skillopt/runs").glob("compare-*"))


def test_compare_after_editing_a_skill_evaluates_the_new_content(tmp_path, server):
    root = write_project(tmp_path / "p", server.openai_base_url)
    head = root / "head.md"
    head.write_text(skill_text(root))
    args = ("compare", SKILL, "head.md", "--suite", "eval_suites/ticket-triage", "--quiet")
    first = run_cli(*args, cwd=root)
    assert first.code == 0, first.err
    edited = skill_text(root).replace(BUG_RULE, "").replace(ACCOUNT_RULE, "").replace(BILLING_RULE, "")
    head.write_text(edited)
    second = run_cli(*args, cwd=root)
    assert second.code == 1, second.err
    runs = _compare_runs(root)
    assert len(runs) == 2  # one run per content, named by it
    new = next(r for r in runs if (r / "ticket-triage/head/skill.md").read_text() == edited)
    assert gate_json(new)["skills"][0]["verdict"] == "regressed"
    report = (new / "report.md").read_text()
    assert report.startswith("## skillopt-ci compare: ") and "skillopt-ci gate" not in report
    assert "To merge anyway" not in report and "head.md" in report.splitlines()[2]
    calls = server.call_count
    again = run_cli(*args, cwd=root)  # unchanged content: the same run resumes, nothing is re-run
    assert again.code == 1 and server.call_count == calls and _compare_runs(root) == runs


def test_compare_fresh_starts_an_explicit_run_over(tmp_path, server):
    root = write_project(tmp_path / "p", server.openai_base_url)
    head = root / "head.md"
    head.write_text(skill_text(root))
    args = ("compare", SKILL, "head.md", "--suite", "eval_suites/ticket-triage", "--out", str(tmp_path / "c"), "--quiet")
    assert run_cli(*args, cwd=root).code == 0
    head.write_text(skill_text(root).replace(BUG_RULE, "").replace(ACCOUNT_RULE, "").replace(BILLING_RULE, ""))
    stale = run_cli(*args, cwd=root)
    assert stale.code == 2 and "different run" in stale.err and "--fresh" in stale.err
    fresh = run_cli(*args, "--fresh", cwd=root)
    assert fresh.code == 1, fresh.err
    assert gate_json(tmp_path / "c")["skills"][0]["verdict"] == "regressed"


def test_gate_on_an_edited_working_tree_gets_a_new_run(tmp_path, server):
    root = make_repo(tmp_path, server.openai_base_url)
    (root / SKILL).write_text(skill_text(root).replace(BUG_RULE, ""))
    first = run_cli("gate", "--quiet", cwd=root)
    assert first.code == 0, first.err
    (root / SKILL).write_text(skill_text(root).replace(ACCOUNT_RULE, "").replace(BILLING_RULE, ""))
    second = run_cli("gate", "--quiet", cwd=root)
    assert second.code == 1, second.err
    runs = sorted((root / ".skillopt/runs").glob("gate-*"))
    assert len(runs) == 2
    calls = server.call_count
    assert run_cli("gate", "--quiet", cwd=root).code == 1 and server.call_count == calls
    again = run_cli("gate", "--fresh", "--quiet", "--cache", "off", cwd=root)
    assert again.code == 1 and server.call_count == calls + 24


def test_soft_skill_warnings_reach_the_gate_report_without_failing_it(tmp_path, server):
    root = make_repo(tmp_path, server.openai_base_url)
    long = "Sort support tickets. " + "d" * 1100
    commit_on_branch(root, "long", {SKILL: skill_text(root).replace(
        "description: Sort customer support tickets", f"description: {long} Sort customer support tickets")})
    out = tmp_path / "g"
    res = run_cli("gate", "--base", "main", "--head", "long", "--out", str(out), "--quiet", cwd=root)
    assert res.code == 0, res.err
    [skill] = gate_json(out)["skills"]
    assert skill["warnings"] and "limit is 1024" in skill["warnings"][0]
    assert "(warning)" in (out / "report.md").read_text() and "limit is 1024" in (out / "report.md").read_text()
    assert run_cli("gate", "--base", "main", "--head", "long", "--out", str(tmp_path / "s"), "--strict",
                   "--quiet", cwd=root).code == 2


def test_a_new_skill_merged_from_incomplete_shards_is_inconclusive(tmp_path, server):
    root = make_repo(tmp_path, server.openai_base_url, gate={"min_score": 0.1})
    config = yaml.safe_load((root / "skillopt.yml").read_text())
    config["skills"].append({"path": "skills/newbie/SKILL.md", "suite": "eval_suites/ticket-triage"})
    commit_on_branch(root, "new", {"skillopt.yml": yaml.safe_dump(config),
                                   "skills/newbie/SKILL.md": skill_text(root).replace("ticket-triage", "newbie")})
    shards = [str(tmp_path / f"s{i}") for i in (1, 2)]
    for i, out in enumerate(shards, start=1):
        run_cli("gate", "--base", "main", "--head", "new", "--shard", f"{i}/3", "--out", out, "--quiet", cwd=root)
    assert gate_json(Path(shards[0]))["skills"][0]["verdict"] == "new"  # each shard alone is whole
    res = run_cli("merge", *shards, "--out", str(tmp_path / "m"), cwd=root)
    [skill] = gate_json(tmp_path / "m")["skills"]
    assert skill["verdict"] == "inconclusive" and "not merged" in skill["reason"], skill["reason"]
    assert res.code == 3 and res.err.startswith("inconclusive")
