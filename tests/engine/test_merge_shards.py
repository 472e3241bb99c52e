"""``merge`` refuses duplicated or mismatched shards and reports a missing shard as incomplete."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from helpers.cli import run_cli
from helpers.repo import (
    ACCOUNT_RULE,
    BILLING_RULE,
    BUG_RULE,
    SKILL,
    commit_on_branch,
    gate_json,
    make_repo,
    skill_text,
)
from skillopt_ci.core.shard import Shard

SPLIT = "eval_suites/ticket-triage/train.jsonl"


def eval_shard(project: Path, out: Path, shard: str) -> Path:
    res = run_cli("eval", "ticket-triage", "--split", "train", "--shard", shard, "--out", str(out), "--quiet",
                  cwd=project)
    assert res.code == 0, res.err
    return out


def split_ids(project: Path) -> list[str]:
    return [json.loads(line)["id"] for line in (project / SPLIT).read_text().splitlines() if line.strip()]


def test_merge_refuses_the_same_shard_twice(project, tmp_path):
    one = eval_shard(project, tmp_path / "shard-1", "1/3")
    res = run_cli("merge", str(one), str(one), "--out", str(tmp_path / "m"), cwd=project)
    assert res.code == 2
    assert "the same run directory is given twice" in res.err.splitlines()[0]
    copy = tmp_path / "copy-of-1"
    shutil.copytree(one, copy)
    res = run_cli("merge", str(one), str(copy), "--out", str(tmp_path / "m"), cwd=project)
    assert res.code == 2 and "shard 1/3 is given twice" in res.err.splitlines()[0]
    assert not (tmp_path / "m/summary.json").exists()


def test_merge_refuses_shards_of_different_n(project, tmp_path):
    a = eval_shard(project, tmp_path / "a", "1/2")
    b = eval_shard(project, tmp_path / "b", "2/3")
    res = run_cli("merge", str(a), str(b), "--out", str(tmp_path / "m"), cwd=project)
    assert res.code == 2 and "n differs (3 and 2)" in res.err.splitlines()[0]


def test_merge_refuses_an_unsharded_run_among_shards(project, tmp_path):
    a = eval_shard(project, tmp_path / "a", "1/2")
    whole = tmp_path / "whole"
    assert run_cli("eval", "ticket-triage", "--split", "train", "--out", str(whole), "--quiet", cwd=project).code == 0
    res = run_cli("merge", str(a), str(whole), "--out", str(tmp_path / "m"), cwd=project)
    assert res.code == 2 and "made without --shard" in res.err


def test_merging_two_of_three_eval_shards_is_incomplete(project, tmp_path):
    shards = [eval_shard(project, tmp_path / f"shard-{i}", f"{i}/3") for i in (1, 2)]
    res = run_cli("merge", *map(str, shards), "--out", str(tmp_path / "m"), "--json", cwd=project)
    assert res.code == 3, res.err
    ids = split_ids(project)
    missing = [i for i in ids if Shard(3, 3).holds(i)]
    assert missing  # the premise: shard 3 holds some tasks
    summary = json.loads((tmp_path / "m/summary.json").read_text())
    assert summary["complete"] is False
    assert summary["missing_tasks"] == missing
    assert summary["n_tasks"] == len(ids) == 18
    assert summary["coverage"] == (18 - len(missing)) / 18 < 1
    assert summary["stopped"] == f"shard 3/3 not merged: {len(missing)} of 18 tasks have no results"
    assert json.loads(res.out) == summary
    assert res.err.strip() == f"incomplete: {summary['stopped']}; merge every shard's directory"
    # All three give the complete split.
    third = eval_shard(project, tmp_path / "shard-3", "3/3")
    res = run_cli("merge", *map(str, shards), str(third), "--out", str(tmp_path / "all"), "--json", cwd=project)
    assert res.code == 0, res.err
    whole = json.loads(res.out)
    assert whole["complete"] is True and whole["missing_tasks"] == [] and whole["n_tasks"] == 18


def test_shards_from_before_the_split_was_recorded(project, tmp_path):
    shards = [eval_shard(project, tmp_path / f"shard-{i}", f"{i}/3") for i in (1, 2, 3)]
    for shard in shards:
        manifest = json.loads((shard / "run.json").read_text())
        del manifest["split_task_ids"]
        (shard / "run.json").write_text(json.dumps(manifest))
    res = run_cli("merge", str(shards[0]), str(shards[1]), "--out", str(tmp_path / "m"), cwd=project)
    assert res.code == 2
    assert "shard 3/3 is missing, and run.json does not list the split's tasks" in res.err
    assert "pass every shard" in res.err
    # A complete set still merges: its union is the split.
    res = run_cli("merge", *map(str, shards), "--out", str(tmp_path / "all"), "--json", cwd=project)
    assert res.code == 0, res.err
    assert json.loads(res.out)["n_tasks"] == 18 and json.loads(res.out)["complete"] is True
    # Resuming such a run directory records the list.
    eval_shard(project, shards[0], "1/3")
    assert json.loads((shards[0] / "run.json").read_text())["split_task_ids"] == split_ids(project)


def test_merging_two_of_three_gate_shards_is_inconclusive(tmp_path, server):
    root = make_repo(tmp_path, server.openai_base_url, cache={"mode": "off"})
    commit_on_branch(root, "pr", {SKILL: skill_text(root).replace(BUG_RULE, "").replace(ACCOUNT_RULE, "")
                                 .replace(BILLING_RULE, "")})
    shards = []
    for i in (1, 2, 3):
        out = tmp_path / f"shard{i}"
        run_cli("gate", "--base", "main", "--head", "pr", "--shard", f"{i}/3", "--out", str(out), "--quiet", cwd=root)
        shards.append(str(out))
    dup = run_cli("merge", shards[0], shards[1], shards[0], "--out", str(tmp_path / "dup"), cwd=root)
    assert dup.code == 2 and "given twice" in dup.err
    res = run_cli("merge", shards[0], shards[1], "--out", str(tmp_path / "merged"), cwd=root)
    skill = gate_json(tmp_path / "merged")["skills"][0]
    assert skill["verdict"] == "inconclusive", skill["reason"]
    assert res.code == 3 and res.err.startswith("inconclusive")  # a partial merge never passes
    assert "incomplete: shard 3/3 not merged" in res.err
    assert skill["head"]["complete"] is False and skill["head"]["missing_tasks"]
    # The full set fails like the single run does.
    assert run_cli("merge", *shards, "--out", str(tmp_path / "all"), cwd=root).code == 1


def test_merge_refuses_gate_shards_that_disagree_on_the_policy(tmp_path, server):
    """`merge` has no job config to judge with (a shard may have run with --split or --repeats):
    the shards' policy is used only when every shard states the same one."""
    root = make_repo(tmp_path, server.openai_base_url, cache={"mode": "off"})
    commit_on_branch(root, "pr", {SKILL: skill_text(root).replace(BUG_RULE, "").replace(ACCOUNT_RULE, "")
                                 .replace(BILLING_RULE, "")})
    shards = []
    for i in (1, 2):
        out = tmp_path / f"shard{i}"
        run_cli("gate", "--base", "main", "--head", "pr", "--shard", f"{i}/2", "--out", str(out), "--quiet", cwd=root)
        shards.append(str(out))
    gate = json.loads((Path(shards[1]) / "gate.json").read_text())
    gate["policy"].update(margin=1.0, fail_on=[])  # one shard loosened: the first shard's policy must not win
    (Path(shards[1]) / "gate.json").write_text(json.dumps(gate))
    res = run_cli("merge", *shards, "--out", str(tmp_path / "merged"), cwd=root)
    assert res.code == 2 and "gate policy differs" in res.err and "shard2" in res.err


