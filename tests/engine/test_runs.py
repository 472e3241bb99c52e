"""Runs in real processes: kill and resume, shared cache across processes, judge and Anthropic
targets end to end, the demo, start-up without SDK imports."""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from helpers.cli import run_cli
from helpers.paths import TESTS
from helpers.project import judge_policy, write_project
from helpers.repo import SKILL, commit_on_branch, make_repo, skill_text
from skillopt_ci.engine.evaluation import EvalRequest, run_eval
from skillopt_ci.inputs.config import load_config
from skillopt_ci.models.base import Message
from skillopt_ci.models.cache import ResponseCache, cache_key
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.triage import TriagePolicy

PY = sys.executable


def cli_process(project: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([PY, "-m", "skillopt_ci", *args], cwd=project, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})


class HoldAfter:
    """A TriagePolicy that answers the first ``answered`` calls and holds every later one until
    :meth:`release`: a run stopped at a known point, with no timing involved."""

    def __init__(self, answered: int):
        self.answered = answered
        self.triage = TriagePolicy()
        self.lock = threading.Lock()
        self.seen = 0
        self.held = threading.Semaphore(0)
        self.released = threading.Event()

    def __call__(self, request):
        with self.lock:
            self.seen += 1
            hold = self.seen > self.answered
        if hold:
            self.held.release()
            self.released.wait(120)
        return self.triage(request)

    def wait_held(self, n: int) -> None:
        """Block until ``n`` calls are held (the premise of a test, not a timing assertion)."""
        for _ in range(n):
            assert self.held.acquire(timeout=60), "the run never reached the held calls"

    def release(self) -> None:
        with self.lock:
            self.answered = 10**9
        self.released.set()


def result_lines(run: Path) -> list[dict]:
    file = run / "results.jsonl"
    return [json.loads(line) for line in file.read_text().splitlines()] if file.exists() else []


@pytest.mark.slow
def test_killed_eval_resumes_to_the_same_result(tmp_path):
    """kill -9 loses only the calls in flight; the resumed run redoes exactly the rest."""
    hold = HoldAfter(6)
    with ScriptedModelServer(hold) as server:
        try:
            project = write_project(tmp_path / "p", server.openai_base_url, concurrency=2)
            out = project / "run"
            proc = cli_process(project, "eval", "ticket-triage", "--split", "train", "--out", str(out), "--cache", "off",
                               "--quiet")
            hold.wait_held(2)  # both workers wait on a call: six rollouts are finished, none can finish now
            assert proc.poll() is None
            # Premise: every finished result is on disk while the run is still going.
            assert len(result_lines(out)) == 6
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        finally:
            hold.release()
        assert not (out / "summary.json").exists()
        kept = result_lines(out)
        assert len(kept) == 6 and len({(r["task_id"], r["repeat"]) for r in kept}) == 6
        calls_before = hold.seen
        resumed = cli_process(project, "eval", "ticket-triage", "--split", "train", "--out", str(out), "--cache", "off",
                              "--quiet")
        _, err = resumed.communicate(timeout=60)
        assert resumed.returncode == 0, err
        # Exactly the twelve unfinished tasks were called again (the two in flight among them).
        assert hold.seen - calls_before == 12
    lines = result_lines(out)
    assert len(lines) == 18 and len({(r["task_id"], r["repeat"]) for r in lines}) == 18
    summary = json.loads((out / "summary.json").read_text())
    # The same number an uninterrupted run gives.
    with ScriptedModelServer(TriagePolicy()) as server:
        fresh = write_project(tmp_path / "q", server.openai_base_url)
        res = run_cli("eval", "ticket-triage", "--split", "train", "--out", str(fresh / "run"), "--quiet", cwd=fresh)
        assert res.code == 0
    assert summary["mean"] == json.loads((fresh / "run/summary.json").read_text())["mean"]
    assert summary["n_results"] == 18 and summary["n_errors"] == 0


