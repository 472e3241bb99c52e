"""The reusable sharded workflow's jobs, run for real: each shard job is ``skillopt-ci action`` with
the input ``shard`` against the scripted model, its run directories are copied the way
download-artifact lays them out, and the merge job is ``skillopt-ci action`` with ``shards-path``
against the fake GitHub."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from helpers.action import PR
from helpers.cli import run_cli
from helpers.paths import REPO
from helpers.project import write_project
from helpers.repo import ACCOUNT_RULE, BETTER_RULES, BILLING_RULE, BUG_RULE, SKILL
from skillopt_ci.core.shard import Shard
from skillopt_ci.github.publisher import MARKER

VAL = REPO / "skillopt_ci/inputs/example/eval_suites/ticket-triage/val.jsonl"


def val_ids() -> list[str]:
    return [json.loads(line)["id"] for line in VAL.read_text().splitlines() if line.strip()]


def original() -> str:
    return (REPO / SKILL).read_text()


def regressing_text() -> str:
    return original().replace(BUG_RULE, "").replace(ACCOUNT_RULE, "").replace(BILLING_RULE, "")


def run_shards(pr: PR, n: int, skip: tuple[int, ...] = (), **env: str) -> Path:
    """Run shard jobs 1..n (all but ``skip``) and lay their run directories out as download-artifact
    does: one folder per artifact, holding the uploaded directory's contents."""
    downloaded = pr.tmp / "downloaded"
    for i in range(1, n + 1):
        if i in skip:
            continue
        (pr.tmp / "output").write_text("")
        res = pr.run(SKILLOPT_SHARD=f"{i}/{n}", **env)
        assert res.code == 0, res.err + res.out
        assert pr.outputs()["verdict"] == "shard"
        [run_dir] = pr.outputs()["run-dirs"].splitlines()
        shutil.copytree(run_dir, downloaded / f"skillopt-shard-{i}")
    return downloaded


def merge(pr: PR, downloaded: Path, n: int, **env: str):
    for name in ("output", "summary"):
        (pr.tmp / name).write_text("")
    return pr.run(SKILLOPT_SHARDS_PATH=str(downloaded), SKILLOPT_SHARDS=str(n), **env)


def rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ticket-triage")]


def test_merged_gate_posts_what_the_single_job_posts(tmp_path, fake, server):
    single = PR(tmp_path / "single", fake, server, {SKILL: regressing_text()}, number=1)
    assert single.run().code == 1
    [single_comment] = single.comments()

    pr = PR(tmp_path / "sharded", fake, server, {SKILL: regressing_text(), "NOTES.md": "sharded\n"}, number=2)
    writes = len(fake.writes())
    downloaded = run_shards(pr, 3)
    assert len(fake.writes()) == writes  # the shard jobs posted nothing
    assert "shard 3/3 evaluated" in pr.summary and "merge job reports the verdict" in pr.summary
    res = merge(pr, downloaded, 3)
    assert res.code == 1, res.err + res.out
    [comment] = pr.comments()
    assert comment["body"].startswith(MARKER) and "## skillopt-ci gate: ❌ failed" in comment["body"]
    assert rows(comment["body"]) == rows(single_comment["body"])  # the same scores, Δ, CI and counts
    assert "incomplete" not in comment["body"].lower()
    [check] = fake.check_runs_for(pr.head_sha)
    assert check["conclusion"] == "failure" and check["output"]["title"] == "A skill regressed"
    assert check["output"]["annotations"][0]["path"] == SKILL
    assert rows(pr.summary) == rows(single_comment["body"])
    outputs = pr.outputs()
    assert outputs["verdict"] == "failed" and outputs["comment-url"] == comment["html_url"]
    merged = Path(outputs["run-dirs"])
    assert merged.name == f"gate-pr2-{pr.head_sha[:12]}" and (merged / "report.html").is_file()
    gate = json.loads((merged / "gate.json").read_text())
    assert gate["shard"] is None and gate["skills"][0]["head"]["complete"] is True


def pick_small_shard() -> tuple[int, int, list[str]]:
    """A shard count n and a shard holding at most a fifth of the val tasks: without it, the rest
    still covers the 80 % a decision needs, so only the merge can say it is incomplete."""
    ids = val_ids()
    for n in range(3, 13):
        for k in range(1, n + 1):
            held = [i for i in ids if Shard(k, n).holds(i)]
            if 1 <= len(held) <= len(ids) // 5:
                return n, k, held
    raise AssertionError("no small shard")


