"""``skillopt-ci eval`` through the fault proxy: the real openai and anthropic SDKs meet echoed
credentials, HTML pages, malformed and truncated bodies, dropped connections, long Retry-After
values, stalls and 5xx bursts.

Every scenario asserts the exit code and the first error line, no traceback, no secret in
anything printed or written, and that after re-running the same command without faults every
task × repeat has exactly one successful result (none lost, none duplicated).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fakes.fault_proxy import FaultProxy, Injection
from helpers.cli import run_cli
from helpers.project import write_project
from helpers.torture import (
    SECRET_ENV,
    assert_no_secret,
    assert_no_traceback,
    first_error_line,
    result_keys,
)
from skillopt_ci.core.errors import ProviderError
from skillopt_ci.models.retry import with_retries
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.triage import TriagePolicy

I = Injection  # noqa: E741 - the scenario table reads better with a short name
VAL_IDS = [f"val-{i:02d}" for i in range(1, 13)]


@dataclass(frozen=True)
class Scenario:
    id: str
    queue: tuple[Injection, ...] = ()  # consumed in arrival order (concurrency 1: one task after another)
    task_faults: dict[str, Injection] = field(default_factory=dict)  # task id → on every attempt
    every: Injection | None = None  # on every request
    provider: str = "openai"
    repeats: int = 1
    code: int = 0
    phrase: str = ""  # the first error line contains it (when code != 0)
    errored: int = 0  # errored results the faulty run records

    @property
    def echoes_the_key(self) -> bool:
        faults = [*self.queue, *self.task_faults.values(), *([self.every] if self.every else [])]
        return any(f.kind == "echo_auth" for f in faults)


SCENARIOS = [
    Scenario("401-echo-every-call", every=I.echo_auth(), code=3, phrase="check the API key"),
    Scenario("401-echo-one-task", task_faults={"val-02": I.echo_auth()}, errored=1),
    Scenario("403-echo-one-task", task_faults={"val-07": I.echo_auth(403)}, errored=1),
    Scenario("html-200-every-call", every=I.html(), code=3, phrase="unreadable response body"),
    Scenario("html-200-then-recovers", queue=(I.html(), I.html())),
    Scenario("malformed-json", queue=(I.malformed(),) * 4, errored=1),
    Scenario("truncated-bodies", queue=(I.truncate(), I.truncate(), I.passthrough(), I.truncate())),
    Scenario("dropped-connections", queue=(I.drop(),) * 3, errored=1),
    # Asked to wait longer than max_retry_wait (0.05 s here): the run stops at once, saying when.
    Scenario("retry-after-30s", queue=(I.retry_after(30),), code=3, phrase="quota exhausted (HTTP 429): retry after"),
    Scenario("stall-30s", queue=(I.stall(30),)),
    Scenario("5xx-burst", queue=(*I.burst(5, 503), *I.burst(2, 500)), errored=2),
    Scenario("5xx-every-call", every=I.status_error(502), code=3, phrase="aborted after"),
    Scenario("chaos-with-repeats", repeats=2, queue=(
        I.malformed(), I.passthrough(), I.truncate(), I.drop(), I.html(), I.retry_after(0),
        I.passthrough(), *I.burst(3, 500), I.stall(30), I.drop(),
    ), errored=2),
    Scenario("anthropic-chaos", provider="anthropic", queue=(
        I.malformed(), I.truncate(), I.drop(), I.retry_after(0), I.status_error(529), I.html(),
    ), errored=2),
    Scenario("anthropic-401-echo-one-task", provider="anthropic",
             task_faults={"val-04": I.echo_auth()}, errored=1),
]


@dataclass
class Outcome:
    root: Path
    run: Path
    code: int
    out: str
    err: str
    first_summary: dict | None
    resumed_code: int
    resumed_err: str


def _project(root: Path, scenario: Scenario, proxy: FaultProxy) -> Path:
    target: dict = {"max_retries": 2, "max_retry_wait": 0.05, "timeout": 1.0}
    if scenario.provider == "anthropic":
        target.update(provider="anthropic", base_url=proxy.url)
    else:
        target.update(provider="openai", base_url=proxy.url + "/v1")
    project = write_project(root / "proj", proxy.url, target=target)
    # A marker in every prompt, so a plan can fault one task on every attempt.
    suite_yaml = project / "eval_suites/ticket-triage/suite.yaml"
    suite_yaml.write_text(suite_yaml.read_text().replace("Triage this support ticket.",
                                                         "Triage this support ticket. #{{ id }}#"))
    return project


def _plan(scenario: Scenario):
    def plan(request):
        if scenario.every is not None:
            return scenario.every
        for task_id, injection in scenario.task_faults.items():
            if f"#{task_id}#" in request.text:
                return injection
        return None

    return plan


def _eval_args(run: Path, scenario: Scenario) -> list[str]:
    return ["eval", "ticket-triage", "--out", str(run), "--repeats", str(scenario.repeats),
            "--concurrency", "1", "--quiet"]


def play(scenario: Scenario, root: Path, *, subprocess_timeout: float | None = None) -> Outcome:
    """Run the eval through the faults, then the same command again with the proxy clean."""
    with ScriptedModelServer(TriagePolicy()) as server, FaultProxy(server.url) as proxy:
        project = _project(root, scenario, proxy)
        run = root / "run"
        proxy.plan = _plan(scenario)
        proxy.inject(*scenario.queue)
        if subprocess_timeout is None:
            first = run_cli(*_eval_args(run, scenario), cwd=project, env=SECRET_ENV)
            code, out, err = first.code, first.out, first.err
        else:
            # A real process with a deadline far below the 30 s the server asks for: if the wait
            # were not capped, the test would fail here instead of sitting it out.
            env = {**os.environ, **SECRET_ENV}
            proc = subprocess.run([sys.executable, "-m", "skillopt_ci", *_eval_args(run, scenario)],
                                  cwd=project, env=env, capture_output=True, text=True,
                                  timeout=subprocess_timeout)
            code, out, err = proc.returncode, proc.stdout, proc.stderr
        assert proxy.pending == 0, "the run ended before meeting every queued fault"
        summary_file = run / "summary.json"
        first_summary = json.loads(summary_file.read_text()) if summary_file.exists() else None
        proxy.plan = None
        second = run_cli(*_eval_args(run, scenario), cwd=project, env=SECRET_ENV)
    return Outcome(root, run, code, out, err, first_summary, second.code, second.err)


def _check_run(scenario: Scenario, outcome: Outcome) -> None:
    assert outcome.code == scenario.code, outcome.err
    assert_no_traceback(outcome.out, outcome.err)
    if scenario.code:
        assert scenario.phrase in first_error_line(outcome.err), outcome.err
    else:
        assert outcome.first_summary is not None and outcome.first_summary["n_errors"] == scenario.errored
    # The same command again, with the faults gone, completes the run: each task × repeat has
    # exactly one successful result, and nothing that succeeded was run twice.
    assert outcome.resumed_code == 0, outcome.resumed_err
    assert_no_traceback("", outcome.resumed_err)
    every, ok = result_keys(outcome.run)
    planned = {(task_id, r) for task_id in VAL_IDS for r in range(scenario.repeats)}
    assert set(ok) == planned and set(every) == planned
    assert max(ok.values()) == 1
    summary = json.loads((outcome.run / "summary.json").read_text())
    assert summary["n_results"] == len(planned) and summary["n_errors"] == 0 and summary["complete"] is True


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if "30s" not in s.id], ids=lambda s: s.id)
def test_fault_scenario(scenario, tmp_path):
    outcome = play(scenario, tmp_path)
    _check_run(scenario, outcome)
    assert_no_secret(tmp_path, outcome.out, outcome.err, outcome.resumed_err)


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if "30s" in s.id], ids=lambda s: s.id)
def test_a_30s_server_wait_is_cut_short_by_our_own_limits(scenario, tmp_path):
    """Retry-After: 30 beyond max_retry_wait stops the run at once; a 30 s stall is cut by the
    request timeout."""
    outcome = play(scenario, tmp_path, subprocess_timeout=20)
    _check_run(scenario, outcome)
    assert_no_secret(tmp_path, outcome.out, outcome.err, outcome.resumed_err)


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.echoes_the_key], ids=lambda s: s.id)
def test_an_echoed_key_reaches_no_output(scenario, tmp_path):
    """A provider that quotes the request's credentials in its error text: the key must not reach
    stdout, stderr, results.jsonl, report.md or any other file."""
    outcome = play(scenario, tmp_path)
    assert outcome.code == scenario.code
    # The HTML report of the run (the workflow artifact) too.
    report = run_cli("report", str(outcome.run), "--html", str(tmp_path / "report.html"), env=SECRET_ENV)
    assert report.code == 0, report.err
    assert (tmp_path / "report.html").is_file()
    assert_no_secret(tmp_path, outcome.out, outcome.err, outcome.resumed_err, report.out, report.err)


def test_compare_through_a_provider_that_echoes_the_key_leaks_nothing(tmp_path):
    scenario = Scenario("compare", task_faults={"val-03": I.echo_auth()})
    with ScriptedModelServer(TriagePolicy()) as server, FaultProxy(server.url, _plan(scenario)) as proxy:
        project = _project(tmp_path, scenario, proxy)
        head = project / "head.md"
        head.write_text((project / "skills/ticket-triage/SKILL.md").read_text() + "\nBe brief.\n")
        res = run_cli("compare", "skills/ticket-triage/SKILL.md", "head.md", "--suite", "eval_suites/ticket-triage",
                      "--out", str(tmp_path / "cmp"), "--quiet", cwd=project, env=SECRET_ENV)
    assert res.code == 0, res.err
    assert_no_traceback(res.out, res.err)
    assert_no_secret(tmp_path, res.out, res.err)


def test_an_aborted_run_keeps_the_file_its_message_points_at(tmp_path):
    scenario = next(s for s in SCENARIOS if s.id == "html-200-every-call")
    with ScriptedModelServer(TriagePolicy()) as server, FaultProxy(server.url, _plan(scenario)) as proxy:
        project = _project(tmp_path, scenario, proxy)
        res = run_cli(*_eval_args(tmp_path / "run", scenario), cwd=project, env=SECRET_ENV)
    assert res.code == 3
    if "results.jsonl" in res.err:
        assert (tmp_path / "run/results.jsonl").is_file(), res.err


def test_a_retry_after_within_max_retry_wait_is_waited_and_one_beyond_it_is_raised_at_once():
    waits: list[float] = []
    failures = iter([ProviderError("rate_limit", "slow down", status=429, retryable=True, retry_after=0.2),
                     ProviderError("server", "503", status=503, retryable=True),
                     ProviderError("rate_limit", "quota", status=429, retryable=True, retry_after=30.0)])

    async def call():
        error = next(failures, None)
        if error is not None:
            raise error
        return "ok"

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    import asyncio

    with pytest.raises(ProviderError, match="quota"):
        asyncio.run(with_retries(call, 4, sleep=sleep, rng=random.Random(0), base_delay=5.0, max_wait=0.25))
    assert waits == [0.2, 0.25]  # the backoff capped too; the 30 s asked for is not waited


def test_max_retry_wait_must_be_a_non_negative_number(tmp_path):
    project = write_project(tmp_path / "p", "http://127.0.0.1:9/v1", target={"max_retry_wait": -1})
    res = run_cli("validate", cwd=project, env=SECRET_ENV)
    assert res.code == 2
    assert "models.target.max_retry_wait" in first_error_line(res.err)
