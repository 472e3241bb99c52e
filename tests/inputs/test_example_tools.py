"""The bundled tools example (sales-analysis): its data and scorer, the simulated analyst that
answers it, and the simulated optimizer's edits for it. Rollouts here run the analyst's script
for real (a subprocess over the task's files); the tools environment itself is tested elsewhere."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from skillopt_ci.core.edits import Edit, apply_edits
from skillopt_ci.core.records import TaskResult
from skillopt_ci.core.skill import load_skill
from skillopt_ci.inputs.scaffold import example_path
from skillopt_ci.inputs.suite import load_suite
from skillopt_ci.scorers import build_scorer
from skillopt_ci.sim import ScriptedRequest, analyst
from skillopt_ci.sim.analyst import (
    AnalysisRules,
    AnalystPolicy,
    analysis_code,
    parse_question,
    parse_rules,
)
from skillopt_ci.sim.optimizer_sim import OptimizerSim, SkillView, harmful_edit
from skillopt_ci.sim.sim_models import SimulatedModels
from skillopt_ci.train.optimizer import OptimizerBuffer, ReflectionContext, read_proposal
from skillopt_ci.train.optimizer.reflect import reflection_messages

SUITE_DIR = example_path("eval_suites/sales-analysis")
SUITE = load_suite(SUITE_DIR)
SKILL = load_skill(example_path("skills/sales-analysis"))
PERFECT = SKILL.text + "\n" + "\n".join(f"- {line}" for line in analyst.REFERENCE_RULES.values()) + "\n"
TOOLS = [
    {"name": "python", "description": "Run Python.", "parameters": {
        "type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}},
    {"name": "read_file", "description": "Read a file.", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "submit_answer", "description": "Give the final answer.", "parameters": {
        "type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}},
]


def run_script(code: str, files: dict[str, str], tmp: Path) -> str:
    tmp.mkdir(parents=True, exist_ok=True)
    for name, relative in files.items():
        (tmp / name).write_bytes((SUITE_DIR / relative).read_bytes())
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp, capture_output=True, text=True, timeout=60)
    return proc.stdout + proc.stderr


def sales_results(skill_text: str, split: str, tmp: Path) -> list[TaskResult]:
    """Rollouts of the simulated analyst: its script run over each task's files, the printed
    number scored by the suite's real scorer."""
    scorer = build_scorer(dict(SUITE.scorer), SUITE.path)
    rules = parse_rules(skill_text)
    out = []
    for task in SUITE.tasks(split):
        prompt = SUITE.render_prompt(task)
        printed = run_script(analysis_code(rules, parse_question(prompt)), task.fields["files"], tmp / task.id)
        answer = analyst.printed_answer(printed) or printed
        score = scorer.score(answer, task)
        out.append(TaskResult(task.id, 0, prompt, answer, score.value, score.passed, score.feedback,
                              expected=task.expected))
    return out


def mean(results: list[TaskResult]) -> float:
    return sum(r.score for r in results) / len(results)


def request(system: str, messages: list[dict], tools=TOOLS) -> ScriptedRequest:
    return ScriptedRequest("openai", "sim-triage-1", system, messages, {}, {}, 0, {}, tools)


# ---- the suite -------------------------------------------------------------------------------


def test_suite_is_a_tools_suite_with_three_splits_and_files():
    assert dict(SUITE.environment) == {"type": "tools", "tools": ["python", "read_file", "list_files", "submit_answer"],
                                      "max_turns": 6}
    assert {k: len(v) for k, v in SUITE.splits.items()} == {"train": 10, "val": 10, "test": 6}
    for tasks in SUITE.splits.values():
        for task in tasks:
            assert all((SUITE_DIR / path).is_file() for path in task.fields["files"].values()), task.id