def test_a_missing_shard_makes_the_merged_gate_incomplete_never_passed(tmp_path, fake, server):
    n, k, missing = pick_small_shard()
    pr = PR(tmp_path, fake, server, {SKILL: original().replace(BUG_RULE, BETTER_RULES)})
    downloaded = run_shards(pr, n, skip=(k,))
    res = merge(pr, downloaded, n)
    assert res.code == 3, res.err + res.out
    [comment] = pr.comments()
    body = comment["body"]
    assert "✅ passed" not in body
    assert f"incomplete: shard {k}/{n} not merged: {len(missing)} of 12 tasks have no results" in body
    assert all(task in body for task in missing)
    [check] = fake.check_runs_for(pr.head_sha)
    assert check["conclusion"] == "failure"
    assert check["output"]["title"] == f"Incomplete: shard {k}/{n} not merged: {len(missing)} of 12 tasks have no results"
    assert pr.outputs()["verdict"] == "inconclusive"
    assert f"shard {k}/{n} not merged" in pr.summary


def test_a_shard_that_failed_midway_counts_as_missing_and_a_regression_still_fails(tmp_path, fake, server):
    n, k, _ = pick_small_shard()
    pr = PR(tmp_path, fake, server, {SKILL: regressing_text()})
    downloaded = run_shards(pr, n)
    (downloaded / f"skillopt-shard-{k}/gate.json").unlink()  # the shard's results, but it never finished
    res = merge(pr, downloaded, n)
    assert res.code == 3
    [comment] = pr.comments()
    assert "❌ failed" in comment["body"] and f"incomplete: shard {k}/{n} not merged" in comment["body"]
    assert pr.outputs()["verdict"] == "failed"


def test_no_shard_at_all_is_an_incomplete_report_not_silence(tmp_path, fake, server):
    pr = PR(tmp_path, fake, server, {SKILL: regressing_text()})
    (tmp_path / "empty").mkdir()
    res = merge(pr, tmp_path / "empty", 4)
    assert res.code == 3
    [comment] = pr.comments()
    assert "💥 incomplete" in comment["body"] and "expected 4 shard(s), 1/4 to 4/4" in comment["body"]
    [check] = fake.check_runs_for(pr.head_sha)
    assert check["conclusion"] == "failure" and check["output"]["title"] == "Incomplete: no shard reported"
    assert pr.outputs()["verdict"] == "error"
    assert "::error title=skillopt-ci merge::incomplete: no shard job uploaded a gate" in res.out


def test_shards_of_another_matrix_are_refused(tmp_path, fake, server):
    pr = PR(tmp_path, fake, server, {SKILL: regressing_text()})
    res = merge(pr, run_shards(pr, 2), 3)
    assert res.code == 2 and "is not of the 3 shards this workflow ran" in res.out
    assert pr.comments() == []


def test_inputs_of_a_sharded_run_are_checked(tmp_path, fake, server):
    pr = PR(tmp_path, fake, server, {SKILL: regressing_text()})
    assert pr.run(SKILLOPT_SHARD="5/4").code == 2
    res = pr.run(SKILLOPT_SHARD="1/2", SKILLOPT_SHARDS_PATH="x")
    assert res.code == 2 and "shard and shards-path are both set" in res.err
    assert pr.run(SKILLOPT_SHARDS_PATH="x", SKILLOPT_SHARDS="many").code == 2
    assert pr.run(SKILLOPT_SHARD="1/2", SKILLOPT_BASELINE="none").code == 2
    assert fake.writes() == []


def test_merged_eval_matches_the_single_job_and_names_a_missing_shard(tmp_path, fake, server):
    single = PR(tmp_path / "single", fake, server, {"README.md": "x\n"}, gate={"min_score": 0.4})
    assert single.run(event_name="schedule", event={}).code == 0
    pr = PR(tmp_path / "sharded", fake, server, {"README.md": "x\n"}, number=2, gate={"min_score": 0.4})
    downloaded = run_shards(pr, 3, event_name="schedule", event={})
    res = merge(pr, downloaded, 3, event_name="schedule", event={})
    assert res.code == 0, res.err + res.out
    assert "## skillopt-ci eval: ✅ 1 skill(s)" in pr.summary
    def scores(text: str) -> list[str]:  # every cell but the wall time
        return [row.rsplit("|", 2)[0] for row in rows(text)]

    assert scores(pr.summary) == scores(single.summary) and scores(pr.summary)
    assert pr.outputs()["verdict"] == "passed" and fake.writes() == []

    shutil.rmtree(downloaded / "skillopt-shard-2")
    missing = [i for i in val_ids() if Shard(2, 3).holds(i)]
    res = merge(pr, downloaded, 3, event_name="schedule", event={})
    assert res.code == 3
    assert "## skillopt-ci eval: ❌ 1 skill(s)" in pr.summary
    assert f"incomplete: shard 2/3 not merged: {len(missing)} of 12 tasks have no results" in pr.summary
    assert "### Incomplete" in pr.summary and all(f"`{t}`" in pr.summary for t in missing)
    assert pr.outputs()["verdict"] == "failed"