@pytest.mark.slow
def test_ctrl_c_says_what_was_kept_and_how_to_resume(tmp_path):
    hold = HoldAfter(5)
    with ScriptedModelServer(hold) as server:
        try:
            project = write_project(tmp_path / "p", server.openai_base_url, concurrency=2)
            proc = cli_process(project, "eval", "ticket-triage", "--split", "train", "--out", "run", "--cache", "off",
                               "--quiet")
            hold.wait_held(2)
            assert proc.poll() is None and len(result_lines(project / "run")) == 5
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
        finally:
            hold.release()
    assert proc.returncode == 3
    assert err.strip().splitlines()[-1] == "interrupted: 5 finished results kept in run; re-run the same command to resume"
    assert "Traceback" not in err and len(result_lines(project / "run")) == 5


@pytest.mark.slow
def test_a_second_run_into_the_same_directory_fails_at_once_or_waits(tmp_path):
    hold = HoldAfter(2)
    with ScriptedModelServer(hold) as server:
        try:
            project = write_project(tmp_path / "p", server.openai_base_url, concurrency=2)
            args = ("eval", "ticket-triage", "--out", "run", "--cache", "off", "--quiet")
            first = cli_process(project, *args)
            hold.wait_held(2)
            # Premise: the first run is alive and holds the lock.
            assert first.poll() is None
            lock = project / "run/.lock"
            with open(lock) as fh, pytest.raises(BlockingIOError):
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            assert lock.read_text().startswith(f"pid {first.pid}: skillopt-ci eval ticket-triage")
            second = cli_process(project, *args)
            _, err = second.communicate(timeout=60)
            assert second.returncode == 3
            assert f"another skillopt-ci process is writing to this run directory (pid {first.pid}: " in err
            assert "--wait" in err and "Traceback" not in err
            assert hold.seen == 4  # the refused run called no model
            waiting_err = tmp_path / "waiting.err"
            with open(waiting_err, "w") as fh:
                waiting = subprocess.Popen([PY, "-m", "skillopt_ci", *args, "--wait"], cwd=project,
                                           stdout=subprocess.PIPE, stderr=fh, text=True)
            deadline = time.monotonic() + 60
            while f"waiting for pid {first.pid}" not in waiting_err.read_text() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert f"waiting for pid {first.pid}" in waiting_err.read_text()
            assert waiting.poll() is None
        finally:
            hold.release()
        _, err = first.communicate(timeout=60)
        assert first.returncode == 0, err
        waiting.communicate(timeout=60)
        assert waiting.returncode == 0, waiting_err.read_text()
        # The queued run found the run finished: no call of its own, no duplicated result.
        assert hold.seen == 12
    lines = result_lines(project / "run")
    assert len(lines) == 12 and len({r["task_id"] for r in lines}) == 12
    assert json.loads((project / "run/summary.json").read_text())["n_results"] == 12


@pytest.mark.slow
def test_cache_is_safe_with_concurrent_writer_processes(tmp_path):
    path = str(tmp_path / "cache.sqlite")
    code = "import sys; from helpers.cache_writer import fill_cache; fill_cache(sys.argv[1], int(sys.argv[2]), 300)"
    root = TESTS
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
def test_demo_runs_on_a_machine_without_isolation_and_says_so():
    """The quick start on a fresh machine without bubblewrap: the demo's own bundled suites run,
    saying they ran without a sandbox, instead of the tools example being refused."""
    env = {k: v for k, v in os.environ.items() if k != "SKILLOPT_ALLOW_UNISOLATED"}
    proc = subprocess.run([PY, "-m", "skillopt_ci", "demo"], capture_output=True, text=True, timeout=300,
                          env={**env, "SKILLOPT_SANDBOX": "none"})
    assert proc.returncode == 0, proc.stderr
    assert "commands cannot be isolated on this machine (no working bubblewrap)" in proc.stdout
    assert "sales-analysis  val      10       0.200" in proc.stdout