def test_each_tasks_traps_are_exactly_those_that_change_its_answer():
    spec = importlib.util.spec_from_file_location("sales_scorer", SUITE_DIR / "scorer.py")
    scorer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scorer)
    answer, read_table, traps = scorer.answer, scorer.read_table, scorer.TRAPS
    for tasks in SUITE.splits.values():
        for task in tasks:
            table = read_table(SUITE_DIR, task.fields["files"])
            right = answer(table, task.metadata, set(traps))
            assert right == pytest.approx(float(task.expected)), task.id
            changes = [t for t in traps if answer(table, task.metadata, set(traps) - {t}) != right]
            assert changes == task.metadata["traps"], task.id


def test_starting_skill_knows_the_tools_but_not_the_traps():
    assert parse_rules(SKILL.text) == AnalysisRules()
    assert all(f"`{tool}`" in SKILL.text for tool in ("python", "read_file", "list_files", "submit_answer"))


def test_the_reference_rules_answer_every_task_and_the_scorer_names_each_trap(tmp_path):
    for split in SUITE.splits:
        assert all(r.passed for r in sales_results(PERFECT, split, tmp_path / "perfect" / split)), split
    naive = {r.task_id: r for r in sales_results(SKILL.text, "val", tmp_path / "naive")}
    assert mean(list(naive.values())) == pytest.approx(0.2)
    for task in SUITE.tasks("val"):
        result, traps = naive[task.id], task.metadata["traps"]
        assert result.passed == (not traps), task.id
        for trap in traps:
            assert analyst.FEEDBACK[trap] in result.feedback, (task.id, result.feedback)
    assert naive["val-01"].feedback == "expected 1893.65, got 2425.55: refunded orders were counted"


def test_scorer_feedback_for_answers_no_trap_explains(tmp_path):
    scorer = build_scorer(dict(SUITE.scorer), SUITE.path)
    task = SUITE.tasks("val")[0]
    assert scorer.score("7", task).feedback == "expected 1893.65, got 7; no known data problem explains the difference"
    assert scorer.score("about $1,893.65", task).passed
    assert scorer.score("I don't know", task).feedback.startswith("the answer must be a number (here 1893.65)")


# ---- the simulated analyst -------------------------------------------------------------------


def test_first_turn_runs_a_script_that_applies_only_the_skills_rules():
    prompt = SUITE.render_prompt(SUITE.tasks("val")[1])  # revenue of the North region
    system = SKILL.body + "\n- " + analyst.REFERENCE_RULES["refunds"]
    reply = AnalystPolicy()(request(system, [{"role": "user", "content": prompt}]))
    (call,) = reply.tool_calls
    assert call.name == "python" and set(call.arguments) == {"code"}
    code = call.arguments["code"]
    assert '"refunded"' in code and "'North'" in code
    assert "seen" not in code and "rates.csv" not in code and "/ 100" not in code


