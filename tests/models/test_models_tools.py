"""Tool calls and images through the model layer, end to end: the pool and each backend, the real
openai and anthropic SDKs, the scripted server. Each test checks the request as the server saw it
and the Completion the caller gets."""

from __future__ import annotations

import json

import pytest

from helpers.cli import run_cli
from helpers.project import write_project
from helpers.wire import make_pool, protocol_setup, run_calls, tiny_png
from skillopt_ci.core.errors import InputError, ProviderError
from skillopt_ci.inputs.config import ModelSpec
from skillopt_ci.models.base import ImagePart, Message, ToolCall, ToolSpec, Usage
from skillopt_ci.models.openai_backend import parse_chat_completion
from skillopt_ci.models.registry import create_backend, resolve_endpoint
from skillopt_ci.models.responses_backend import parse_response
from skillopt_ci.sim import Fault, ScriptedModelServer, ScriptedReply, ScriptedToolCall

ADD = ToolSpec("add", "Add two integers.", {"type": "object", "properties": {"a": {"type": "integer"},
                                                                            "b": {"type": "integer"}}})
QUESTION = [Message("system", "Use the tools."), Message("user", "What is 2+3?")]


def calculator(request):
    """Call ``add`` first; once its result is back, answer with it."""
    if request.tool_results:
        return ScriptedReply(f"The sum is {request.tool_results[0]['content']}.", input_tokens=30, output_tokens=4)
    return ScriptedReply(tool_calls=[ScriptedToolCall("add", {"a": 2, "b": 3})], input_tokens=20, output_tokens=7)


def second_turn(results):
    first = results[0]
    call = first.tool_calls[0]
    return {"messages": [*QUESTION, Message("assistant", first.text, tool_calls=first.tool_calls),
                         Message("tool", "5", tool_call_id=call.id, name=call.name)], "tools": [ADD]}


@pytest.fixture
def srv():
    with ScriptedModelServer(calculator) as server:
        yield server


def two_turns(tmp_path, srv, protocol):
    spec, env = protocol_setup(protocol, srv)
    return run_calls(make_pool(tmp_path, spec, env), {"messages": QUESTION, "tools": [ADD]}, second_turn)


def test_chat_completions_two_turn_tool_call(tmp_path, srv):
    first, second = two_turns(tmp_path, srv, "openai")
    assert first.text == "" and first.finish_reason == "tool_calls" and first.usage == Usage(20, 7)
    (call,) = first.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("add", {"a": 2, "b": 3}) and call.id.startswith("call_")
    assert second.text == "The sum is 5." and second.finish_reason == "stop" and second.tool_calls == ()
    sent = [c.request.body for c in srv.calls]
    assert sent[0]["tools"] == [{"type": "function", "function": ADD.to_dict()}]
    assert sent[1]["messages"][2:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call.id, "type": "function", "function": {"name": "add", "arguments": call.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": "5"},
    ]
    seen = srv.calls[1].request
    assert seen.tools == [ADD.to_dict()]
    assert seen.messages[1]["tool_calls"] == [call.to_dict()]
    assert seen.tool_results == [{"role": "tool", "tool_call_id": call.id, "content": "5", "is_error": False}]


def test_responses_api_two_turn_tool_call(tmp_path, srv):
    first, second = two_turns(tmp_path, srv, "responses")
    assert first.text == "" and first.finish_reason == "tool_calls" and first.usage == Usage(20, 7)
    (call,) = first.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("add", {"a": 2, "b": 3})
    assert second.text == "The sum is 5." and second.finish_reason == "stop" and second.usage == Usage(30, 4)
    assert [c.request.protocol for c in srv.calls] == ["responses", "responses"]
    body = srv.calls[1].request.body
    assert body["instructions"] == "Use the tools." and body["store"] is False and "messages" not in body
    assert body["tools"] == [{"type": "function", **ADD.to_dict(), "strict": False}]
    assert body["input"] == [
        {"role": "user", "content": "What is 2+3?"},
        {"type": "function_call", "call_id": call.id, "name": "add", "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.id, "output": "5"},
    ]
    assert srv.calls[1].request.tool_results[0]["content"] == "5"


def test_anthropic_two_turn_tool_call(tmp_path, srv):
    first, second = two_turns(tmp_path, srv, "anthropic")
    assert first.text == "" and first.finish_reason == "tool_use" and first.usage == Usage(20, 7)
    (call,) = first.tool_calls
    assert call.id.startswith("toolu_") and json.loads(call.arguments) == {"a": 2, "b": 3}
    assert second.text == "The sum is 5." and second.finish_reason == "end_turn"
    body = srv.calls[1].request.body
    assert body["system"] == "Use the tools."
    assert srv.calls[0].request.body["tools"] == [{"name": "add", "description": ADD.description,
                                                   "input_schema": ADD.parameters}]
    assert body["messages"][1:] == [
        {"role": "assistant", "content": [{"type": "tool_use", "id": call.id, "name": "add", "input": {"a": 2, "b": 3}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "5", "is_error": False}]},
    ]


def test_anthropic_consecutive_results_share_one_user_turn_and_keep_is_error(tmp_path, srv):
    spec, env = protocol_setup("anthropic", srv)
    calls = (ToolCall("toolu_1", "add", '{"a": 1, "b": 1}'), ToolCall("toolu_2", "add", '{"a": "x"}'))
    history = [*QUESTION, Message("assistant", "Two sums.", tool_calls=calls),
               Message("tool", "2", tool_call_id="toolu_1", name="add"),
               Message("tool", "b is required", tool_call_id="toolu_2", name="add", is_error=True)]
    run_calls(make_pool(tmp_path, spec, env), {"messages": history, "tools": [ADD]})
    body = srv.calls[0].request.body
    assert body["messages"][1]["content"][0] == {"type": "text", "text": "Two sums."}
    assert body["messages"][2:] == [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "2", "is_error": False},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "b is required", "is_error": True},
    ]}]
    assert [r["is_error"] for r in srv.calls[0].request.tool_results] == [False, True]


