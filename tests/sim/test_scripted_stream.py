"""Streaming (Server-Sent Events) on the scripted server's Responses and Anthropic Messages routes,
through the real ``openai`` and ``anthropic`` SDKs' stream parsers, plus the scripted agent
policies' parsing of the two CLIs' skill lists."""

from __future__ import annotations

import http.client
import json
import os
from collections.abc import Iterator

import anthropic
import openai
import pytest

from helpers.agents import AgentScript, apply_rules, claude_skills, codex_skills
from helpers.paths import TESTS
from skillopt_ci.sim import Fault, ScriptedModelServer, ScriptedReply, ScriptedToolCall

PATCH = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch"


def tools_then_text(request):
    if request.tool_results:
        return "Finished: " + request.tool_results[-1]["content"]
    calls = [ScriptedToolCall("exec_command", {"cmd": "ls"})]
    if request.protocol == "responses":
        calls.append(ScriptedToolCall("apply_patch", PATCH, kind="custom"))
    return ScriptedReply("Working on it.", tool_calls=calls)


@pytest.fixture
def srv() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(tools_then_text) as server:
        yield server


@pytest.fixture
def oai(srv):
    with openai.OpenAI(api_key="test", base_url=srv.openai_base_url, max_retries=0) as client:
        yield client


@pytest.fixture
def claude(srv):
    with anthropic.Anthropic(api_key="test", base_url=srv.anthropic_base_url, max_retries=0) as client:
        yield client


def test_responses_stream_delivers_text_function_and_custom_calls_in_sdk_order(oai):
    events = list(oai.responses.create(model="gpt-5.5", input="go", stream=True))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds and "response.function_call_arguments.done" in kinds
    assert "response.custom_tool_call_input.done" in kinds
    assert [e.sequence_number for e in events] == list(range(len(events)))
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert [item.type for item in done] == ["message", "function_call", "custom_tool_call"]
    final = events[-1].response
    assert final.output_text == "Working on it." and final.usage.output_tokens > 0
    assert json.loads(final.output[1].arguments) == {"cmd": "ls"}
    assert final.output[2].name == "apply_patch" and final.output[2].input == PATCH


def test_responses_stream_and_plain_reply_agree(oai):
    plain = oai.responses.create(model="m", input="go")
    with oai.responses.stream(model="m", input="go") as stream:
        streamed = stream.get_final_response()
    assert [i.type for i in streamed.output] == [i.type for i in plain.output]
    assert streamed.output[2].input == plain.output[2].input == PATCH
    assert streamed.usage.input_tokens == plain.usage.input_tokens


def test_codex_history_items_are_flattened_for_the_policy(srv, oai):
    custom_tool = {"type": "custom", "name": "apply_patch", "description": "Edit files.",
                   "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"}}
    history = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<skills_instructions>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": '{"cmd": "ls"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": PATCH},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "Success."},
    ]
    events = list(oai.responses.create(model="m", input=history, tools=[custom_tool], stream=True))
    assert events[-1].response.output_text == "Finished: Success."
    seen = srv.calls[0].request
    assert seen.system == "<skills_instructions>" and seen.params["stream"] is True
    assert seen.messages[1:] == [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "name": "exec_command", "arguments": '{"cmd": "ls"}'}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt", "is_error": False},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c2", "name": "apply_patch", "arguments": PATCH, "kind": "custom"}]},
        {"role": "tool", "tool_call_id": "c2", "content": "Success.", "is_error": False}]
    assert seen.tool_results == [{"role": "tool", "tool_call_id": "c2", "content": "Success.", "is_error": False}]
    assert seen.tools == [{"name": "apply_patch", "description": "Edit files.", "parameters": {},
                           "kind": "custom", "format": custom_tool["format"]}]


def test_anthropic_stream_builds_the_same_message_as_the_plain_reply(claude):
    messages = [{"role": "user", "content": "go"}]
    plain = claude.messages.create(model="c", max_tokens=100, messages=messages)
    with claude.messages.stream(model="c", max_tokens=100, messages=messages) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "Working on it."
    assert [b.type for b in final.content] == ["text", "tool_use"] == [b.type for b in plain.content]
    assert final.content[1].input == {"cmd": "ls"} and final.content[1].id.startswith("toolu_")
    assert final.stop_reason == "tool_use" and final.usage.output_tokens == plain.usage.output_tokens


