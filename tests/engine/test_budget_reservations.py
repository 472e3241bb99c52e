"""Budgets that hold with calls in flight (issue 21): every call reserves its estimated cost before
it is sent, so concurrent workers cannot each send past the line; the stop line and summary.json
report the same, true spend; a refused call is never sent and its rollout keeps no result."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from types import MappingProxyType

import pytest
import yaml

from helpers.cli import run_cli
from helpers.project import judge_policy, use_llm_judge, write_project
from skillopt_ci.core.messages import Message
from skillopt_ci.inputs.config import Config, ModelSpec
from skillopt_ci.models.budget import BudgetReached, Limits, estimate_call
from skillopt_ci.models.cache import ResponseCache
from skillopt_ci.models.pool import ModelPool
from skillopt_ci.sim import ScriptedModelServer, ScriptedReply
from skillopt_ci.sim.triage import TriagePolicy

SKILL = "skills/ticket-triage/SKILL.md"
PHRASE = "Read the ticket carefully and decide. "


def large_skill_project(root: Path, base_url: str, budgets: dict) -> Path:
    project = write_project(root, base_url, budgets=budgets, concurrency=4)
    path = project / SKILL
    # ~120k words the server bills as tokens (~220k by our estimate): about $0.12 a call at $1/M
    path.write_text(path.read_text() + PHRASE * 20_000)
    return project


def eval_run(project: Path, out: Path):
    return run_cli("eval", "ticket-triage", "--quiet", "--yes", "--cache", "off", "--out", str(out), cwd=project)


@pytest.fixture
def slow_server():
    """Every answer takes a while, so four workers each have a call in flight at once."""
    with ScriptedModelServer(TriagePolicy(), latency=0.3) as srv:
        yield srv


def test_concurrent_workers_cannot_each_send_past_a_dollar_budget(tmp_path, slow_server):
    project = large_skill_project(tmp_path / "p", slow_server.openai_base_url, {"max_dollars": 0.5})
    out = tmp_path / "run"
    res = eval_run(project, out)
    assert res.code == 3, res.err
    summary = json.loads((out / "summary.json").read_text())
    spent = summary["spent_usd"]
    assert 0 < spent <= 0.5  # the old code sent four at once, then four more: about $0.96
    assert summary["complete"] is False and summary["n_errors"] == 0
    # the stop line says what was truly spent: the summary's figure, not the figure at the stop
    assert summary["stopped"].startswith(f"dollar budget reached (${spent:.4f} spent of $0.5")
    assert f"incomplete: {summary['stopped']}" in res.err
    # a refused call is never sent: every call the server answered is a kept result
    assert len(slow_server.calls) == summary["n_results"]


def test_concurrent_workers_cannot_each_send_past_a_token_budget(tmp_path, slow_server):
    project = large_skill_project(tmp_path / "p", slow_server.openai_base_url, {"max_tokens": 500_000})
    out = tmp_path / "run"
    res = eval_run(project, out)
    assert res.code == 3, res.err
    summary = json.loads((out / "summary.json").read_text())
    tokens = summary["input_tokens"] + summary["output_tokens"]
    assert 0 < tokens <= 500_000  # the old code: eight calls of ~120k tokens
    assert summary["stopped"].startswith(f"token budget reached ({tokens} of 500000")
    assert len(slow_server.calls) == summary["n_results"]


def test_a_skill_whose_first_call_would_pass_the_budget_sends_nothing(tmp_path, slow_server):
    project = large_skill_project(tmp_path / "p", slow_server.openai_base_url, {"max_dollars": 0.05})
    out = tmp_path / "run"
    res = eval_run(project, out)
    assert res.code == 3, res.err
    assert slow_server.calls == []
    line = res.err.strip().splitlines()[-1]
    assert re.search(r"dollar budget reached \(\$0\.0000 spent of \$0\.05; a call estimated at \$0\.\d{4} "
                     r"would pass it\)", line), line


# ---- the guard in the pool: concurrency and estimates that err ----------------------------------

MESSAGES = [Message("system", PHRASE * 2_000), Message("user", "Ticket: my invoice is wrong")]
PRICE = (1.0, 2.0)


def pool_for(tmp_path: Path, base_url: str) -> ModelPool:
    model = ModelSpec.from_dict("target", {"provider": "openai-compatible", "model": "m", "base_url": base_url,
                                           "max_retries": 0, "params": {"max_tokens": 10}})
    config = Config(root=tmp_path, file="skillopt.yml", models=MappingProxyType({"target": model}),
                    concurrency=6, pricing={"m": {"input": PRICE[0], "output": PRICE[1]}})
    return ModelPool(config, ResponseCache(tmp_path / "cache.sqlite", "off"), env={"OPENAI_API_KEY": "sk-test"})


def spend_under(pool: ModelPool, limits: Limits, calls: int) -> list[object]:
    async def go() -> list[object]:
        try:
            with pool.guard.limited(limits):
                return await asyncio.gather(*(pool.complete("target", MESSAGES, i) for i in range(calls)),
                                            return_exceptions=True)
        finally:
            await pool.aclose()

    return asyncio.run(go())


def test_an_estimate_that_undercounts_passes_the_budget_by_at_most_one_calls_error(tmp_path):
    """The provider bills twice the prompt we estimate: six concurrent calls, room for five
    estimates. Only the first call's error passes the line: the others' estimates learn from it."""
    estimate = estimate_call(MESSAGES, (), 10, PRICE)
    billed_in = 2 * estimate.input_tokens
    true_cost = (billed_in * PRICE[0] + 10 * PRICE[1]) / 1_000_000
    budget = 5 * estimate.usd
    reply = ScriptedReply("billing/P3", input_tokens=billed_in, output_tokens=10)
    with ScriptedModelServer(lambda request: reply, latency=0.1) as server:
        pool = pool_for(tmp_path, server.openai_base_url)
        outcomes = spend_under(pool, Limits(max_dollars=budget), 6)
    answered = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, BudgetReached)]
    assert len(answered) + len(refused) == 6 and refused and len(server.calls) == len(answered)
    spent = pool.total_spend().cost_usd
    assert spent == pytest.approx(true_cost * len(answered))
    assert spent <= budget + (true_cost - estimate.usd) + 1e-12
    assert pool.guard.reserved.usd == 0 and pool.guard.in_flight == 0  # every reservation replaced


def test_calls_that_fit_once_those_in_flight_land_wait_instead_of_stopping_the_run(tmp_path):
    """Our estimate counts more than the provider bills: four estimates do not fit beside each
    other, but the true costs of four calls do, so none is refused."""
    estimate = estimate_call(MESSAGES, (), 10, PRICE)
    billed_in = estimate.input_tokens // 2
    true_cost = (billed_in * PRICE[0] + 10 * PRICE[1]) / 1_000_000
    reply = ScriptedReply("billing/P3", input_tokens=billed_in, output_tokens=10)
    with ScriptedModelServer(lambda request: reply, latency=0.05) as server:
        pool = pool_for(tmp_path, server.openai_base_url)
        outcomes = spend_under(pool, Limits(max_dollars=3 * estimate.usd), 4)
    assert not [o for o in outcomes if isinstance(o, BaseException)]
    assert pool.total_spend().cost_usd == pytest.approx(4 * true_cost)
    assert len(server.calls) == 4


def test_a_cached_answer_costs_nothing_and_reserves_nothing(tmp_path):
    with ScriptedModelServer(lambda request: ScriptedReply("ok", input_tokens=5, output_tokens=1)) as server:
        model = ModelSpec.from_dict("target", {"provider": "openai-compatible", "model": "m",
                                               "base_url": server.openai_base_url})
        config = Config(root=tmp_path, file="skillopt.yml", models=MappingProxyType({"target": model}),
                        pricing={"m": {"input": 1.0, "output": 2.0}})
        cache = ResponseCache(tmp_path / "cache.sqlite", "read-write")
        assert not [o for o in spend_under(ModelPool(config, cache, env={"OPENAI_API_KEY": "sk-test"}), Limits(), 1)
                    if isinstance(o, BaseException)]
        again = ModelPool(config, cache, env={"OPENAI_API_KEY": "sk-test"})
        outcomes = spend_under(again, Limits(max_dollars=0.0), 1)  # nothing left to spend
    assert not isinstance(outcomes[0], BaseException) and len(server.calls) == 1
    assert again.total_spend().cost_usd == 0 and again.total_spend().cache_hits == 1


def judged_project(root: Path, server, budgets: dict) -> Path:
    """The example with an LLM judge that costs a thousand times the target."""
    project = write_project(root, server.openai_base_url, budgets=budgets,
                            pricing={"sim-triage-1": {"input": 1.0, "output": 2.0},
                                     "claude-haiku-4-5": {"input": 1000.0, "output": 1000.0}})
    use_llm_judge(project, server.anthropic_base_url)
    return project


def test_a_rollout_whose_judge_call_is_refused_keeps_no_result_and_the_stop_line_says_what_it_spent(tmp_path):
    """The target's call fits, the judge's does not: the rollout keeps no result, what its target
    call cost is named in the stop line, and the resume gets that answer from the cache."""
    with ScriptedModelServer(judge_policy) as server:
        project = judged_project(tmp_path / "p", server, {"max_dollars": 0.5})
        out = tmp_path / "run"
        res = run_cli("eval", "ticket-triage", "--split", "train", "--yes", "--quiet", "--out", str(out),
                      cwd=project, env={"ANTHROPIC_API_KEY": "k"})
        assert res.code == 3, res.err
        summary = json.loads((out / "summary.json").read_text())
        targets = [c for c in server.calls if c.request.protocol == "openai"]
        assert targets and not [c for c in server.calls if c.request.protocol == "anthropic"]
        assert summary["n_results"] == 0 and summary["spent_usd"] == 0
        spent = re.search(r"dollar budget reached \(\$(\d+\.\d+) spent of \$0\.5; a call estimated at "
                          r"\$\d+\.\d+ would pass it( with \$\d+\.\d+ reserved by \d+ call\(s\) in flight)?; "
                          r"\$(\d+\.\d+) of it by rollouts stopped mid-way, "
                          r"which kept no result", summary["stopped"])
        assert spent and spent.group(1) == spent.group(3) and float(spent.group(1)) > 0, summary["stopped"]
        # the answers those rollouts got are cached: with room for the judge, only its calls are new
        server.reset()
        project_yml = yaml.safe_load((project / "skillopt.yml").read_text())
        project_yml["budgets"] = {"max_dollars": 100}
        (project / "skillopt.yml").write_text(yaml.safe_dump(project_yml))
        again = run_cli("eval", "ticket-triage", "--split", "train", "--yes", "--quiet", "--out", str(out),
                        cwd=project, env={"ANTHROPIC_API_KEY": "k"})
        assert again.code == 0, again.err
        assert len([c for c in server.calls if c.request.protocol == "openai"]) == 18 - len(targets)


def test_training_holds_the_optimizers_calls_to_the_budget_too(tmp_path):
    """The baseline fits in 3,000 tokens, the first reflection does not: it is not sent (the old
    code sent it and two more, ending at 4,217 of 3,000) and the run stops at its checkpoint."""
    from helpers.training import train, train_project
    from skillopt_ci.sim.sim_models import SIM_OPTIMIZER, SimulatedModels

    with ScriptedModelServer(SimulatedModels()) as server:
        project = train_project(tmp_path / "p", server.openai_base_url)
        res = train(project, tmp_path / "run", "--budget-tokens", "3000")
        assert res.code == 0, res.err
        assert not [c for c in server.calls if c.request.model == SIM_OPTIMIZER]
    state = json.loads((tmp_path / "run" / "state.json").read_text())
    tokens = state["spent"]["input_tokens"] + state["spent"]["output_tokens"]
    assert 0 < tokens <= 3000
    assert re.fullmatch(rf"token budget reached \({tokens} of 3000; a call estimated at [\d,]+ tokens would pass it\)",
                        state["stopped"]), state["stopped"]
