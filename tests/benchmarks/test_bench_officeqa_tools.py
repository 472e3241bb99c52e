"""The `documents` toolset (glob, read, grep over the task's own files) and the tools environment's
`answer_tag` ending, with a scripted ModelCaller and real workspaces."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fakes.tool_model import ScriptedCaller, call, reply, turn
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.skill import parse_skill
from skillopt_ci.core.task import Task
from skillopt_ci.envs.base import RolloutRequest
from skillopt_ci.envs.registry import build_environment

SKILL = "---\nname: analyst\ndescription: Reads bulletins.\n---\nUse grep first.\n"
BULLETIN = "".join(f"line {n}: receipts {n * 10}\n" for n in range(1, 201)) + "Total RECEIPTS 12,345\n"


def make_suite(tmp_path: Path) -> Path:
    suite = tmp_path / "suite"
    (suite / "docs").mkdir(parents=True)
    (suite / "suite.yaml").write_text("name: officeqa\n")
    (suite / "docs" / "treasury_bulletin_1944_01.txt").write_text(BULLETIN)
    (suite / "docs" / "treasury_bulletin_1950_02.txt").write_text("Other bulletin\n")
    (suite / "secret.txt").write_text("the answer key\n")
    return suite


def request(suite: Path, files: dict[str, str]) -> RolloutRequest:
    record = {"id": "UID0002", "input": "q", "files": files}
    return RolloutRequest(skill=parse_skill(SKILL, path="skills/analyst/SKILL.md"),
                          task=Task(id="UID0002", input="q", fields=record, source="test.jsonl:1"),
                          prompt="How much?", suite_dir=suite)


def run(suite: Path, model: ScriptedCaller, files: dict[str, str] | None = None, **options):
    files = files or {"treasury_bulletin_1944_01.txt": "docs/treasury_bulletin_1944_01.txt"}
    env = build_environment({"type": "tools", "tools": ["documents"], "max_turns": 24, **options}, suite)
    result = asyncio.run(env.run(request(suite, files), model))
    result.close()
    return env, result


def results(result) -> list[tuple[str, bool]]:
    return [(s.text, s.is_error) for s in result.steps if s.kind == "tool_result"]


def test_the_toolset_offers_glob_read_grep_and_they_work_on_the_source_file(tmp_path):
    suite = make_suite(tmp_path)
    model = ScriptedCaller(
        turn(call("glob", pattern="*1944*"), call("glob", pattern="**/*.txt"), call("glob", pattern="*.csv")),
        turn(call("grep", pattern="total receipts", path="treasury_bulletin_1944_01.txt")),
        turn(call("read", path="./treasury_bulletin_1944_01.txt", start=199, limit=5)),
        turn(call("grep", pattern="receipts", path="treasury_bulletin_1944_01.txt")),
        turn(call("read", path="treasury_bulletin_1944_01.txt")),
        reply("<answer>12,345</answer>"),
    )
    env, result = run(suite, model)
    assert [s.name for s in model.received[0].tools] == ["glob", "read", "grep"]
    shown = results(result)
    assert shown[0] == ("treasury_bulletin_1944_01.txt", False)
    assert shown[1] == ("treasury_bulletin_1944_01.txt", False)
    assert shown[2] == ("(no source file matches '*.csv'; the source files are: treasury_bulletin_1944_01.txt)", False)
    assert shown[3] == ("201: Total RECEIPTS 12,345", False)  # literal, case-insensitive
    assert shown[4][0] == ("treasury_bulletin_1944_01.txt lines 199-201 of 201:\n"
                           "line 199: receipts 1990\nline 200: receipts 2000\nTotal RECEIPTS 12,345")
    many = shown[5][0].splitlines()
    assert len(many) == 21 and many[-1] == "[cut: showed 20 of 201 matching lines]"
    page = shown[6][0]
    assert page.startswith("treasury_bulletin_1944_01.txt lines 1-80 of 201:\nline 1: receipts 10\n")
    assert len(page) <= 4_000 + 60
    assert result.ok and result.output == "<answer>12,345</answer>"


def test_read_cuts_at_4000_characters_and_says_where_to_continue(tmp_path):
    suite = make_suite(tmp_path)
    (suite / "docs" / "treasury_bulletin_1944_01.txt").write_text("".join(f"{n:03d} " + "x" * 95 + "\n" for n in range(1, 101)))
    model = ScriptedCaller(turn(call("read", path="treasury_bulletin_1944_01.txt", limit=100)), reply("<answer>1</answer>"))
    _, result = run(suite, model)
    text = results(result)[0][0]
    assert text.endswith("[cut at 4000 characters: continue with start=41]")  # 40 lines of 100 characters fit
    assert "lines 1-40 of 100" in text


@pytest.mark.parametrize("path", [
    "secret.txt", "../secret.txt", "docs/../../secret.txt", "/etc/passwd", "treasury_bulletin_1950_02.txt",
    "docs/treasury_bulletin_1950_02.txt", "skills/analyst/SKILL.md", ".",
])
def test_read_and_grep_refuse_anything_but_the_tasks_source_files(tmp_path, path):
    suite = make_suite(tmp_path)
    model = ScriptedCaller(turn(call("read", path=path), call("grep", pattern="answer", path=path)),
                           reply("<answer>1</answer>"))
    _, result = run(suite, model)
    for text, is_error in results(result):
        assert is_error
        assert text == f"{path}: not one of this task's source files; they are: treasury_bulletin_1944_01.txt"


def test_glob_lists_only_the_tasks_files_and_a_multi_file_task_sees_both(tmp_path):
    suite = make_suite(tmp_path)
    files = {"treasury_bulletin_1944_01.txt": "docs/treasury_bulletin_1944_01.txt",
             "treasury_bulletin_1950_02.txt": "docs/treasury_bulletin_1950_02.txt"}
    model = ScriptedCaller(turn(call("glob", pattern="*"), call("glob", pattern="../*"),
                                call("grep", pattern="other", path="treasury_bulletin_1950_02.txt")),
                           reply("<answer>1</answer>"))
    _, result = run(suite, model, files)
    shown = results(result)
    assert shown[0] == ("treasury_bulletin_1944_01.txt\ntreasury_bulletin_1950_02.txt", False)
    assert shown[1][0].startswith("(no source file matches '../*'")
    assert shown[2] == ("1: Other bulletin", False)


def test_bad_arguments_are_error_results(tmp_path):
    suite = make_suite(tmp_path)
    model = ScriptedCaller(turn(call("read", path="treasury_bulletin_1944_01.txt", start=0),
                                call("grep", pattern="  ", path="treasury_bulletin_1944_01.txt"),
                                call("read", path="treasury_bulletin_1944_01.txt", start=999)),
                           reply("<answer>1</answer>"))
    _, result = run(suite, model)
    shown = results(result)
    assert shown[0][1] and "start: 0 is less than the minimum of 1" in shown[0][0]
    assert shown[1] == ("grep: the pattern is empty", True)
    assert shown[2] == ("treasury_bulletin_1944_01.txt has 201 lines; start=999 is past its end", False)


def test_a_toolset_tool_and_a_builtin_of_the_same_name_are_refused(tmp_path):
    with pytest.raises(InputError, match="two tools are named 'grep'"):
        build_environment({"type": "tools", "tools": ["grep", "documents"]}, make_suite(tmp_path))


# --- answer_tag ------------------------------------------------------------------------------------


def test_a_final_reply_without_the_answer_tag_is_no_answer_not_an_error(tmp_path):
    suite = make_suite(tmp_path)
    _, result = run(suite, ScriptedCaller(reply("I think it is 12,345.")), answer_tag="answer")
    assert result.ok and result.output == "" and result.finish_reason == "no_answer"
    assert result.steps[-1].text == "no_answer: the final reply called no tool and has no <answer> tag"
    assert result.transcript.endswith("[no answer] the final reply called no tool and has no <answer> tag")
    _, tagged = run(suite, ScriptedCaller(reply("So: <ANSWER>12,345</ANSWER>")), answer_tag="answer")
    assert tagged.output == "So: <ANSWER>12,345</ANSWER>"
    _, plain = run(suite, ScriptedCaller(reply("12,345")))  # without the option the reply is the answer
    assert plain.output == "12,345"


def test_running_out_of_turns_with_answer_tag_is_no_answer(tmp_path):
    suite = make_suite(tmp_path)
    looping = turn(call("glob", pattern="*"))
    _, result = run(suite, ScriptedCaller(default=looping), answer_tag="answer", max_turns=3)
    assert result.ok and result.output == "" and result.finish_reason == "no_answer"
    _, errored = run(suite, ScriptedCaller(default=looping), max_turns=3)
    assert not errored.ok and errored.error["kind"] == "max_turns"
    with pytest.raises(InputError, match="answer_tag must be a tag name"):
        build_environment({"type": "tools", "answer_tag": "<answer>"}, suite)