def test_merge_refuses_an_out_that_is_one_of_its_inputs_and_leaves_it_intact(project, tmp_path):
    one = eval_shard(project, tmp_path / "shard-1", "1/2")
    two = eval_shard(project, tmp_path / "shard-2", "2/2")
    before = {p.name: p.read_bytes() for p in one.iterdir() if p.is_file()}
    for out in (one, one / "merged"):
        res = run_cli("merge", str(one), str(two), "--out", str(out), cwd=project)
        assert res.code == 2, res.err
        assert f"--out {out} is (or overlaps) the input run directory {one}" in res.err.splitlines()[0]
    assert {p.name: p.read_bytes() for p in one.iterdir() if p.is_file()} == before
    assert not (one / "merged").exists()


def test_an_eval_shard_with_no_task_exits_0_and_says_the_slice_is_empty(project, tmp_path):
    n = len(split_ids(project)) * 3
    empty = next(i for i in range(1, n + 1) if not any(Shard(i, n).holds(t) for t in split_ids(project)))
    res = run_cli("eval", "ticket-triage", "--split", "train", "--shard", f"{empty}/{n}", "--out",
                  str(tmp_path / "e"), "--quiet", cwd=project)
    assert res.code == 0, res.err
    assert f"ok: shard {empty}/{n} holds no task of the 'train' split" in res.err