def test_cache_key_follows_the_config_the_suites_and_the_shard(tmp_path, server):
    root = write_project(tmp_path / "p", server.openai_base_url)

    def key(*args: str) -> dict[str, str]:
        res = run_cli("cache-key", *args, cwd=root)
        assert res.code == 0, res.err
        return dict(line.split("=", 1) for line in res.out.splitlines())

    first = key("--shard", "2/4")
    assert first["path"] == ".skillopt/cache.sqlite"
    assert first["key"] == first["restore-key"] + "shard2of4" and first["key"].startswith("skillopt-responses-v1-")
    assert key("--shard", "3/4")["restore-key"] == first["restore-key"]
    skill = root / "skills/ticket-triage/SKILL.md"
    skill.write_text(skill.read_text() + "\nMore.\n")
    assert key("--shard", "2/4") == first  # a skill edit keeps the key: responses are keyed by message
    (root / "eval_suites/ticket-triage/val.jsonl").write_text(VAL.read_text().splitlines()[0] + "\n")
    assert key("--shard", "2/4")["key"] != first["key"]
    assert run_cli("cache-key", "--skill", "nope", cwd=root).code == 2
    (root / "skillopt.yml").write_text((root / "skillopt.yml").read_text().replace("mode: read-write", "mode: 'off'"))
    assert key() == {"key": "", "restore-key": "", "path": ""}


def test_a_shard_gate_json_loosened_to_pass_still_fails_the_regression(tmp_path, fake, server):
    """The merge job judges with its own config: editing margin and fail_on in a shard's gate.json
    (and its verdict) changes nothing."""
    pr = PR(tmp_path, fake, server, {SKILL: regressing_text()})
    downloaded = run_shards(pr, 2)
    for gate_file in downloaded.rglob("gate.json"):
        gate = json.loads(gate_file.read_text())
        gate["policy"].update(margin=1.0, fail_on=[], confidence=0.5)
        gate.update(verdict="passed", failed=False)
        for skill in gate["skills"]:
            skill.update(verdict="unchanged", failed=False, task_ids=skill["task_ids"][:1])
        gate_file.write_text(json.dumps(gate))
    res = merge(pr, downloaded, 2)
    assert res.code == 1, res.err + res.out
    [comment] = pr.comments()
    assert "## skillopt-ci gate: ❌ failed" in comment["body"] and "🔴 regressed" in comment["body"]
    assert "beyond 0.00" in comment["body"]  # the job's own margin, not the shard's 1.0
    merged = json.loads((Path(pr.outputs()["run-dirs"]) / "gate.json").read_text())
    assert merged["policy"]["margin"] == 0.0 and merged["policy"]["fail_on"] == ["regressed"]
    assert len(merged["skills"][0]["task_ids"]) == len(val_ids())  # the job's own split, not the shard's list


def test_a_shard_from_another_config_is_refused_naming_it(tmp_path, fake, server):
    pr = PR(tmp_path, fake, server, {SKILL: regressing_text()})
    config = pr.root / "skillopt.yml"
    ours = config.read_text()
    config.write_text(ours + "gate:\n  margin: 0.5\n")  # shard 1 ran from another configuration
    run_shards(pr, 2, skip=(2,))
    config.write_text(ours)
    downloaded = run_shards(pr, 2, skip=(1,))  # the same folder: both shards, as download-artifact lays them
    res = merge(pr, downloaded, 2)
    assert res.code == 2, res.err + res.out
    [line] = [x for x in res.out.splitlines() if x.startswith("::error")]
    assert "skillopt-shard-1" in line and "gate.json" in line and "another configuration" in line
    assert pr.comments() == [] and fake.check_runs_for(pr.head_sha) == []
    assert "another configuration" in pr.summary


def test_a_shard_of_another_suite_version_is_refused_naming_it(tmp_path, fake, server):
    pr = PR(tmp_path, fake, server, {SKILL: regressing_text()})
    downloaded = run_shards(pr, 2)
    for manifest in downloaded.rglob("run.json"):  # every shard agrees, on a suite this job does not have
        manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "suite_hash": "0" * 64}))
    res = merge(pr, downloaded, 2)
    assert res.code == 2, res.err + res.out
    assert "another version of its suite" in res.out and "skillopt-shard-1" in res.out