def test_second_turn_submits_the_number_the_script_printed():
    messages = [
        {"role": "user", "content": "What is the total revenue in USD in sales.csv?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "python", "arguments": "{}"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "exit code 0\nstdout:\nanswer: 1392.4\n", "is_error": False},
    ]
    (call,) = AnalystPolicy()(request(SKILL.body, messages)).tool_calls
    assert (call.name, call.arguments) == ("submit_answer", {"answer": "1392.4"})
    renamed = [*TOOLS[:2], {"name": "submit_answer", "parameters": {"type": "object",
                                                                    "properties": {"value": {"type": "string"}}}}]
    (call,) = AnalystPolicy()(request(SKILL.body, messages, renamed)).tool_calls
    assert call.arguments == {"value": "1392.4"}


def test_a_script_that_prints_no_number_ends_with_a_text_answer():
    messages = [
        {"role": "user", "content": "How many orders were sold, according to sales.csv?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "python", "arguments": "{}"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "exit code 1\nKeyError: 'amount'", "is_error": True},
    ]
    reply = AnalystPolicy()(request(SKILL.body, messages))
    assert not reply.tool_calls and reply.text.startswith("I could not compute the answer")


# ---- the simulated optimizer -----------------------------------------------------------------


def reflect_offline(skill_text: str, failures: list[TaskResult], max_edits: int = 3, bad_every: int = 0):
    """The sim's answer to the real failure-reflection prompt (no server: the prompt is pure)."""
    ctx = ReflectionContext(skill_text, OptimizerBuffer(), "", max_edits)
    content = reflection_messages("failure", failures, ctx)[1].content
    reply = OptimizerSim(bad_every=bad_every)(SimpleNamespace(messages=[{"role": "user", "content": content}],
                                                              last_user=content))
    return read_proposal(reply, max_edits, source="failure")


def test_failure_feedback_becomes_the_matching_rule(tmp_path):
    failures = [r for r in sales_results(SKILL.text, "train", tmp_path) if not r.passed]
    refunds = [r for r in failures if r.feedback.endswith(": refunded orders were counted")]
    assert refunds
    (edit,) = reflect_offline(SKILL.text, refunds).edits
    last_data_bullet = "- Revenue is the sum of the order amounts; the average order value is revenue divided by the number of orders."
    assert (edit.op, edit.anchor) == ("insert_after", last_data_bullet)
    assert edit.text == "- " + analyst.REFERENCE_RULES["refunds"]

    proposal = reflect_offline(SKILL.text, failures, max_edits=4)
    assert {e.text for e in proposal.edits} == {f"- {line}" for line in analyst.REFERENCE_RULES.values()}
    trained, outcomes = apply_edits(SKILL.text, proposal.edits)
    assert all(o.applied for o in outcomes)
    assert parse_rules(trained).handled == frozenset(analyst.TRAPS)
    assert mean(sales_results(trained, "val", tmp_path / "val")) == 1.0


def test_a_partial_skill_gets_only_the_rules_it_lacks(tmp_path):
    partial = SKILL.text.replace("- Each row of sales.csv is one order.",
                                 "- Each row of sales.csv is one order.\n- " + analyst.REFERENCE_RULES["refunds"])
    failures = [r for r in sales_results(partial, "train", tmp_path) if not r.passed]
    assert not any("refunded" in r.feedback for r in failures)
    proposal = reflect_offline(partial, failures, max_edits=4)
    assert {e.text for e in proposal.edits} == {f"- {analyst.REFERENCE_RULES[t]}" for t in ("duplicates", "cents", "currency")}


def test_the_sales_harmful_edit_rounds_amounts_and_costs_val_score(tmp_path):
    view = SkillView(SKILL.text)
    bad = harmful_edit(view, 0)
    assert bad["op"] == "insert_after" and bad["text"] == "- " + analyst.HARMFUL_RULE
    assert harmful_edit(view, 0, avoid=f'rejected: "{bad["text"]}"') is None  # not proposed again
    rounded, (outcome,) = apply_edits(PERFECT, [Edit("insert_after", bad["text"], bad["anchor"])])
    assert outcome.applied and parse_rules(rounded).rounding
    assert mean(sales_results(rounded, "val", tmp_path)) < 1.0
    assert harmful_edit(SkillView(rounded), 0)["op"] == "delete"  # then deleting a needed rule


def test_sim_tells_sales_skills_from_triage_skills():
    assert SkillView(SKILL.text).domain == "sales"
    assert SkillView(load_skill(example_path("skills/ticket-triage")).text).domain == "triage"


def test_the_demos_models_send_requests_with_tools_to_the_analyst():
    models = SimulatedModels()
    prompt = SUITE.render_prompt(SUITE.tasks("val")[0])
    (call,) = models(request(SKILL.body, [{"role": "user", "content": prompt}])).tool_calls
    assert call.name == "python"
    triage = models(request("Answer with only category/priority.", [{"role": "user", "content": "Ticket:\nhi"}], tools=[]))
    assert triage == "question/P3"
