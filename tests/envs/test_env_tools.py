"""The tools environment's loop: what the model is sent, what a rollout records, how it ends.

The model is a scripted ModelCaller (tests/fakes/tool_model.py); the tools and the workspace are
real (sandbox subprocesses, files on disk).
"""

from __future__ import annotations

import json

import pytest

from fakes.tool_model import ScriptedCaller, call, reply, turn
from helpers.tools_env import SKILL, make_suite, request_for, rollout
from helpers.wire import tiny_png
from skillopt_ci.core.errors import InputError, ProviderError
from skillopt_ci.envs.base import RolloutRequest
from skillopt_ci.envs.registry import build_environment


def kinds(result) -> list[str]:
    return [s.kind for s in result.steps]


def test_two_tool_calls_then_an_answer(tmp_path):
    suite = make_suite(tmp_path, {"data/sales.csv": "region,amount\nnorth,3\nsouth,4\n"})
    model = ScriptedCaller(
        turn(call("list_files", path="data"), text="Let me look."),
        turn(call("read_file", path="data/sales.csv")),
        reply("There are 2 rows."),
    )
    req = request_for(suite, {"files": ["data/sales.csv"]}, keep_dir=tmp_path / "keep")
    env, result = rollout(suite, model, req, tools=["list_files", "read_file"])
    try:
        assert result.ok and result.output == "There are 2 rows."
        assert kinds(result) == ["model", "tool_call", "tool_result", "model", "tool_call", "tool_result", "model"]
        listed, read = result.steps[2], result.steps[5]
        assert listed.text.strip() == "data/sales.csv" and not listed.is_error
        assert read.text == "region,amount\nnorth,3\nsouth,4\n" and read.name == "read_file"
        assert result.steps[4].arguments == '{"path": "data/sales.csv"}'
        assert result.steps[4].call_id == result.steps[5].call_id
        # usage, cost and latency are summed over the three calls
        assert result.usage.input_tokens == 320 and result.usage.output_tokens == 25
        assert result.cost_usd == pytest.approx(0.004) and result.latency_s == pytest.approx(1.25)
        assert not result.cached and result.finish_reason == "stop"
        assert "[tool_result read_file] region,amount" in result.transcript
        assert result.transcript.endswith("[final answer] There are 2 rows.")
    finally:
        result.close()
    # what the model was sent: the skill as system, the prompt as user, then each tool result
    first, last = model.received[0], model.received[-1]
    assert [m.role for m in first.messages] == ["system", "user"]
    assert first.messages[0].content == "# Analyst\nUse python." and first.messages[1].content == "How many rows?"
    assert [t.name for t in first.tools] == ["list_files", "read_file"]
    assert first.context == env.identity() and first.context["type"] == "tools"
    assert [m.role for m in last.messages] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    tool_msg = last.messages[-1]
    assert tool_msg.tool_call_id == result.steps[5].call_id and tool_msg.name == "read_file"
    assert last.messages[2].tool_calls[0].name == "list_files"


def test_submit_answer_ends_the_rollout_with_its_answer(tmp_path):
    suite = make_suite(tmp_path)
    model = ScriptedCaller(turn(call("submit_answer", answer="7"), call("shell", command="echo never")))
    _, result = rollout(suite, model)
    result.close()
    assert result.ok and result.output == "7" and result.finish_reason == "submit_answer"
    assert kinds(result) == ["model", "tool_call", "tool_result"]  # the call after it never ran


def test_a_hanging_tool_is_an_error_result_and_the_model_then_answers(tmp_path):
    suite = make_suite(tmp_path)
    model = ScriptedCaller(turn(call("shell", command="sleep 60")), reply("gave up waiting"))
    _, result = rollout(suite, model, tools=["shell"], tool_timeout_s=1)
    result.close()
    assert result.ok and result.output == "gave up waiting"
    hung = result.steps[2]
    assert hung.kind == "tool_result" and hung.is_error
    assert model.received[1].messages[-1].is_error  # the model was told it failed
    assert "time" in hung.text.lower()


