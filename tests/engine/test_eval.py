"""``skillopt-ci eval`` end to end: the real OpenAI SDK against the scripted server, real files."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from helpers.cli import run_cli
from helpers.project import write_project
from skillopt_ci.inputs.yamlfile import schema_validator
from skillopt_ci.sim import Fault


def read_results(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]


def test_eval_prints_table_and_writes_run_directory(project, server):
    out = project / "run"
    res = run_cli("eval", "ticket-triage", "--out", str(out), "--quiet", cwd=project)
    assert res.code == 0, res.err
    # The simulated target follows the skill's rules: 3 of 12 val tickets are fully right.
    assert "ticket-triage" in res.out and "0.458" in res.out and "25.0%" in res.out
    summary = json.loads((out / "summary.json").read_text())
    schema_validator("summary.schema.json").validate(summary)
    assert summary["n_tasks"] == 12 and summary["n_results"] == 12 and summary["n_errors"] == 0
    assert summary["mean"] == pytest.approx(0.4583, abs=1e-3)
    lo, hi = summary["ci95"]
    assert lo < summary["mean"] < hi
    assert summary["model"] == {"provider": "openai-compatible", "model": "sim-triage-1",
                                "params": {"temperature": 0}, "base_url": server.openai_base_url}
    # Usage comes from the server's usage fields; cost from the config's price table.
    assert summary["input_tokens"] > 0 and summary["output_tokens"] > 0
    expected_cost = (summary["input_tokens"] * 1.0 + summary["output_tokens"] * 2.0) / 1e6
    assert summary["cost_usd"] == pytest.approx(expected_cost, rel=1e-6)
    results = read_results(out)
    assert len(results) == 12
    for line in results:
        schema_validator("result.schema.json").validate(line)
    wrong = next(r for r in results if not r["passed"])
    assert "should be" in wrong["feedback"]
    assert (out / "skill.md").read_text() == (project / "skills/ticket-triage/SKILL.md").read_text()
    report = (out / "report.md").read_text()
    assert "| ticket-triage |" in report and "Failed tasks (9)" in report
    # The skill is the system message, the rendered template the user message.
    call = server.calls[0]
    assert "You route customer support tickets" in call.request.system
    assert "front matter" not in call.request.system and "name: ticket-triage" not in call.request.system
    assert call.request.last_user.startswith("Triage this support ticket.\n\nPlan: ")


def test_threshold_turns_eval_into_a_check(project):
    below = run_cli("eval", "ticket-triage", "--threshold", "0.9", "--quiet", cwd=project)
    assert below.code == 1
    assert "below the threshold 0.900" in below.err
    above = run_cli("eval", "ticket-triage", "--threshold", "0.4", "--quiet", cwd=project)
    assert above.code == 0
    assert "meets the threshold" in above.err


def test_second_identical_eval_makes_zero_model_calls(project, server, tmp_path):
    first = run_cli("eval", "ticket-triage", "--out", str(tmp_path / "a"), "--quiet", cwd=project)
    assert first.code == 0
    calls = server.call_count
    assert calls == 12
    second = run_cli("eval", "ticket-triage", "--out", str(tmp_path / "b"), "--quiet", cwd=project)
    assert second.code == 0
    assert server.call_count == calls
    a = json.loads((tmp_path / "a/summary.json").read_text())
    b = json.loads((tmp_path / "b/summary.json").read_text())
    assert a["mean"] == b["mean"] and b["cache_hits"] == 12 and a["cache_hits"] == 0
    # Cached results cost nothing now, but the eval's cost is still reported.
    assert b["spent_usd"] == 0 and b["cost_usd"] == pytest.approx(a["cost_usd"])


def test_cache_modes(project, server, tmp_path):
    run_cli("eval", "ticket-triage", "--out", str(tmp_path / "rw"), "--quiet", cwd=project)
    assert server.call_count == 12
    refresh = run_cli("eval", "ticket-triage", "--cache", "refresh", "--out", str(tmp_path / "refresh"), "--quiet", cwd=project)
    assert refresh.code == 0 and server.call_count == 24
    off = run_cli("eval", "ticket-triage", "--cache", "off", "--out", str(tmp_path / "off"), "--quiet", cwd=project)
    assert off.code == 0 and server.call_count == 36
    replay = run_cli("eval", "ticket-triage", "--cache", "replay-only", "--out", str(tmp_path / "replay"), "--quiet", cwd=project)
    assert replay.code == 0 and server.call_count == 36
    # A split never recorded: replay-only refuses to call the model, exit 3, no run left behind.
    miss = run_cli("eval", "ticket-triage", "--split", "test", "--cache", "replay-only",
                   "--out", str(tmp_path / "miss"), "--quiet", cwd=project)
    assert miss.code == 3
    assert "cache miss" in miss.err and "replay-only" in miss.err
    assert server.call_count == 36
    assert not (tmp_path / "miss").exists()


def test_repeats_are_real_samples_not_cache_copies(project, server, tmp_path):
    res = run_cli("eval", "ticket-triage", "--repeats", "3", "--out", str(tmp_path / "r3"), "--quiet", cwd=project)
    assert res.code == 0
    assert server.call_count == 36
    results = read_results(tmp_path / "r3")
    assert sorted({r["repeat"] for r in results}) == [0, 1, 2]


def test_rerun_into_same_directory_resumes_only_missing_pairs(project, server, tmp_path):
    out = tmp_path / "run"
    assert run_cli("eval", "ticket-triage", "--out", str(out), "--cache", "off", "--quiet", cwd=project).code == 0
    lines = (out / "results.jsonl").read_text().splitlines()
    # Pretend the process died after 5 results, the last line torn mid-write.
    (out / "results.jsonl").write_text("\n".join(lines[:5]) + "\n" + lines[5][:20])
    (out / "summary.json").unlink()
    before = server.call_count
    res = run_cli("eval", "ticket-triage", "--out", str(out), "--cache", "off", "--quiet", cwd=project)
    assert res.code == 0, res.err
    assert server.call_count - before == 7
    results = read_results(out)
    assert len(results) == 12 and len({r["task_id"] for r in results}) == 12
    assert json.loads((out / "summary.json").read_text())["mean"] == pytest.approx(0.4583, abs=1e-3)


def test_resume_refuses_a_directory_of_another_run(project, tmp_path):
    out = tmp_path / "run"
    assert run_cli("eval", "ticket-triage", "--out", str(out), "--quiet", cwd=project).code == 0
    res = run_cli("eval", "ticket-triage", "--split", "test", "--out", str(out), "--quiet", cwd=project)
    assert res.code == 2
    assert "different run" in res.err and "split" in res.err and "--fresh" in res.err
    fresh = run_cli("eval", "ticket-triage", "--split", "test", "--out", str(out), "--fresh", "--quiet", cwd=project)
    assert fresh.code == 0
    assert json.loads((out / "summary.json").read_text())["split"] == "test"


def test_provider_errors_become_errored_results_not_zeros(project, server, tmp_path):
    # Two tasks fail even after retries (500 three times each): missing data, not a score of 0.
    failing = {"val-02", "val-05"}
    policy = server.policy

    def plan(request):
        return Fault.server_error() if any(f"#{t}#" in request.last_user for t in failing) else None

    suite = project / "eval_suites/ticket-triage"
    suite_yaml = (suite / "suite.yaml").read_text().replace("Triage this support ticket.", "Triage this support ticket. #{{ id }}#")
    (suite / "suite.yaml").write_text(suite_yaml)
    server.fault_plan = plan
    server.policy = policy
    res = run_cli("eval", "ticket-triage", "--out", str(tmp_path / "run"), "--cache", "off", "--quiet", cwd=project)
    assert res.code == 0, res.err
    summary = json.loads((tmp_path / "run/summary.json").read_text())
    assert summary["n_errors"] == 2 and summary["n_tasks_scored"] == 10
    assert summary["errors_by_kind"] == {"server": 2}
    errored = [r for r in read_results(tmp_path / "run") if r["error"]]
    assert {r["task_id"] for r in errored} == failing
    assert all(r["score"] is None and r["passed"] is None for r in errored)
    # 3 attempts each (1 + max_retries 2) for the failing tasks, 1 for the others.
    assert server.call_count == 10 + 2 * 3
    # The score is the mean over the measured tasks only.
    scored = [r["score"] for r in read_results(tmp_path / "run") if r["score"] is not None]
    assert summary["mean"] == pytest.approx(sum(scored) / len(scored))


def test_retries_recover_from_429_500_and_timeouts(project, server, tmp_path):
    server.inject(Fault.rate_limit(retry_after=0.05), Fault.server_error(), Fault.overloaded(), Fault.drop())
    res = run_cli("eval", "ticket-triage", "--out", str(tmp_path / "run"), "--cache", "off", "--quiet", cwd=project)
    assert res.code == 0, res.err
    summary = json.loads((tmp_path / "run/summary.json").read_text())
    assert summary["n_errors"] == 0 and summary["mean"] == pytest.approx(0.4583, abs=1e-3)
    assert server.call_count == 12 + 4


def test_client_timeout_is_retried(tmp_path, server):
    project = write_project(tmp_path / "p", server.openai_base_url, target={"timeout": 0.5})
    server.inject(Fault.slow(2.0))
    res = run_cli("eval", "ticket-triage", "--out", str(tmp_path / "run"), "--cache", "off", "--quiet",
                  "--concurrency", "1", cwd=project)
    assert res.code == 0, res.err
    summary = json.loads((tmp_path / "run/summary.json").read_text())
    assert summary["n_errors"] == 0 and summary["n_results"] == 12


def test_unreachable_endpoint_aborts_with_exit_3_and_leaves_nothing(tmp_path):
    project = write_project(tmp_path / "p", "http://127.0.0.1:9/v1", target={"max_retries": 0})
    out = tmp_path / "run"
    res = run_cli("eval", "ticket-triage", "--out", str(out), "--quiet", cwd=project)
    assert res.code == 3
    assert "aborted after" in res.err and "connection" in res.err
    assert "check that http://127.0.0.1:9/v1 is reachable" in res.err
    assert not out.exists()


def test_budget_stops_the_run_cleanly(server, tmp_path):
    project = write_project(tmp_path / "p", server.openai_base_url, budgets={"max_tokens": 1500})  # a call reserves ~600
    res = run_cli("eval", "ticket-triage", "--out", str(tmp_path / "run"), "--cache", "off", "--quiet",
                  "--concurrency", "1", cwd=project)
    assert res.code == 3
    assert "token budget reached" in res.err
    summary = json.loads((tmp_path / "run/summary.json").read_text())
    assert summary["complete"] is False and 0 < summary["n_results"] < 12
    assert "Incomplete run" in (tmp_path / "run/report.md").read_text()


def test_json_output(project):
    res = run_cli("eval", "ticket-triage", "--json", "--quiet", cwd=project)
    assert res.code == 0
    data = json.loads(res.out)
    assert data["kind"] == "eval" and data["schema_version"] == 1 and data["split"] == "val"


def test_eval_with_model_flag_and_no_config(tmp_path, server):
    project = write_project(tmp_path / "p", server.openai_base_url)
    (project / "skillopt.yml").unlink()
    res = run_cli("eval", "skills/ticket-triage/SKILL.md", "--suite", "eval_suites/ticket-triage",
                  "--model", "openai-compatible:sim-triage-1", "--base-url", server.openai_base_url, "--quiet",
                  cwd=project)
    assert res.code == 0, res.err
    assert "0.458" in res.out
    # No price for this model, but it is served on this machine: free, and said so once.
    assert "unknown" not in res.out and res.err.count("counted as $0") == 1


def test_non_tty_progress_prints_plain_lines(project):
    res = run_cli("eval", "ticket-triage", cwd=project)
    assert res.code == 0
    progress = [line for line in res.err.splitlines() if line.startswith("eval ticket-triage/val:")]
    assert progress and progress[-1].startswith("eval ticket-triage/val: 12/12 (100%)")
    assert "\r" not in res.err


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600)])
def test_run_files_follow_the_umask(project, umask, mode):
    old = os.umask(umask)
    try:
        res = run_cli("eval", "ticket-triage", "--out", "run", "--quiet", cwd=project)
    finally:
        os.umask(old)
    assert res.code == 0, res.err
    run = project / "run"
    modes = {name: stat.S_IMODE((run / name).stat().st_mode)
             for name in ("run.json", "summary.json", "report.md", "results.jsonl", "skill.md")}
    assert modes == dict.fromkeys(modes, mode)
    assert stat.S_IMODE((run / ".lock").stat().st_mode) == mode
