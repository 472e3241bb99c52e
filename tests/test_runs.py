"""Runs in real processes: kill and resume, shared cache across processes, judge and Anthropic
targets end to end, the demo, start-up without SDK imports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import run_cli, write_project
from skillopt_ci.cache import ResponseCache, cache_key
from skillopt_ci.config import load_config
from skillopt_ci.evaluation import EvalRequest, run_eval
from skillopt_ci.models.base import Completion, Message, Usage
from skillopt_ci.testing import ScriptedModelServer
from skillopt_ci.testing.triage import TriagePolicy

PY = sys.executable


def cli_process(project: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([PY, "-m", "skillopt_ci", *args], cwd=project, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})


@pytest.mark.slow
def test_killed_eval_resumes_to_the_same_result(tmp_path):
    with ScriptedModelServer(TriagePolicy(), latency=0.15) as server:
        project = write_project(tmp_path / "p", server.openai_base_url, concurrency=2)
        out = project / "run"
        proc = cli_process(project, "eval", "ticket-triage", "--split", "train", "--out", str(out), "--cache", "off")
        deadline = time.monotonic() + 30
        results = out / "results.jsonl"
        while time.monotonic() < deadline:
            if results.exists() and len(results.read_text().splitlines()) >= 4:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert not (out / "summary.json").exists()
        done_before = len({json.loads(line)["task_id"] for line in results.read_text().splitlines() if line.strip()})
        assert 4 <= done_before < 18
        calls_before = server.call_count
        resumed = cli_process(project, "eval", "ticket-triage", "--split", "train", "--out", str(out), "--cache", "off")
        _, err = resumed.communicate(timeout=60)
        assert resumed.returncode == 0, err
        # Only the unfinished tasks were called again (a call in flight at the kill is redone).
        assert server.call_count - calls_before <= 18 - done_before + 2
        assert server.call_count - calls_before >= 18 - done_before
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert len({(r["task_id"], r["repeat"]) for r in lines}) == 18
    summary = json.loads((out / "summary.json").read_text())
    # The same number an uninterrupted run gives.
    with ScriptedModelServer(TriagePolicy()) as server:
        fresh = write_project(tmp_path / "q", server.openai_base_url)
        res = run_cli("eval", "ticket-triage", "--split", "train", "--out", str(fresh / "run"), "--quiet", cwd=fresh)
        assert res.code == 0
    assert summary["mean"] == json.loads((fresh / "run/summary.json").read_text())["mean"]
    assert summary["n_results"] == 18 and summary["n_errors"] == 0


def _fill_cache(path: str, start: int, count: int) -> None:
    cache = ResponseCache(Path(path))
    for i in range(start, start + count):
        key = cache_key("p", "m", {}, [Message("user", str(i))], 0)
        cache.put(key, "p", "m", Completion(text=f"answer {i}", usage=Usage(1, 1)))
    cache.close()


@pytest.mark.slow
def test_cache_is_safe_with_concurrent_writer_processes(tmp_path):
    path = str(tmp_path / "cache.sqlite")
    code = "import sys; from test_runs import _fill_cache; _fill_cache(sys.argv[1], int(sys.argv[2]), 300)"
    root = Path(__file__).resolve().parent
    procs = [subprocess.Popen([PY, "-c", code, path, str(k * 300)], cwd=root) for k in range(4)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0, 0]
    cache = ResponseCache(Path(path))
    assert cache.count() == 1200
    key = cache_key("p", "m", {}, [Message("user", "777")], 0)
    assert cache.get(key).text == "answer 777"


def test_fully_cached_run_builds_no_model_client(project, tmp_path):
    config = load_config(project / "skillopt.yml")
    request = EvalRequest(skill=project / "skills/ticket-triage/SKILL.md", suite=project / "eval_suites/ticket-triage",
                          out=tmp_path / "a")
    first = run_eval(config, request, show_progress=False)

    def no_client(spec, env):
        raise AssertionError("a model client was built for a fully cached run")

    second = run_eval(config, EvalRequest(**{**request.__dict__, "out": tmp_path / "b"}), show_progress=False,
                      backend_factory=no_client)
    assert second.summary.mean == first.summary.mean and second.summary.cache_hits == 12


def test_dollar_budget_needs_known_prices(tmp_path, server):
    # Not a loopback address (those count as free); refused before any call, so it is never reached.
    project = write_project(tmp_path / "p", "http://models.invalid/v1", pricing={}, budgets={"max_dollars": 1})
    res = run_cli("eval", "ticket-triage", "--quiet", cwd=project)
    assert res.code == 2 and "price of 'sim-triage-1' is unknown" in res.err and "pricing" in res.err


def judge_policy(request):
    """Target answers with the ticket's plan; the judge grades 'Enterprise' answers 1, others 0,
    and returns prose without a verdict for one ticket."""
    prompt = request.last_user
    if "## Rubric" in prompt:
        if "EU region" in prompt:
            return "I cannot decide."
        answer = prompt.split("## Answer to grade")[1].split("## Your verdict")[0]
        return json.dumps({"score": 1.0 if "Enterprise" in answer else 0.0, "reason": "graded"})
    return request.last_user.split("Plan: ")[1].split("\n")[0]


def test_llm_judge_scorer_through_anthropic_judge(tmp_path):
    with ScriptedModelServer(judge_policy) as server:
        project = write_project(tmp_path / "p", server.openai_base_url)
        cfg = yaml.safe_load((project / "skillopt.yml").read_text())
        cfg["models"]["judge"] = {"provider": "anthropic", "model": "claude-haiku-4-5"}
        (project / "skillopt.yml").write_text(yaml.safe_dump(cfg))
        suite = project / "eval_suites/ticket-triage/suite.yaml"
        data = yaml.safe_load(suite.read_text())
        data["scorer"] = {"type": "llm_judge", "rubric": "Score 1 if the answer names the Enterprise plan."}
        suite.write_text(yaml.safe_dump(data))
        res = run_cli("eval", "ticket-triage", "--split", "train", "--out", str(tmp_path / "run"), "--quiet",
                      cwd=project, env={"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": server.anthropic_base_url})
        assert res.code == 0, res.err
        judge_calls = [c for c in server.calls if c.request.protocol == "anthropic"]
        assert len(judge_calls) == 18
    results = [json.loads(line) for line in (tmp_path / "run/results.jsonl").read_text().splitlines()]
    summary = json.loads((tmp_path / "run/summary.json").read_text())
    errored = [r for r in results if r["error"]]
    # The unparseable verdict is an error (missing data), not a zero.
    assert len(errored) == 1 and errored[0]["error"]["kind"] == "scoring"
    scored = [r for r in results if not r["error"]]
    assert all(r["score"] == (1.0 if r["output"] == "Enterprise" else 0.0) for r in scored)
    assert summary["n_errors"] == 1 and summary["scorer_input_tokens"] > 0
    assert summary["mean"] == pytest.approx(sum(r["score"] for r in scored) / len(scored))


def test_anthropic_target_end_to_end(tmp_path):
    with ScriptedModelServer(TriagePolicy()) as server:
        project = write_project(tmp_path / "p", server.openai_base_url,
                                target={"provider": "anthropic", "model": "claude-haiku-4-5", "base_url": server.anthropic_base_url})
        res = run_cli("eval", "ticket-triage", "--quiet", "--out", str(tmp_path / "run"), cwd=project,
                      env={"ANTHROPIC_API_KEY": "k"})
        assert res.code == 0, res.err
        assert {c.request.protocol for c in server.calls} == {"anthropic"}
    summary = json.loads((tmp_path / "run/summary.json").read_text())
    assert summary["mean"] == pytest.approx(0.4583, abs=1e-3)
    assert summary["cost_usd"] is not None and summary["cost_usd"] > 0


@pytest.mark.slow
def test_demo_runs_offline():
    proc = subprocess.run([PY, "-m", "skillopt_ci", "demo"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("SIMULATION")
    assert "ticket-triage  val" in out and "0.458" in out
    assert ": accepted — validation" in out and ": rejected — validation does not beat" in out
    val = next(line for line in out.splitlines() if line.startswith("val "))
    current, trained = (float(x) for x in val.split()[1:3])
    assert current == 0.458 and trained > current and val.rstrip().endswith("improved")
    assert "calls to the simulated models, all through the real OpenAI SDK" in out


def test_help_does_not_import_the_sdks():
    code = ("import sys\nfrom skillopt_ci.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('openai', 'anthropic', 'github', 'jsonschema') if m in sys.modules))")
    proc = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"
