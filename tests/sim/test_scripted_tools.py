"""The scripted server's tool calls, Responses route and images, through the raw openai and
anthropic SDKs (the typed objects the SDKs build are what a real provider's answer gives)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import anthropic
import openai
import pytest

from helpers.http import raw_post
from helpers.wire import tiny_png
from skillopt_ci.sim import Fault, ScriptedModelServer, ScriptedReply, ScriptedToolCall

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
PNG = tiny_png((1, 2, 3))
PNG_B64 = base64.b64encode(PNG).decode()


def weather(request):
    if request.tool_results:
        return f"It is {request.tool_results[-1]['content']}."
    return ScriptedReply("Checking.", tool_calls=[ScriptedToolCall("get_weather", {"city": "Oslo"})])


@pytest.fixture
def srv() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(weather) as server:
        yield server


@pytest.fixture
def oai(srv):
    with openai.OpenAI(api_key="test", base_url=srv.openai_base_url, max_retries=0) as client:
        yield client


@pytest.fixture
def claude(srv):
    with anthropic.Anthropic(api_key="test", base_url=srv.anthropic_base_url, max_retries=0) as client:
        yield client


def test_chat_completions_tool_call_round_trip(srv, oai):
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather now.",
                                               "parameters": WEATHER}}]
    messages: list = [{"role": "user", "content": "Weather in Oslo?"}]
    first = oai.chat.completions.create(model="m", messages=messages, tools=tools)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == "Checking."
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Oslo"}
    messages += [choice.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    second = oai.chat.completions.create(model="m", messages=messages, tools=tools)
    assert second.choices[0].message.content == "It is sunny." and second.choices[0].finish_reason == "stop"
    seen = srv.calls[1].request
    assert seen.tools == [{"name": "get_weather", "description": "Weather now.", "parameters": WEATHER}]
    assert "tools" not in seen.params
    assert seen.messages[1] == {"role": "assistant", "content": "Checking.", "tool_calls": [
        {"id": call.id, "name": "get_weather", "arguments": '{"city": "Oslo"}'}]}
    assert seen.tool_results == [{"role": "tool", "tool_call_id": call.id, "content": "sunny", "is_error": False}]


def test_the_same_request_gets_the_same_call_ids(srv, oai):
    ids = [oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
           .choices[0].message.tool_calls[0].id for _ in range(2)]
    assert ids[0] == ids[1]


def test_responses_api_tool_call_round_trip(srv, oai):
    tools = [{"type": "function", "name": "get_weather", "description": "Weather now.", "parameters": WEATHER,
              "strict": False}]
    first = oai.responses.create(model="gpt-5-mini", instructions="Be terse.", input="Weather in Oslo?", tools=tools)
    assert first.output_text == "Checking." and first.status == "completed"
    call = next(item for item in first.output if item.type == "function_call")
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Oslo"}
    assert first.usage.input_tokens == 5 and first.usage.output_tokens == 1 + 2
    follow_up = [{"role": "user", "content": "Weather in Oslo?"},
                 {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
                 {"type": "function_call_output", "call_id": call.call_id, "output": "rainy"}]
    second = oai.responses.create(model="gpt-5-mini", input=follow_up, tools=tools)
    assert second.output_text == "It is rainy."
    assert [c.request.protocol for c in srv.calls] == ["responses", "responses"]
    assert srv.calls[0].request.system == "Be terse."
    assert srv.calls[0].request.messages == [{"role": "user", "content": "Weather in Oslo?"}]
    seen = srv.calls[1].request
    assert seen.messages[1] == {"role": "assistant", "content": "", "tool_calls": [
        {"id": call.call_id, "name": "get_weather", "arguments": call.arguments}]}
    assert seen.tool_results[0]["content"] == "rainy"


def test_anthropic_tool_use_round_trip(srv, claude):
    tools = [{"name": "get_weather", "description": "Weather now.", "input_schema": WEATHER}]
    messages: list = [{"role": "user", "content": "Weather in Oslo?"}]
    first = claude.messages.create(model="c", max_tokens=64, messages=messages, tools=tools)
    assert first.stop_reason == "tool_use"
    text, use = first.content
    assert text.text == "Checking." and use.type == "tool_use" and use.input == {"city": "Oslo"}
    messages += [{"role": "assistant", "content": [b.model_dump() for b in first.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                               "content": [{"type": "text", "text": "windy"}], "is_error": True}]}]
    second = claude.messages.create(model="c", max_tokens=64, messages=messages, tools=tools)
    assert second.content[0].text == "It is windy." and second.stop_reason == "end_turn"
    seen = srv.calls[1].request
    assert seen.tools == [{"name": "get_weather", "description": "Weather now.", "parameters": WEATHER}]
    assert seen.messages[1]["tool_calls"] == [{"id": use.id, "name": "get_weather", "arguments": '{"city": "Oslo"}'}]
    assert seen.tool_results == [{"role": "tool", "tool_call_id": use.id, "content": "windy", "is_error": True}]


def test_a_reply_that_only_calls_tools_has_no_text(srv, oai, claude):
    srv.policy = lambda r: ScriptedReply(tool_calls=[ScriptedToolCall("get_weather", {"city": "Rome"}, id="x1")])
    chat = oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "?"}])
    assert chat.choices[0].message.content is None and chat.choices[0].message.tool_calls[0].id == "x1"
    response = oai.responses.create(model="m", input="?")
    assert [item.type for item in response.output] == ["function_call"] and response.output_text == ""
    message = claude.messages.create(model="c", max_tokens=8, messages=[{"role": "user", "content": "?"}])
    assert [b.type for b in message.content] == ["tool_use"] and message.content[0].id == "x1"


def test_images_are_decoded_in_every_protocol(srv, oai, claude):
    srv.policy = lambda r: "seen"
    data_url = f"data:image/png;base64,{PNG_B64}"
    oai.chat.completions.create(model="m", messages=[{"role": "user", "content": [
        {"type": "text", "text": "what?"}, {"type": "image_url", "image_url": {"url": data_url}}]}])
    oai.responses.create(model="m", input=[{"role": "user", "content": [
        {"type": "input_text", "text": "what?"}, {"type": "input_image", "image_url": data_url, "detail": "auto"}]}])
    claude.messages.create(model="c", max_tokens=8, messages=[{"role": "user", "content": [
        {"type": "text", "text": "what?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}}]}])
    for call in srv.calls:
        assert call.request.last_user == "what?"
        assert [(i["media_type"], i["bytes"]) for i in call.request.images] == [("image/png", PNG)]


@pytest.mark.parametrize(("media_type", "data", "message"), [
    ("image/png", "not base64!", "not valid base64"),
    ("image/png", base64.b64encode(b"GIF89a-and-more").decode(), "appears to be a image/gif image"),
    ("image/png", base64.b64encode(b"plain text").decode(), "could not process image"),
    ("image/bmp", PNG_B64, "unsupported image media type"),
])
def test_a_malformed_image_is_a_400_in_every_protocol(srv, oai, claude, media_type, data, message):
    url = f"data:{media_type};base64,{data}"
    with pytest.raises(openai.BadRequestError, match=message):
        oai.chat.completions.create(model="m", messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": url}}]}])
    with pytest.raises(openai.BadRequestError, match=message):
        oai.responses.create(model="m", input=[{"role": "user", "content": [
            {"type": "input_image", "image_url": url, "detail": "auto"}]}])
    with pytest.raises(anthropic.BadRequestError, match=message):
        claude.messages.create(model="c", max_tokens=8, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}]}])
    assert srv.call_count == 0


def test_images_outside_user_turns_and_remote_urls_are_refused(srv, oai):
    with pytest.raises(openai.BadRequestError, match="only allowed for messages with role 'user'"):
        oai.chat.completions.create(model="m", messages=[{"role": "system", "content": [
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}}]}])
    with pytest.raises(openai.BadRequestError, match="data:"):
        oai.chat.completions.create(model="m", messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}])


def test_faults_apply_on_the_responses_route(srv, oai):
    srv.inject(Fault.rate_limit(retry_after=0.5), Fault.malformed(), Fault.server_error(503))
    with pytest.raises(openai.RateLimitError) as caught:
        oai.responses.create(model="m", input="hi")
    assert caught.value.response.headers["retry-after"] == "0.5"
    with pytest.raises(json.JSONDecodeError):  # what the SDK raises for a body that is not JSON
        oai.responses.create(model="m", input="hi")
    with pytest.raises(openai.InternalServerError):
        oai.responses.create(model="m", input="hi")
    assert oai.responses.create(model="m", input="hi").output_text == "Checking."
    assert [c.fault for c in srv.calls] == ["rate_limit", "malformed", "server_error", None]


def test_azure_responses_routes(srv):
    with openai.AzureOpenAI(azure_endpoint=srv.azure_endpoint, api_version="2025-04-01-preview", api_key="az",
                            max_retries=0) as client:
        assert client.responses.create(model="my-deployment", input="hi").output_text == "Checking."
    body = json.dumps({"model": "ignored", "input": "hi"}).encode()
    status, _ = raw_post(srv, "/openai/deployments/pinned/responses?api-version=2025-04-01-preview", body)
    assert status == 200
    assert [(c.request.protocol, c.request.model) for c in srv.calls] == [
        ("responses", "my-deployment"), ("responses", "pinned")]
    assert srv.calls[0].request.headers["api-key"] == "az"


def test_an_azure_responses_call_needs_an_api_version(srv):
    status, body = raw_post(srv, "/openai/responses", json.dumps({"model": "d", "input": "hi"}).encode())
    assert status == 400 and "api-version" in body["error"]["message"]
    assert srv.call_count == 0