@pytest.mark.slow
def test_demo_runs_offline():
    proc = subprocess.run([PY, "-m", "skillopt_ci", "demo"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("SIMULATION")
    chat, rest = out.split("\n   sales-analysis:\n")
    tools, rest = rest.split("\n   release-notes:\n")
    description, gate = rest.split("\n3. Gate a pull request")
    evaluated = {tuple(line.split()[:3]) for line in chat.splitlines()
                 if line.startswith(("ticket-triage ", "sales-analysis ", "release-notes "))}
    assert evaluated == {("ticket-triage", "val", "12"), ("ticket-triage", "test", "12"),
                         ("sales-analysis", "val", "10"), ("sales-analysis", "test", "6"),
                         ("release-notes", "val", "12"), ("release-notes", "test", "12")}
    # the trigger suite's row says how often the skill was used: never, with the vague description
    assert re.search(r"^release-notes\s+val\s+12\s+0\.500.*0/12 \(0%\)", chat, re.M), chat
    # trained from poor to good recall without losing precision, then a gate that fails the vague one again
    assert re.search(r"^triggering on val: recall 0/6 \(0%\) → [56]/6 .*precision — → (\d)/\1 ", description, re.M), description
    assert re.search(r"^release-notes\s+modified\s+1\.000\s+0\.500.*regressed \(fails\)$", gate, re.M), gate
    assert "6 fewer requests the skill is for use it" in gate
    assert "ticket-triage   val      12       0.458" in chat and "sales-analysis  val      10       0.200" in chat
    # each decision in one line: confirmed edits pass a non-inferiority check, the rest must win
    assert re.search(r": accepted — [+-]\d", chat) and "edits confirmed in screening; non-inferiority" in chat
    assert re.search(r": rejected — [+-]\d", chat) and "screened out alone" in chat
    for part, baseline in ((chat, 0.458), (tools, 0.2)):
        val = next(line for line in part.splitlines() if line.startswith("val "))
        current, trained = (float(x) for x in val.split()[1:3])
        assert current == baseline and trained > current and val.rstrip().endswith("improved")
    # the tools example's training accepts edits too: rules learned from the scorer's feedback
    assert re.search(r"^   e\d-s\d\d: accepted — [+-]\d", tools, re.M)
    assert "calls to the simulated models, all through the real OpenAI SDK" in gate
    # Every gated step says the paired delta over the validation tasks and the rule that decided.
    for part in (chat, tools):
        for line in re.findall(r"^   e\d-(?:s\d\d|slow): (?:accepted|rejected) — .*$", part, re.M):
            if "screened out:" not in line:
                assert re.search(r"[+-]\d\.\d{3} \[[+-]\d\.\d{3}, [+-]\d\.\d{3}\] paired over \d+ tasks", line), line


def test_help_does_not_import_the_sdks():
    code = ("import sys\nfrom skillopt_ci.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('openai', 'anthropic', 'github', 'jsonschema') if m in sys.modules))")
    proc = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("command", ["eval", "compare", "gate", "train"])
def test_every_command_that_writes_a_run_refuses_a_locked_directory(tmp_path, server, command):
    root = make_repo(tmp_path, server.openai_base_url)
    commit_on_branch(root, "pr", {SKILL: skill_text(root) + "\n- Answer briefly.\n"})
    config = yaml.safe_load((root / "skillopt.yml").read_text())
    config["models"]["optimizer"] = dict(config["models"]["target"])
    (root / "skillopt.yml").write_text(yaml.safe_dump(config))
    out = tmp_path / "out"
    out.mkdir()
    args = {
        "eval": ["eval", "ticket-triage"],
        "compare": ["compare", SKILL, SKILL, "--suite", "eval_suites/ticket-triage"],
        "gate": ["gate", "--base", "main", "--head", "pr"],
        "train": ["train", "--skill", "ticket-triage"],
    }[command]
    with open(out / ".lock", "w") as held:  # another writer, as far as the command can tell
        held.write("pid 4242: skillopt-ci eval ticket-triage\n")
        held.flush()
        fcntl.flock(held, fcntl.LOCK_EX)
        res = run_cli(*args, "--out", str(out), "--quiet", cwd=root)
    assert res.code == 3, res.err
    first = res.err.strip().splitlines()[0]
    assert first == (f"error: {out}: another skillopt-ci process is writing to this run directory "
                     "(pid 4242: skillopt-ci eval ticket-triage) (wait for it to finish, pass --wait to queue "
                     "behind it, or choose another --out)")
    assert server.call_count == 0
    assert [p.name for p in out.iterdir()] == [".lock"]