@pytest.mark.parametrize("protocol", ["openai", "responses"])
def test_openai_protocols_mark_a_failed_tool_in_its_text(tmp_path, srv, protocol):
    spec, env = protocol_setup(protocol, srv)
    history = [*QUESTION, Message("assistant", "", tool_calls=(ToolCall("c1", "add", "{}"),)),
               Message("tool", "b is required", tool_call_id="c1", name="add", is_error=True)]
    run_calls(make_pool(tmp_path, spec, env), {"messages": history, "tools": [ADD]})
    assert srv.calls[0].request.tool_results[0]["content"] == "Error: b is required"


@pytest.mark.parametrize("protocol", ["openai", "responses", "azure", "anthropic"])
def test_an_image_reaches_the_server_intact(tmp_path, srv, protocol):
    png = tiny_png((10, 200, 30))
    spec, env = protocol_setup(protocol, srv)
    message = Message("user", ("What colour is this?", ImagePart("image/png", png)))
    run_calls(make_pool(tmp_path, spec, env), {"messages": [message]})
    seen = srv.calls[0].request
    assert seen.last_user == "What colour is this?"
    (image,) = seen.images
    assert image["sha256"] == ImagePart("image/png", png).sha256 and image["bytes"] == png
    assert image["media_type"] == "image/png"


@pytest.mark.parametrize("protocol", ["openai", "responses", "anthropic"])
def test_a_tool_result_with_an_image_reaches_the_server(tmp_path, srv, protocol):
    png = tiny_png()
    spec, env = protocol_setup(protocol, srv)
    history = [*QUESTION, Message("assistant", "", tool_calls=(ToolCall("c1", "add", "{}"),)),
               Message("tool", ("a chart", ImagePart("image/png", png)), tool_call_id="c1", name="add")]
    run_calls(make_pool(tmp_path, spec, env), {"messages": history, "tools": [ADD]})
    seen = srv.calls[0].request
    assert seen.tool_results[0]["content"] == "a chart"
    assert [i["sha256"] for i in seen.images] == [ImagePart("image/png", png).sha256]


@pytest.mark.parametrize("protocol", ["openai", "responses", "anthropic"])
def test_a_malformed_image_is_a_bad_request(tmp_path, srv, protocol):
    spec, env = protocol_setup(protocol, srv)
    message = Message("user", ("look", ImagePart("image/png", b"this is not a png")))
    with pytest.raises(ProviderError) as caught:
        run_calls(make_pool(tmp_path, spec, env), {"messages": [message]})
    assert caught.value.kind == "bad_request" and caught.value.status == 400
    assert "could not process image" in caught.value.message
    assert srv.call_count == 0


def test_reply_with_text_and_tool_calls_keeps_both(tmp_path):
    def policy(request):
        return ScriptedReply("Let me add.", tool_calls=[ScriptedToolCall("add", {"a": 1, "b": 2}, id="c-9"),
                                                        ScriptedToolCall("add", '{"a": 3, "b": 4}', id="c-10")])

    with ScriptedModelServer(policy) as server:
        for protocol in ("openai", "responses", "anthropic"):
            spec, env = protocol_setup(protocol, server)
            (done,) = run_calls(make_pool(tmp_path, spec, env), {"messages": QUESTION, "tools": [ADD]})
            assert done.text == "Let me add.", protocol
            assert [(c.id, json.loads(c.arguments)) for c in done.tool_calls] == [
                ("c-9", {"a": 1, "b": 2}), ("c-10", {"a": 3, "b": 4})], protocol