def test_a_tool_printing_50_mb_is_capped(tmp_path):
    suite = make_suite(tmp_path)
    code = "import sys\nfor _ in range(50):\n    sys.stdout.write('x' * 1_000_000)\n"
    model = ScriptedCaller(turn(call("python", code=code)), reply("done"))
    _, result = rollout(suite, model, tools=["python"], tool_output_chars=5000)
    result.close()
    shown = model.received[1].messages[-1].text
    assert result.ok and len(shown) <= 6000 and "xxxx" in shown
    assert len(result.steps[2].text) <= 6000


def test_max_turns_gives_an_errored_rollout_with_its_trajectory(tmp_path):
    suite = make_suite(tmp_path)
    model = ScriptedCaller(default=turn(call("list_files")))
    _, result = rollout(suite, model, max_turns=3)
    result.close()
    assert not result.ok and result.error["kind"] == "max_turns"
    assert len(model.received) == 3
    assert kinds(result) == ["model", "tool_call", "tool_result"] * 3 + ["error"]
    assert result.output == "" and "max_turns" in result.transcript


def test_an_undeclared_tool_is_an_error_shown_to_the_model(tmp_path):
    suite = make_suite(tmp_path)
    model = ScriptedCaller(turn(call("delete_everything", path="/")), reply("sorry"))
    _, result = rollout(suite, model, tools=["read_file", "submit_answer"])
    result.close()
    assert result.ok and result.output == "sorry"
    shown = model.received[1].messages[-1]
    assert shown.is_error and "unknown tool 'delete_everything'" in shown.text
    assert "read_file, submit_answer" in shown.text


@pytest.mark.parametrize("arguments, says", [
    ('{"path": ', "not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
    ("{}", "'path' is a required property"),
    ('{"path": 3}', "3 is not of type 'string'"),
    ('{"path": "a", "mode": "x"}', "Additional properties are not allowed"),
])
def test_bad_arguments_are_an_error_shown_to_the_model(tmp_path, arguments, says):
    suite = make_suite(tmp_path, {"a": "hello"})
    model = ScriptedCaller(turn(call("read_file", arguments)), reply("ok"))
    _, result = rollout(suite, model, tools=["read_file"])
    result.close()
    shown = model.received[1].messages[-1]
    assert result.ok and shown.is_error and says in shown.text, shown.text


def test_a_provider_failure_ends_the_rollout_with_its_steps(tmp_path):
    suite = make_suite(tmp_path)
    model = ScriptedCaller(turn(call("list_files")), ProviderError("rate_limit", "429 after 3 retries"))
    _, result = rollout(suite, model)
    result.close()
    assert result.error == {"kind": "rate_limit", "message": "429 after 3 retries"}
    assert kinds(result) == ["model", "tool_call", "tool_result", "error"]


def test_the_skill_folder_is_installed_and_named_in_the_system_message(tmp_path):
    suite = make_suite(tmp_path)
    folder = tmp_path / "skills" / "csv-analyst"
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL)
    (folder / "scripts" / "count.py").write_text("print('counted')\n")
    req = request_for(suite)
    req = RolloutRequest(**{**req.__dict__, "skill_dir": folder})
    model = ScriptedCaller(turn(call("python", code="import runpy; runpy.run_path('skills/csv-analyst/scripts/count.py')")),
                           reply("ok"))
    _, result = rollout(suite, model, req, tools=["python"])
    result.close()
    system = model.received[0].messages[0].text
    assert system.startswith("# Analyst") and "skills/csv-analyst/" in system.splitlines()[-1]
    assert "counted" in result.steps[2].text and not result.steps[2].is_error


def test_files_the_rollout_writes_are_kept_when_small(tmp_path):
    suite = make_suite(tmp_path)
    model = ScriptedCaller(turn(call("write_file", path="out/answer.txt", content="42\n")), reply("wrote it"))
    keep = tmp_path / "keep"
    _, result = rollout(suite, model, request_for(suite, keep_dir=keep), tools=["write_file"])
    assert result.files == ("out/answer.txt",)
    assert (result.workspace / "out/answer.txt").read_text() == "42\n"  # for the scorer, until release
    result.close()
    assert (keep / "out/answer.txt").read_text() == "42\n"
    assert not result.workspace.exists()


