"""What is checked before any paid run: validate and eval share their checks, warnings (soft
Agent Skills rules, oversized inputs) print and become errors under --strict, a run whose estimated
cost exceeds the budget is refused unless --yes, an unquoted ``cache: {mode: off}`` works, ``init``
ignores ``.skillopt/``, and a local model without a price is free."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from helpers.cli import run_cli
from helpers.paths import REPO
from helpers.project import write_project
from helpers.repo import commit_on_branch, make_repo
from skillopt_ci.inputs.config import load_config
from skillopt_ci.models.pricing import is_loopback

SKILL = "skills/ticket-triage/SKILL.md"
SUITE = "eval_suites/ticket-triage"


def set_config(project: Path, **changes) -> None:
    data = yaml.safe_load((project / "skillopt.yml").read_text())
    data.update(changes)
    (project / "skillopt.yml").write_text(yaml.safe_dump(data, sort_keys=False))


def set_front_matter(project: Path, old: str, new: str) -> None:
    path = project / SKILL
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


# ---- item 6: one set of checks, warnings, the cost estimate ----------------------------------------

def test_validate_refuses_the_empty_split_that_eval_refuses(project):
    (project / SUITE / "val.jsonl").write_text("")
    val = run_cli("validate", cwd=project)
    ev = run_cli("eval", "ticket-triage", "--quiet", cwd=project)
    assert val.code == 2 and ev.code == 2
    assert "val.jsonl: the 'val' split has no tasks" in val.err and "'val' split has no tasks" in ev.err


def test_empty_and_oversized_inputs_warn_in_validate_and_eval_and_fail_under_strict(project, server):
    set_config(project, limits={"skill_tokens": 50, "prompt_tokens": 20})
    val = run_cli("validate", cwd=project)
    assert val.code == 0 and "warning(s)" in val.out
    assert re.search(rf"^warning: {SKILL}: the skill has about [\d,]+ tokens, over limits.skill_tokens \(50\)", val.err, re.M)
    assert re.search(rf"^warning: {SUITE}/val.jsonl:1: task 'val-01': the prompt has about \d+ tokens", val.err, re.M)
    assert "more task prompt(s) over limits.prompt_tokens" in val.err

    strict = run_cli("validate", "--strict", cwd=project)
    assert strict.code == 2 and "problem(s) found (--strict: warnings count)" in strict.err

    ev = run_cli("eval", "ticket-triage", "--quiet", "--json", cwd=project)
    assert ev.code == 0
    assert "warning: " in ev.err and "over limits.skill_tokens" in ev.err
    assert any("over limits.skill_tokens" in w for w in json.loads(ev.out)["warnings"])

    calls = len(server.calls)
    out = project / "strict-run"
    ev = run_cli("eval", "ticket-triage", "--quiet", "--strict", "--out", str(out), cwd=project)
    assert ev.code == 2 and "--strict makes warnings errors" in ev.err.splitlines()[0]
    assert len(server.calls) == calls and not out.exists()


def test_empty_skill_body_is_a_warning(project):
    path = project / SKILL
    front = path.read_text().split("---\n")[1]
    path.write_text(f"---\n{front}---\n\n")
    res = run_cli("validate", cwd=project)
    assert res.code == 0 and f"warning: {SKILL}: the skill has no body" in res.err


def test_huge_skill_over_budget_is_refused_with_the_estimate_and_yes_proceeds(project, server):
    path = project / SKILL
    path.write_text(path.read_text() + "Read the ticket carefully and decide. " * 140_000)  # ~5 MB
    set_config(project, budgets={"max_dollars": 5})
    out = project / "run"
    res = run_cli("eval", "ticket-triage", "--quiet", "--out", str(out), cwd=project)
    assert res.code == 2, res.err
    first = res.err.splitlines()[-1]
    assert first.startswith("error: skillopt.yml: estimated cost about $") and "for 12 rollout(s)" in first
    assert "exceeds the $5.00 left of budgets.max_dollars" in first and "--yes" in first
    assert server.calls == [] and not out.exists()

    res = run_cli("eval", "ticket-triage", "--quiet", "--yes", "--out", str(out), cwd=project)
    assert res.code == 3 and server.calls, res.err  # it ran, and stopped at the budget
    assert "dollar budget reached" in json.loads((out / "summary.json").read_text())["stopped"]


def test_cached_rollouts_do_not_count_toward_the_estimate(project, server):
    assert run_cli("eval", "ticket-triage", "--quiet", cwd=project).code == 0
    set_config(project, budgets={"max_dollars": 0.000001})
    res = run_cli("eval", "ticket-triage", "--quiet", "--fresh", cwd=project)
    assert res.code == 0, res.err  # every answer is cached: nothing left to pay for


def test_gate_and_train_refuse_under_strict_before_any_call(tmp_path, server):
    root = make_repo(tmp_path, server.openai_base_url)
    set_config(root, models={**yaml.safe_load((root / "skillopt.yml").read_text())["models"],
                             "optimizer": {"provider": "openai-compatible", "model": "sim-triage-1",
                                           "base_url": server.openai_base_url}})
    commit_on_branch(root, "main", {})
    long = (root / SKILL).read_text().replace("description: ", "description: " + "x" * 1060 + " ", 1)
    commit_on_branch(root, "long-description", {SKILL: long})
    res = run_cli("gate", "--base", "main", "--strict", "--quiet", cwd=root)
    assert res.code == 2 and "Agent Skills limit is 1024" in res.err and "--strict" in res.err, res.err
    res = run_cli("train", "--skill", "ticket-triage", "--strict", "--quiet", cwd=root)
    assert res.code == 2 and "Agent Skills limit is 1024" in res.err, res.err
    assert server.calls == []
    res = run_cli("gate", "--base", "main", "--quiet", cwd=root)
    assert res.code == 0 and "limit is 1024" in res.err, res.err


# ---- item 7: soft Agent Skills rules are warnings ----------------------------------------------------

def test_published_skill_with_long_description_and_other_name_is_usable(project, server):
    set_front_matter(project, "name: ticket-triage", "name: claude-api")
    set_front_matter(project, "description: ", "description: " + "x" * 1060 + " ")
    res = run_cli("validate", cwd=project)
    assert res.code == 0, res.err
    assert f"warning: {SKILL}:1: front matter description is 1" in res.err and "limit is 1024" in res.err
    assert "front matter name 'claude-api' differs from its folder 'ticket-triage'" in res.err
    assert run_cli("validate", "--strict", cwd=project).code == 2
    ev = run_cli("eval", "claude-api", "--quiet", cwd=project)
    assert ev.code == 0 and "differs from its folder" in ev.err
    strict = run_cli("eval", "claude-api", "--quiet", "--strict", cwd=project)
    assert strict.code == 2


def test_train_prints_warnings_and_lists_them_in_json(tmp_path):
    from helpers.training import train_project
    from skillopt_ci.sim import ScriptedModelServer
    from skillopt_ci.sim.sim_models import SimulatedModels

    with ScriptedModelServer(SimulatedModels()) as sim:
        project = train_project(tmp_path / "p", sim.openai_base_url, train={"epochs": 1})
        set_front_matter(project, "name: ticket-triage", "name: Ticket-Triage")
        set_config(project, skills=[{"name": "ticket-triage", "path": SKILL, "suite": SUITE}])
        res = run_cli("train", "--skill", "ticket-triage", "--quiet", "--json", cwd=project)
    assert res.code == 0, res.err
    assert res.err.count("breaks the Agent Skills rule") == 1  # once, though every candidate carries it
    assert any("'Ticket-Triage' breaks the Agent Skills rule" in w for w in json.loads(res.out)["warnings"])


# ---- item 8: an unquoted `off` ------------------------------------------------------------------------

def test_unquoted_cache_mode_off_as_the_readme_documents_it(project):
    line = next(ln for ln in (REPO / "README.md").read_text().splitlines() if "`cache: {mode: off}`" in ln)
    documented = yaml.safe_load(re.search(r"`(cache: \{mode: off\})`", line).group(1))
    assert documented == {"cache": {"mode": False}}  # what YAML makes of it
    text = (project / "skillopt.yml").read_text()
    (project / "skillopt.yml").write_text(re.sub(r"cache:\n(  .*\n)+", "cache: {mode: off}\n", text))
    assert run_cli("validate", cwd=project).code == 0
    assert load_config(project / "skillopt.yml").cache.mode == "off"
    assert run_cli("eval", "ticket-triage", "--quiet", cwd=project).code == 0
    assert not (project / ".skillopt/cache.sqlite").exists()


def test_other_booleans_are_still_refused(project):
    text = (project / "skillopt.yml").read_text()
    (project / "skillopt.yml").write_text(re.sub(r"cache:\n(  .*\n)+", "cache: {mode: on}\n", text))
    res = run_cli("validate", cwd=project)
    assert res.code == 2 and "cache.mode: True is not one of: read-write, refresh, off, replay-only" in res.err


# ---- item 16: init ignores .skillopt/, a local model is free -----------------------------------------

def test_init_creates_gitignore(tmp_path):
    assert run_cli("init", str(tmp_path)).code == 0
    assert (tmp_path / ".gitignore").read_text() == ".skillopt/\n"


@pytest.mark.parametrize("before, after", [("node_modules/", "node_modules/\n.skillopt/\n"),
                                           ("dist/\n", "dist/\n.skillopt/\n"),
                                           ("a\n/.skillopt/\n", "a\n/.skillopt/\n"),
                                           (".skillopt\n", ".skillopt\n")])
def test_init_appends_to_gitignore_once(tmp_path, before, after):
    (tmp_path / ".gitignore").write_text(before)
    res = run_cli("init", str(tmp_path))
    assert res.code == 0 and (tmp_path / ".gitignore").read_text() == after
    assert ("added .skillopt/ to" in res.out) == (before != after)


def test_unpriced_local_model_is_free_under_a_dollar_budget(tmp_path, server):
    project = write_project(tmp_path / "p", server.openai_base_url.replace("127.0.0.1", "localhost"),
                            pricing={}, budgets={"max_dollars": 5})
    res = run_cli("eval", "ticket-triage", "--quiet", "--json", cwd=project)
    assert res.code == 0, res.err
    notices = [ln for ln in res.err.splitlines() if ln.startswith("notice:")]
    assert notices == ["notice: 'sim-triage-1' has no price and is served on this machine (loopback base URL): "
                       "counted as $0"]
    assert json.loads(res.out)["cost_usd"] == 0


@pytest.mark.parametrize("url, local", [("http://127.0.0.1:8080/v1", True), ("http://127.9.8.7/v1", True),
                                        ("http://[::1]:8000/v1", True), ("http://localhost:11434/v1", True),
                                        ("http://LOCALHOST/v1", True), ("http://10.0.0.5/v1", False),
                                        ("http://127.0.0.1.example.com/v1", False), ("https://api.openai.com/v1", False),
                                        (None, False), ("http://[bad/v1", False)])
def test_loopback_addresses(url, local):
    assert is_loopback(url) is local


def test_validate_warns_when_the_gate_split_cannot_see_the_drop_it_should(project):
    set_config(project, gate={"detect": 0.1})
    res = run_cli("validate", cwd=project)
    assert res.code == 0, res.err
    line = next(x for x in res.err.splitlines() if "gate.detect" in x)
    assert line.startswith("warning: eval_suites/ticket-triage:")
    assert "val split (12 task(s)" in line and "not the 10 points of gate.detect" in line
    strict = run_cli("validate", "--strict", cwd=project)
    assert strict.code == 2 and "gate.detect" in strict.err


def test_no_power_warning_when_the_split_can_see_the_drop(project):
    set_config(project, gate={"detect": 0.95})
    assert "gate.detect" not in run_cli("validate", cwd=project).err
    set_config(project, gate={"margin": 0.05})  # without detect, the margin is what it must see
    assert "not the 5 points of gate.margin" in run_cli("validate", cwd=project).err


def test_a_multi_turn_environment_is_estimated_at_its_most_turns():
    from skillopt_ci.core.skill import parse_skill
    from skillopt_ci.core.task import Task
    from skillopt_ci.inputs.preflight import estimate_plan
    from skillopt_ci.inputs.suite import Suite

    skill = parse_skill("Use the tools.", path="SKILL.md")
    suite = Suite("s", Path("."), "s", "{{ input }}", {"type": "exact"}, {}, "h")
    tasks = [Task("a", "what is in the file?", fields={"id": "a", "input": "what is in the file?"})]
    one = estimate_plan(skill, suite, tasks, 1, target_price=(1.0, 2.0), output_tokens=100)
    four = estimate_plan(skill, suite, tasks, 1, target_price=(1.0, 2.0), output_tokens=100, turns=4)
    first = one.input_tokens
    # Each turn re-sends the skill and prompt plus an answer and a result per earlier turn.
    assert four.input_tokens == 4 * first + 2 * 100 * (0 + 1 + 2 + 3)
    assert four.output_tokens == 4 * one.output_tokens
    assert one.describe().startswith("about $") and four.describe().startswith("up to (at 4 model calls per rollout) $")
