"""``eval --batch``: the real openai and anthropic SDKs against the scripted server's batch
endpoints give the synchronous scores at the batch price; errored lines are errored rollouts."""

from __future__ import annotations

import json

import pytest
import yaml

from helpers.batch import KEYS, batch_project, journal, results, summary
from helpers.cli import run_cli
from skillopt_ci.inputs.yamlfile import schema_validator
from skillopt_ci.models.pricing import price_for
from skillopt_ci.sim import Fault

PROVIDERS = ("openai", "anthropic", "azure-openai")


def ticket_of(project, task_id: str) -> str:
    """The ticket text of a val task, to recognise its request on the server."""
    for line in (project / "eval_suites/ticket-triage/val.jsonl").read_text().splitlines():
        task = json.loads(line)
        if task["id"] == task_id:
            return task["input"]
    raise KeyError(task_id)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_batch_eval_gives_the_synchronous_scores_at_half_the_price(tmp_path, server, provider):
    project = batch_project(tmp_path / "proj", server, provider)
    sync = run_cli("eval", "ticket-triage", "--out", str(tmp_path / "sync"), "--cache", "off", "--quiet",
                   cwd=project, env=KEYS)
    assert sync.code == 0, sync.err
    assert server.batches.creates == 0
    batch = run_cli("eval", "ticket-triage", "--out", str(tmp_path / "batch"), "--batch", "--quiet",
                    cwd=project, env=KEYS)
    assert batch.code == 0, batch.err
    # One batch for the whole run: one file upload (OpenAI, Azure), one create; 12 lines answered.
    assert server.batches.creates == 1
    assert server.batches.uploads == (0 if provider == "anthropic" else 1)
    assert server.call_count == 24  # 12 synchronous calls, 12 batch lines
    by_task = results(tmp_path / "batch")
    assert {k: r["score"] for k, r in by_task.items()} == {k: r["score"] for k, r in results(tmp_path / "sync").items()}
    s, b = summary(tmp_path / "sync"), summary(tmp_path / "batch")
    assert b["mean"] == s["mean"] and b["n_errors"] == 0
    assert (b["input_tokens"], b["output_tokens"]) == (s["input_tokens"], s["output_tokens"])
    # sim-triage-1 lists at $1 / $2 per million tokens in and out: the batch price is half of it.
    assert s["cost_usd"] == pytest.approx((s["input_tokens"] * 1.0 + s["output_tokens"] * 2.0) / 1e6, abs=1e-6)
    assert b["cost_usd"] == pytest.approx((b["input_tokens"] * 0.5 + b["output_tokens"] * 1.0) / 1e6, abs=1e-6)
    assert b["pricing"] == "batch" and "pricing" not in s
    schema_validator("summary.schema.json").validate(b)
    assert "(batch price)" in batch.out and "(batch price)" not in sync.out
    dollars = f"${b['cost_usd']:.4f}"
    assert f"{dollars} (batch price)" in batch.out
    assert f"{dollars} at the batch price" in (tmp_path / "batch/report.md").read_text()
    entries = journal(tmp_path / "batch")
    assert [e["event"] for e in entries] == ["submitted", "collected"]
    assert entries[0]["provider"] == provider and len(entries[0]["requests"]) == 12


def test_a_cached_batch_run_submits_nothing(tmp_path, server):
    project = batch_project(tmp_path / "proj", server)
    first = run_cli("eval", "ticket-triage", "--out", str(tmp_path / "a"), "--batch", "--quiet", cwd=project, env=KEYS)
    assert first.code == 0, first.err
    again = run_cli("eval", "ticket-triage", "--out", str(tmp_path / "b"), "--batch", "--quiet", cwd=project, env=KEYS)
    assert again.code == 0, again.err
    assert server.batches.creates == 1 and summary(tmp_path / "b")["cache_hits"] == 12
    assert summary(tmp_path / "b")["mean"] == summary(tmp_path / "a")["mean"]


@pytest.mark.parametrize("provider", ("openai", "anthropic"))
def test_errored_lines_are_errored_rollouts_that_a_rerun_sends_again(tmp_path, server, provider):
    project = batch_project(tmp_path / "proj", server, provider)
    failing = {ticket_of(project, "val-02"), ticket_of(project, "val-05")}
    server.fault_plan = lambda request: (Fault.status(400, "Scripted refusal.")
                                         if any(t in request.last_user for t in failing) else None)
    run = tmp_path / "run"
    first = run_cli("eval", "ticket-triage", "--out", str(run), "--batch", "--quiet", cwd=project, env=KEYS)
    assert first.code == 0, first.err  # 10 of 12 measured: enough coverage
    s = summary(run)
    assert s["n_errors"] == 2 and s["errors_by_kind"] == {"bad_request": 2}
    errored = {k[0] for k, r in results(run).items() if r["error"]}
    assert errored == {"val-02", "val-05"}
    assert all("Scripted refusal" in r["error"]["message"] for r in results(run).values() if r["error"])
    assert server.batches.creates == 1  # a 400 is not retried, as in a synchronous run
    # Re-running the same command sends only the two errored requests, in a new batch.
    server.fault_plan = None
    again = run_cli("eval", "ticket-triage", "--out", str(run), "--batch", "--quiet", cwd=project, env=KEYS)
    assert again.code == 0, again.err
    assert server.batches.creates == 2
    assert [len(b.lines) for b in server.batches.batches.values()] == [12, 2]
    assert summary(run)["n_errors"] == 0 and summary(run)["n_results"] == 12
    assert [e["event"] for e in journal(run)] == ["submitted", "collected", "submitted", "collected"]