def test_the_transcript_is_bounded_and_keeps_start_and_end(tmp_path):
    suite = make_suite(tmp_path, {"big.txt": "y" * 3000})
    model = ScriptedCaller(*[turn(call("read_file", path="big.txt"), text=f"turn {i}") for i in range(8)],
                           reply("the end"))
    _, result = rollout(suite, model, request_for(suite, {"files": "big.txt"}), transcript_chars=5000, max_turns=10)
    result.close()
    text = result.transcript
    assert len(text) <= 5000
    assert text.startswith("[model] turn 0") and text.endswith("[final answer] the end")
    assert "cut from the middle" in text and "[tool_result read_file] yyy" in text


def test_a_missing_task_file_is_an_input_error_naming_the_task(tmp_path):
    suite = make_suite(tmp_path)
    with pytest.raises(InputError, match="task 't1': file 'nope.csv' not found"):
        rollout(suite, ScriptedCaller(), request_for(suite, {"files": "nope.csv"}))


@pytest.mark.parametrize("options, says", [
    ({"tools": ["python", "browser"]}, "tools[1]: unknown built-in tool 'browser'"),
    ({"tools": []}, "must be a non-empty list"),
    ({"tools": ["python", "python"]}, "two tools are named 'python'"),
    ({"max_turns": 0}, "max_turns must be positive"),
])
def test_bad_options_are_input_errors(tmp_path, options, says):
    suite = make_suite(tmp_path)
    with pytest.raises(InputError, match=__import__("re").escape(says)):
        build_environment({"type": "tools", **options}, suite)


def test_identity_names_the_options(tmp_path):
    env = build_environment({"type": "tools", "tools": ["python"], "max_turns": 4}, make_suite(tmp_path))
    assert json.loads(json.dumps(env.identity()))["max_turns"] == 4
    assert env.identity()["tools"] == ["python"]


def test_task_images_go_with_the_prompt_and_are_kept_once(tmp_path):
    suite = make_suite(tmp_path)
    png = tiny_png((10, 20, 30))  # a real image: what the bytes are decides the media type sent
    (suite / "chart.png").write_bytes(png)
    req = request_for(suite, {"images": ["chart.png"]})
    req = RolloutRequest(**{**req.__dict__, "image_dir": tmp_path / "run" / "images", "sample_index": 2})
    model = ScriptedCaller(reply("a bar chart"))
    _, result = rollout(suite, model, req)
    result.close()
    sent = model.received[0]
    assert sent.sample_index == 2
    user = sent.messages[1]
    assert user.text == "How many rows?" and [i.data for i in user.images] == [png]
    shown = result.steps[0]
    assert shown.kind == "observation" and len(shown.images) == 1
    assert (tmp_path / "run" / shown.images[0]).read_bytes() == png


def test_a_rollout_is_cached_only_when_every_call_was_and_cost_is_unknown_when_one_is(tmp_path):
    from dataclasses import replace
    suite = make_suite(tmp_path)
    hit = replace(turn(call("list_files")), cached=True)
    _, all_hits = rollout(suite, ScriptedCaller(hit, replace(reply("x"), cached=True)))
    _, one_miss = rollout(suite, ScriptedCaller(hit, replace(reply("x"), cost_usd=None)))
    all_hits.close()
    one_miss.close()
    assert all_hits.cached and all_hits.cost_usd == pytest.approx(0.003)
    assert not one_miss.cached and one_miss.cost_usd is None


def test_a_task_file_placed_outside_the_workspace_is_an_input_error(tmp_path):
    suite = make_suite(tmp_path, {"a.csv": "x\n"})
    with pytest.raises(InputError, match="task 't1': "):
        rollout(suite, ScriptedCaller(), request_for(suite, {"files": {"../a.csv": "a.csv"}}))