def test_azure_responses_route_uses_the_deployment_and_a_preview_api_version(tmp_path, srv):
    spec = {"provider": "azure-openai", "model": "my-gpt5-deployment", "api": "responses"}
    env = {"AZURE_OPENAI_API_KEY": "az-key", "AZURE_OPENAI_ENDPOINT": srv.azure_endpoint}
    (done,) = run_calls(make_pool(tmp_path, spec, env), {"messages": QUESTION, "tools": [ADD]})
    assert done.tool_calls[0].name == "add"
    seen = srv.calls[0].request
    assert seen.protocol == "responses" and seen.model == "my-gpt5-deployment"
    assert seen.headers["api-key"] == "az-key"
    assert resolve_endpoint(ModelSpec.from_dict("target", spec), env).api_version == "2025-04-01-preview"
    env["OPENAI_API_VERSION"] = "2025-03-01-preview"
    assert resolve_endpoint(ModelSpec.from_dict("target", spec), env).api_version == "2025-03-01-preview"


def test_responses_sends_max_tokens_as_max_output_tokens(tmp_path, srv):
    spec, env = protocol_setup("responses", srv)
    spec["params"] = {"max_tokens": 64, "temperature": 0}
    run_calls(make_pool(tmp_path, spec, env), {"messages": QUESTION})
    params = srv.calls[0].request.params
    assert params["max_output_tokens"] == 64 and "max_tokens" not in params and params["temperature"] == 0


def test_responses_length_limit_is_reported(tmp_path):
    with ScriptedModelServer(lambda r: ScriptedReply("cut sho", finish_reason="length")) as server:
        spec, env = protocol_setup("responses", server)
        (done,) = run_calls(make_pool(tmp_path, spec, env), {"messages": QUESTION})
    assert done.text == "cut sho" and done.finish_reason == "max_output_tokens"


def test_api_responses_on_anthropic_names_the_key():
    spec = ModelSpec.from_dict("judge", {"provider": "anthropic", "model": "claude-haiku-4-5", "api": "responses"})
    with pytest.raises(InputError) as caught:
        create_backend(spec, {"ANTHROPIC_API_KEY": "k"})
    assert caught.value.where == "models.judge.api" and "responses" in caught.value.message


def test_validate_refuses_api_responses_on_anthropic(tmp_path, server):
    root = write_project(tmp_path / "proj", server.openai_base_url,
                         {"provider": "anthropic", "model": "claude-haiku-4-5", "api": "responses"})
    res = run_cli("validate", cwd=root)
    assert res.code == 2
    first = res.err.strip().splitlines()[0]
    assert "skillopt.yml:" in first and "models.target.api" in first and "anthropic" in first
    res = run_cli("eval", "ticket-triage", "--quiet", cwd=root)
    assert res.code == 2 and "models.target.api" in res.err and server.call_count == 0


def test_validate_accepts_api_responses_and_refuses_unknown_apis(tmp_path, server):
    root = write_project(tmp_path / "ok", server.openai_base_url, {"api": "responses"})
    assert run_cli("validate", cwd=root).code == 0
    root = write_project(tmp_path / "bad", server.openai_base_url, {"api": "completions"})
    res = run_cli("validate", cwd=root)
    assert res.code == 2 and "models.target.api" in res.err


def test_api_is_in_the_config_snapshot_only_when_not_chat():
    chat = ModelSpec.from_dict("target", {"provider": "openai", "model": "gpt-4o"})
    responses = ModelSpec.from_dict("target", {"provider": "openai", "model": "gpt-5", "api": "responses"})
    assert chat.api == "chat" and "api" not in chat.to_dict()
    assert responses.to_dict()["api"] == "responses"


def test_chat_replies_from_lenient_servers_keep_their_tool_calls_and_refusals():
    body = {"choices": [{"finish_reason": "tool_calls", "message": {"role": "assistant", "content": None,
            "tool_calls": [{"type": "function", "function": {"name": "add", "arguments": {"a": 1}}}]}}]}
    done = parse_chat_completion(json.dumps(body).encode(), 0.1)
    assert done.tool_calls == (ToolCall("call_0", "add", '{"a": 1}'),) and done.text == ""
    refused = {"choices": [{"finish_reason": "stop", "message": {"content": None, "refusal": "I can't help."}}]}
    assert parse_chat_completion(json.dumps(refused).encode(), 0.1).text == "I can't help."
    response = {"status": "completed", "output": [{"type": "reasoning", "summary": []}, {"type": "message", "content": [
        {"type": "refusal", "refusal": "No."}]}]}
    assert parse_response(json.dumps(response).encode(), 0.1).text == "No."


@pytest.mark.parametrize("fault", [Fault.rate_limit(retry_after=0.01), Fault.server_error(503), Fault.malformed()])
def test_responses_backend_retries_like_the_others(tmp_path, srv, fault):
    srv.inject(fault)
    spec, env = protocol_setup("responses", srv)
    pool = make_pool(tmp_path, {**spec, "max_retries": 2}, env)
    (done,) = run_calls(pool, {"messages": QUESTION, "tools": [ADD]})
    assert done.tool_calls[0].name == "add" and pool.spend["target"].retries == 1
    assert [c.fault for c in srv.calls] == [fault.kind, None]
