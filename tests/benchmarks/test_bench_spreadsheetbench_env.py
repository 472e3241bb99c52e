"""The ``codegen`` environment's loop with a scripted model and the real sandbox: what the model is
sent, the repair turns, the final run on every case, how a rollout ends."""

from __future__ import annotations

import asyncio
from pathlib import Path

import openpyxl
import pytest

from fakes.tool_model import ScriptedCaller, reply
from skillopt_ci.benchmarks.packs.spreadsheetbench.codegen import extract_code
from skillopt_ci.core.errors import InputError, ProviderError
from skillopt_ci.core.skill import parse_skill
from skillopt_ci.core.task import Task
from skillopt_ci.envs.base import RolloutRequest
from skillopt_ci.envs.registry import build_environment

SKILL = "---\nname: sheets\ndescription: Edit workbooks.\n---\nWrite values, not formulas.\n"
WRITE_B1 = ("import openpyxl\nwb = openpyxl.load_workbook(INPUT_PATH)\nws = wb.active\n"
            "ws['B1'] = ws['A1'].value * 10\nwb.save(OUTPUT_PATH)\n")


def block(code: str, text: str = "Here it is.") -> str:
    return f"{text}\n```python\n{code}```\n"


def make_suite(tmp_path: Path, values: tuple[int, ...] = (1, 2)) -> tuple[Path, dict]:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "suite.yaml").write_text("name: sheets\n")
    files, cases = {}, []
    for i, value in enumerate(values, 1):
        wb = openpyxl.Workbook()
        wb.active["A1"] = value
        wb.save(suite / f"in{i}.xlsx")
        files[f"cases/{i}/input.xlsx"] = f"in{i}.xlsx"
        cases.append({"input": f"cases/{i}/input.xlsx", "output": f"cases/{i}/output.xlsx"})
    return suite, {"files": files, "cases": cases}


def run(suite: Path, model: ScriptedCaller, record: dict, **options):
    fields = {"id": "t1", "input": "Multiply A1 by 10 into B1.", **record}
    request = RolloutRequest(skill=parse_skill(SKILL, path="skills/sheets/SKILL.md"),
                             task=Task("t1", fields["input"], fields=fields, source="test.jsonl:1"),
                             prompt=fields["input"], suite_dir=suite)
    env = build_environment({"type": "codegen", **options}, suite)
    return asyncio.run(env.run(request, model))


def output_b1(result, case: int):
    wb = openpyxl.load_workbook(result.workspace / f"cases/{case}/output.xlsx")
    return wb.active["B1"].value


def test_a_working_program_runs_on_every_case(tmp_path):
    suite, record = make_suite(tmp_path, (1, 2, 3))
    model = ScriptedCaller(reply(block(WRITE_B1)))
    result = run(suite, model, record)
    try:
        assert result.ok and result.finish_reason == "ok" and result.output == WRITE_B1
        assert [output_b1(result, i) for i in (1, 2, 3)] == [10, 20, 30]
        assert [s.kind for s in result.steps] == ["model", "action", "observation", "observation", "observation"]
        assert result.steps[-1].text == "case 3 of 3: output written"
        assert {"solution.py", "cases/1/output.xlsx", "cases/3/output.xlsx"} <= set(result.files)
    finally:
        result.close()
    sent = model.received[0].messages
    assert [m.role for m in sent] == ["system", "user"] and sent[0].content == "Write values, not formulas."
    assert sent[1].content.startswith("Multiply A1 by 10 into B1.\n\nReply with one complete Python program")
    assert model.received[0].context["type"] == "codegen"


def test_an_execution_error_goes_back_to_the_model_which_repairs_it(tmp_path):
    suite, record = make_suite(tmp_path)
    broken = WRITE_B1.replace("* 10", "* undefined_name")
    model = ScriptedCaller(reply(block(broken)), reply(block(WRITE_B1, "Fixed.")))
    result = run(suite, model, record)
    try:
        assert result.ok and result.finish_reason == "ok"
        assert [output_b1(result, i) for i in (1, 2)] == [10, 20]
    finally:
        result.close()
    repair = model.received[1].messages
    assert [m.role for m in repair] == ["system", "user", "assistant", "user"]
    error = repair[3].content
    assert error.startswith("Your program failed on the input workbook.")
    assert 'File "solution.py", line 4, in <module>' in error and "NameError: name 'undefined_name'" in error
    assert "skillopt-ws" not in error and "exec(" not in error  # no machine path, no runner frame
    assert error.endswith("reply with the whole corrected program in one ```python block.")