def test_anthropic_beta_route_streams(srv, claude):
    with claude.beta.messages.stream(model="c", max_tokens=100, messages=[{"role": "user", "content": "go"}]) as s:
        final = s.get_final_message()
    assert final.content[1].name == "exec_command"
    assert srv.calls[0].request.params["stream"] is True


def test_raw_stream_is_chunked_sse_with_event_names(srv):
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    try:
        conn.request("POST", "/v1/messages?beta=true", body=json.dumps(
            {"model": "c", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": "go"}]}))
        response = conn.getresponse()
        body = response.read().decode()
    finally:
        conn.close()
    assert response.status == 200 and response.getheader("Content-Type").startswith("text/event-stream")
    assert response.getheader("Transfer-Encoding") == "chunked"
    names = [line.split(": ", 1)[1] for line in body.splitlines() if line.startswith("event: ")]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]


def test_status_faults_answer_before_the_stream(srv, oai, claude):
    srv.inject(Fault.server_error(), Fault.rate_limit(0.1))
    with pytest.raises(openai.InternalServerError):
        list(oai.responses.create(model="m", input="go", stream=True))
    go = [{"role": "user", "content": "go"}]
    with pytest.raises(anthropic.RateLimitError), claude.messages.stream(model="c", max_tokens=5, messages=go) as s:
        s.get_final_message()
    assert [(c.status, c.fault) for c in srv.calls] == [(500, "server_error"), (429, "rate_limit")]


def test_a_dropped_stream_fails_the_client_after_it_started(srv, oai, claude):
    srv.inject(Fault.drop(), Fault.drop())
    with pytest.raises(openai.APIConnectionError):
        list(oai.responses.create(model="m", input="go", stream=True))
    go = [{"role": "user", "content": "go"}]
    with pytest.raises(Exception, match="incomplete chunked read|peer closed"), \
            claude.messages.stream(model="c", max_tokens=5, messages=go) as s:
        s.get_final_message()
    assert [c.fault for c in srv.calls] == ["drop", "drop"]
    after = list(oai.responses.create(model="m", input="go", stream=True))
    assert after[-1].type == "response.completed"  # the server carries on


CODEX_LIST = """<skills_instructions>
## Skills
### Skill roots
- `r0` = `/w/.agents/skills`
### Available skills
- shout: How to write answers. (file: r0/shout/SKILL.md)
- other: Another one. (file: /abs/other/SKILL.md)
</skills_instructions>"""

CLAUDE_LIST = """# Environment
 - Primary working directory: /w

The following skills are available for use with the Skill tool:

- shout: How to write answers.
- dataviz: Charts.

Something else."""


def test_skill_lists_are_read_from_each_cli_format():
    assert codex_skills(CODEX_LIST) == {"shout": "/w/.agents/skills/shout/SKILL.md", "other": "/abs/other/SKILL.md"}
    assert claude_skills(CLAUDE_LIST) == ["shout", "dataviz"]
    assert claude_skills("no skills here") == []


def test_rules_in_the_skill_body_change_the_answer():
    assert apply_rules("hello world", "Write the answer in upper case.") == "HELLO WORLD"
    assert apply_rules("hello world.", "Uppercase. End with an exclamation mark.") == "HELLO WORLD!"
    assert apply_rules("hello world", "Be nice.") == "hello world"


def test_agent_script_answers_side_requests_without_tools_with_text(srv, oai):
    oai.responses.create(model="m", input="Give this conversation a title.")
    assert AgentScript()(srv.calls[0].request) == "OK"


def test_azure_responses_route_streams(srv):
    with openai.AzureOpenAI(api_key="t", azure_endpoint=srv.azure_endpoint, api_version="2025-04-01-preview",
                            max_retries=0) as azure:
        events = list(azure.responses.create(model="my-deployment", input="go", stream=True))
    assert events[-1].type == "response.completed" and events[-1].response.output[2].input == PATCH


def test_the_server_process_plays_the_scripted_agent(tmp_path):
    import subprocess
    import sys

    tests = str(TESTS)  # helpers.agents lives under tests/
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (tests, os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen([sys.executable, "-m", "skillopt_ci.sim.server", "--policy",
                             "helpers.agents:play"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        url = proc.stdout.readline().split()[1]
        with openai.OpenAI(api_key="t", base_url=url + "/v1", max_retries=0) as client:
            tools = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}]
            developer = {"role": "developer", "content": CODEX_LIST}
            reply = client.responses.create(model="m", input=[developer, {"role": "user", "content": "go"}],
                                            tools=tools)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert json.loads(reply.output[0].arguments)["cmd"] == "cat /w/.agents/skills/shout/SKILL.md"