@pytest.mark.parametrize("provider", ("openai", "anthropic"))
def test_retryable_line_errors_go_into_the_next_batch(tmp_path, server, provider):
    project = batch_project(tmp_path / "proj", server, provider)
    failing = {ticket_of(project, "val-03")}
    failed: set[str] = set()

    def once(request):
        for ticket in failing - failed:
            if ticket in request.last_user:
                failed.add(ticket)
                return Fault.server_error()
        return None

    server.fault_plan = once
    run = tmp_path / "run"
    res = run_cli("eval", "ticket-triage", "--out", str(run), "--batch", "--quiet", cwd=project, env=KEYS)
    assert res.code == 0, res.err
    # The 500 is retried like a synchronous one: the retry is the one line of a second batch.
    assert [len(b.lines) for b in server.batches.batches.values()] == [12, 1]
    assert summary(run)["n_errors"] == 0


def test_batch_refuses_a_provider_without_a_batch_api(tmp_path, server):
    project = batch_project(tmp_path / "proj", server)
    config = project / "skillopt.yml"
    config.write_text(config.read_text().replace("provider: openai", "provider: openai-compatible"))
    res = run_cli("eval", "ticket-triage", "--batch", "--quiet", cwd=project, env=KEYS)
    assert res.code == 2
    first = res.err.strip().splitlines()[0]
    assert "--batch" in first and "openai-compatible provider has no batch API" in first
    assert "models.target" in res.err and "Traceback" not in res.err
    assert server.call_count == 0 and not list(project.rglob("run.json"))


def test_batch_refuses_the_responses_api(tmp_path, server):
    project = batch_project(tmp_path / "proj", server, target={"api": "responses"})
    res = run_cli("eval", "ticket-triage", "--batch", "--quiet", cwd=project, env=KEYS)
    assert res.code == 2
    assert "not api: responses" in res.err and server.call_count == 0


def test_the_price_table_knows_the_batch_price():
    assert price_for("gpt-4o-mini") == (0.15, 0.60)
    assert price_for("gpt-4o-mini", batch=True) == (0.075, 0.30)
    assert price_for("claude-sonnet-4-5-20250929", batch=True) == (1.5, 7.5)
    own = {"mine": {"input": 2.0, "output": 4.0}, "theirs": {"input": 2.0, "output": 4.0, "batch_input": 1.5}}
    assert price_for("mine", own, batch=True) == (1.0, 2.0)
    assert price_for("theirs", own, batch=True) == (1.5, 2.0)


def test_a_batch_whose_every_line_failed_aborts_like_a_synchronous_run(tmp_path, server):
    project = batch_project(tmp_path / "proj", server)
    server.fault_plan = lambda request: Fault.status(400, "Scripted refusal.")
    run = tmp_path / "run"
    res = run_cli("eval", "ticket-triage", "--out", str(run), "--batch", "--quiet", cwd=project, env=KEYS)
    assert res.code == 3
    assert "aborted after 10 of 10 rollouts failed (10 bad_request)" in res.err
    # The batch was collected, nothing was measured: nothing to resume, so nothing is kept.
    assert "no run directory is kept" in res.err and not run.exists()


def test_batch_refuses_an_agent_cli_environment(tmp_path, server):
    project = batch_project(tmp_path / "proj", server)
    fake_cli = tmp_path / "codex"  # stands in for the CLI: only its --version is asked before the refusal
    fake_cli.write_text("#!/bin/sh\necho 'codex-cli 0.0.0'\n")
    fake_cli.chmod(0o755)
    suite = project / "eval_suites/ticket-triage/suite.yaml"
    data = yaml.safe_load(suite.read_text())
    data["environment"] = {"type": "codex", "binary": str(fake_cli)}
    suite.write_text(yaml.safe_dump(data))
    res = run_cli("eval", "ticket-triage", "--batch", "--quiet", cwd=project, env=KEYS)
    assert res.code == 2, res.err
    assert "--batch: the codex environment's agent calls the model itself" in res.err.splitlines()[0]
    assert "suite.yaml" in res.err and server.call_count == 0


def test_merged_batch_shards_keep_the_batch_price(tmp_path, server):
    project = batch_project(tmp_path / "proj", server)
    for i in (1, 2):
        res = run_cli("eval", "ticket-triage", "--out", str(tmp_path / f"s{i}"), "--batch", "--shard", f"{i}/2",
                      "--quiet", cwd=project, env=KEYS)
        assert res.code == 0, res.err
    merged = run_cli("merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out", str(tmp_path / "m"), cwd=project)
    assert merged.code == 0, merged.err
    m = summary(tmp_path / "m")
    assert m["pricing"] == "batch" and m["n_results"] == 12
    assert m["cost_usd"] == pytest.approx(summary(tmp_path / "s1")["cost_usd"] + summary(tmp_path / "s2")["cost_usd"],
                                          abs=1e-6)
    assert "(batch price)" in merged.out