def test_a_reply_without_code_and_a_program_writing_no_file_are_told_and_count_as_turns(tmp_path):
    suite, record = make_suite(tmp_path, (4,))
    model = ScriptedCaller(reply("I would use openpyxl."), reply(block("print('done')\n")), reply(block(WRITE_B1)))
    result = run(suite, model, record)
    try:
        assert result.ok and output_b1(result, 1) == 40
    finally:
        result.close()
    assert "no fenced Python code block" in model.received[1].messages[-1].content
    told = model.received[2].messages[-1].content
    assert "wrote no file at OUTPUT_PATH" in told and "done" in told


def test_turns_running_out_is_a_measured_failure_with_the_last_program_run_on_every_case(tmp_path):
    suite, record = make_suite(tmp_path)
    model = ScriptedCaller(default=reply(block("raise SystemExit(3)\n")))
    result = run(suite, model, record, max_turns=2)
    try:
        assert result.ok and result.finish_reason == "max_turns"  # not missing data: the code failed
        assert len(model.received) == 2
        assert result.steps[-1].is_error and result.steps[-1].text.startswith("case 2 of 2: failed")
        assert not (result.workspace / "cases/1/output.xlsx").exists()
        assert "[final program: max_turns, 2 turn(s)]" in result.transcript
    finally:
        result.close()


def test_a_program_past_its_time_limit_is_killed_and_reported(tmp_path):
    suite, record = make_suite(tmp_path, (1,))
    copy = "import shutil\nshutil.copyfile(INPUT_PATH, OUTPUT_PATH)\n"  # quick even on a loaded machine
    model = ScriptedCaller(reply(block("import time\ntime.sleep(60)\n")), reply(block(copy)))
    result = run(suite, model, record, timeout_s=2)
    try:
        assert result.ok and result.finish_reason == "ok"
        assert (result.workspace / "cases/1/output.xlsx").is_file()
    finally:
        result.close()
    assert "killed: time limit 2s" in model.received[1].messages[-1].content


def test_the_program_sees_no_api_key(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-000000000000")
    suite, record = make_suite(tmp_path, (1,))
    code = ("import os, openpyxl\nwb = openpyxl.Workbook()\n"
            "wb.active['A1'] = ','.join(sorted(os.environ))\nwb.active['A2'] = os.environ['INPUT_PATH']\n"
            "wb.save(OUTPUT_PATH)\n")
    result = run(suite, ScriptedCaller(reply(block(code))), record)
    try:
        wb = openpyxl.load_workbook(result.workspace / "cases/1/output.xlsx")
        names = wb.active["A1"].value.split(",")
        assert "OPENAI_API_KEY" not in names and "OUTPUT_PATH" in names
        assert wb.active["A2"].value == "cases/1/input.xlsx"
    finally:
        result.close()


def test_a_provider_failure_is_an_errored_rollout(tmp_path):
    suite, record = make_suite(tmp_path, (1,))
    result = run(suite, ScriptedCaller(ProviderError("server", "503 from the provider")), record)
    try:
        assert not result.ok and result.error == {"kind": "server", "message": "503 from the provider"}
    finally:
        result.close()


def test_a_task_without_cases_and_bad_options_are_input_errors(tmp_path):
    suite, _ = make_suite(tmp_path, (1,))
    with pytest.raises(InputError, match='needs "cases"'):
        run(suite, ScriptedCaller(), {"files": {}})
    with pytest.raises(InputError, match="max_turns must be positive"):
        build_environment({"type": "codegen", "max_turns": 0}, suite)


def test_the_program_is_the_last_python_block():
    assert extract_code("a\n```python\nx = 1\n```\nthen\n```py\nx = 2\n```") == "x = 2\n"
    assert extract_code("```\ny = 3\n```") == "y = 3\n"
    assert extract_code("```python\nz = 1\n```\n```text\nnot code\n```") == "z = 1\n"
    assert extract_code("no code here") is None
