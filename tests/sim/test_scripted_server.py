"""The scripted model server, exercised through the real openai and anthropic SDKs."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anthropic
import openai
import pytest

from helpers.http import raw_post
from skillopt_ci.sim import (
    Fault,
    RecordedCall,
    ScriptedModelServer,
    ScriptedReply,
    ScriptedRequest,
)

USER = [{"role": "user", "content": "hello"}]


@pytest.fixture
def srv() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def oai(srv: ScriptedModelServer) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(api_key="test", base_url=srv.openai_base_url, max_retries=0)
    yield client
    client.close()


@pytest.fixture
def azure(srv: ScriptedModelServer) -> Iterator[openai.AzureOpenAI]:
    client = openai.AzureOpenAI(
        azure_endpoint=srv.azure_endpoint, api_version="2024-10-21", api_key="test", max_retries=0
    )
    yield client
    client.close()


@pytest.fixture
def claude(srv: ScriptedModelServer) -> Iterator[anthropic.Anthropic]:
    client = anthropic.Anthropic(api_key="test", base_url=srv.anthropic_base_url, max_retries=0)
    yield client
    client.close()


def ask_openai(client: openai.OpenAI, model: str = "gpt-test", **kwargs: object) -> str | None:
    completion = client.chat.completions.create(model=model, messages=USER, **kwargs)
    return completion.choices[0].message.content


def ask_claude(client: anthropic.Anthropic, model: str = "claude-test") -> str:
    message = client.messages.create(model=model, max_tokens=64, messages=USER)
    return message.content[0].text


# --- round trips -------------------------------------------------------------------------


def test_openai_round_trip_passes_system_messages_params_and_parses_usage(
    srv: ScriptedModelServer, oai: openai.OpenAI
) -> None:
    seen: list[ScriptedRequest] = []

    def policy(request: ScriptedRequest) -> str:
        seen.append(request)
        return "four five six"

    srv.policy = policy
    completion = oai.chat.completions.create(
        model="gpt-test",
        messages=[
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "one two"},
            {"role": "assistant", "content": "ok"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "part a"}, {"type": "text", "text": "part b"}],
            },
        ],
        temperature=0.25,
        max_tokens=50,
        seed=7,
    )

    assert completion.choices[0].message.content == "four five six"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "gpt-test"
    assert completion.id.startswith("chatcmpl-")
    # prompt: "You are terse." (3) + "one two" (2) + "ok" (1) + "part a\npart b" (4)
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (10, 3)
    assert completion.usage.total_tokens == 13

    (request,) = seen
    assert request.protocol == "openai"
    assert request.model == "gpt-test"
    assert request.system == "You are terse."
    assert request.messages == [
        {"role": "user", "content": "one two"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "part a\npart b"},
    ]
    assert request.last_user == "part a\npart b"
    assert request.params == {"temperature": 0.25, "max_tokens": 50, "seed": 7}
    assert request.headers["authorization"] == "Bearer test"
    assert request.call_index == 0
    assert request.body["model"] == "gpt-test"


def test_openai_finish_reason_and_token_overrides(
    srv: ScriptedModelServer, oai: openai.OpenAI
) -> None:
    srv.policy = lambda r: ScriptedReply(
        "cut", finish_reason="length", input_tokens=100, output_tokens=9
    )
    completion = oai.chat.completions.create(model="m", messages=USER)
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (100, 9)


def test_azure_uses_the_deployment_as_model(
    srv: ScriptedModelServer, azure: openai.AzureOpenAI
) -> None:
    srv.policy = lambda r: f"{r.protocol}:{r.model}:{r.last_user}"
    completion = azure.chat.completions.create(model="my-deployment", messages=USER, temperature=0)
    assert completion.choices[0].message.content == "azure:my-deployment:hello"
    (call,) = srv.calls
    assert call.request.headers["api-key"] == "test"
    assert call.request.params == {"temperature": 0}


def test_anthropic_round_trip(srv: ScriptedModelServer, claude: anthropic.Anthropic) -> None:
    seen: list[ScriptedRequest] = []

    def policy(request: ScriptedRequest) -> ScriptedReply:
        seen.append(request)
        return ScriptedReply("truncated answer", finish_reason="length")

    srv.policy = policy
    message = claude.messages.create(
        model="claude-test",
        max_tokens=64,
        stop_sequences=["END"],
        extra_body={"temperature": 0.5},  # anthropic 2.x's create() has no temperature argument
        system=[{"type": "text", "text": "Rule one."}, {"type": "text", "text": "Rule two."}],
        messages=[{"role": "user", "content": [{"type": "text", "text": "a b c"}]}],
    )

    assert message.content[0].type == "text"
    assert message.content[0].text == "truncated answer"
    assert message.stop_reason == "max_tokens"
    assert message.model == "claude-test"
    assert message.id.startswith("msg_")
    assert (message.usage.input_tokens, message.usage.output_tokens) == (7, 2)

    (request,) = seen
    assert request.protocol == "anthropic"
    assert request.system == "Rule one.\nRule two."
    assert request.messages == [{"role": "user", "content": "a b c"}]
    assert request.params == {"max_tokens": 64, "stop_sequences": ["END"], "temperature": 0.5}
    assert request.headers["authorization"] == "Bearer test"  # anthropic 2.x: not x-api-key
    assert "anthropic-version" in request.headers


def test_anthropic_stop_reason_defaults_to_end_turn(claude: anthropic.Anthropic) -> None:
    message = claude.messages.create(model="c", max_tokens=8, system="s", messages=USER)
    assert message.stop_reason == "end_turn"
    assert message.content[0].text == "hello"


def test_default_policy_echoes_last_user_message(
    oai: openai.OpenAI, claude: anthropic.Anthropic
) -> None:
    assert ask_openai(oai) == "hello"
    assert ask_claude(claude) == "hello"


def test_omitted_usage_is_none_in_both_sdks(
    srv: ScriptedModelServer, oai: openai.OpenAI, claude: anthropic.Anthropic
) -> None:
    srv.policy = lambda r: ScriptedReply("no usage here", omit_usage=True)
    completion = oai.chat.completions.create(model="m", messages=USER)
    assert completion.choices[0].message.content == "no usage here"
    assert completion.usage is None
    message = claude.messages.create(model="c", max_tokens=8, messages=USER)
    assert message.content[0].text == "no usage here"
    assert message.usage is None  # typed as required, but the SDK does not validate


def test_calls_are_recorded_in_order(srv: ScriptedModelServer, oai: openai.OpenAI) -> None:
    srv.policy = lambda r: f"reply {r.call_index}"
    ask_openai(oai)
    ask_openai(oai, model="other")
    assert srv.call_count == 2
    assert [
        (c.request.call_index, c.request.model, c.status, c.fault, c.reply_text) for c in srv.calls
    ] == [
        (0, "gpt-test", 200, None, "reply 0"),
        (1, "other", 200, None, "reply 1"),
    ]
    assert all(isinstance(c, RecordedCall) for c in srv.calls)


# --- faults --------------------------------------------------------------------------------


def test_rate_limit_carries_retry_after_and_affects_one_request(
    srv: ScriptedModelServer, oai: openai.OpenAI
) -> None:
    srv.inject(Fault.rate_limit(retry_after=0.2))
    with pytest.raises(openai.RateLimitError) as caught:
        ask_openai(oai)
    assert caught.value.status_code == 429
    assert caught.value.response.headers["retry-after"] == "0.2"
    assert caught.value.response.headers["retry-after-ms"] == "200"
    assert caught.value.body == {
        "message": "Rate limit reached.",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
    assert ask_openai(oai) == "hello"
    assert [(c.status, c.fault, c.reply_text) for c in srv.calls] == [
        (429, "rate_limit", None),
        (200, None, "hello"),
    ]


def test_rate_limit_whole_seconds_and_without_retry_after(
    srv: ScriptedModelServer, claude: anthropic.Anthropic
) -> None:
    srv.inject(Fault.rate_limit(), Fault.rate_limit(retry_after=None))
    with pytest.raises(anthropic.RateLimitError) as caught:
        ask_claude(claude)
    assert caught.value.response.headers["retry-after"] == "1"
    assert caught.value.type == "rate_limit_error"
    with pytest.raises(anthropic.RateLimitError) as caught:
        ask_claude(claude)
    assert "retry-after" not in caught.value.response.headers


def test_queued_faults_are_consumed_one_per_request_in_order(
    srv: ScriptedModelServer, oai: openai.OpenAI
) -> None:
    srv.inject(Fault.server_error(), Fault.server_error(503), Fault.status(401, "bad key"))
    with pytest.raises(openai.InternalServerError) as first:
        ask_openai(oai)
    with pytest.raises(openai.InternalServerError) as second:
        ask_openai(oai)
    with pytest.raises(openai.AuthenticationError) as third:
        ask_openai(oai)
    assert (first.value.status_code, second.value.status_code) == (500, 503)
    assert "bad key" in str(third.value)
    assert ask_openai(oai) == "hello"
    assert [c.fault for c in srv.calls] == ["server_error", "server_error", "status", None]


def test_server_error_and_bad_request_on_anthropic(
    srv: ScriptedModelServer, claude: anthropic.Anthropic
) -> None:
    srv.inject(Fault.server_error(), Fault.status(400, "prompt is too long"))
    with pytest.raises(anthropic.InternalServerError) as caught:
        ask_claude(claude)
    assert caught.value.status_code == 500
    assert caught.value.type == "api_error"
    with pytest.raises(anthropic.BadRequestError) as bad:
        ask_claude(claude)
    assert bad.value.api_message == "prompt is too long"
    assert bad.value.type == "invalid_request_error"


def test_overloaded_is_529(
    srv: ScriptedModelServer, oai: openai.OpenAI, claude: anthropic.Anthropic
) -> None:
    srv.inject(Fault.overloaded(), Fault.overloaded())
    with pytest.raises(anthropic.OverloadedError) as caught:
        ask_claude(claude)
    assert caught.value.status_code == 529
    assert caught.value.type == "overloaded_error"
    with pytest.raises(openai.InternalServerError) as oai_caught:
        ask_openai(oai)
    assert oai_caught.value.status_code == 529
    assert ask_claude(claude) == "hello"


def test_malformed_body_raises_a_json_decode_error(
    srv: ScriptedModelServer, oai: openai.OpenAI, claude: anthropic.Anthropic
) -> None:
    # Neither SDK wraps an unparseable 200 body: json.JSONDecodeError escapes as is.
    srv.inject(Fault.malformed(), Fault.malformed())
    with pytest.raises(json.JSONDecodeError):
        ask_openai(oai)
    with pytest.raises(json.JSONDecodeError):
        ask_claude(claude)
    assert [(c.status, c.fault) for c in srv.calls] == [(200, "malformed"), (200, "malformed")]
    assert ask_openai(oai) == "hello"


def test_dropped_connection_is_a_connection_error(
    srv: ScriptedModelServer, oai: openai.OpenAI, claude: anthropic.Anthropic
) -> None:
    assert ask_openai(oai) == "hello"  # the drop below then hits a pooled keep-alive connection
    srv.inject(Fault.drop(), Fault.drop())
    with pytest.raises(openai.APIConnectionError) as caught:
        ask_openai(oai)
    assert not isinstance(caught.value, openai.APITimeoutError)
    with pytest.raises(anthropic.APIConnectionError):
        ask_claude(claude)
    assert [(c.status, c.fault) for c in srv.calls][1:] == [(0, "drop"), (0, "drop")]
    assert ask_openai(oai) == "hello"
    assert ask_claude(claude) == "hello"


@pytest.mark.slow
def test_slow_reply_times_out_the_client_then_the_next_call_is_fast(
    srv: ScriptedModelServer, oai: openai.OpenAI, claude: anthropic.Anthropic
) -> None:
    srv.inject(Fault.slow(1.0), Fault.slow(1.0))
    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        oai.with_options(timeout=0.2).chat.completions.create(model="m", messages=USER)
    with pytest.raises(anthropic.APITimeoutError):
        claude.with_options(timeout=0.2).messages.create(model="c", max_tokens=8, messages=USER)
    assert time.monotonic() - started < 1.0
    assert [c.fault for c in srv.calls] == ["slow", "slow"]
    assert oai.with_options(timeout=0.5).chat.completions.create(model="m", messages=USER)


def test_slow_fault_and_reply_latency_delay_a_normal_answer(
    srv: ScriptedModelServer, oai: openai.OpenAI
) -> None:
    srv.inject(Fault.slow(0.3))
    started = time.monotonic()
    assert ask_openai(oai) == "hello"
    assert time.monotonic() - started >= 0.3

    srv.policy = lambda r: ScriptedReply("late", latency=0.25)
    started = time.monotonic()
    assert ask_openai(oai) == "late"
    assert time.monotonic() - started >= 0.25


def test_fault_plan_applies_rules(srv: ScriptedModelServer, oai: openai.OpenAI) -> None:
    def plan(request: ScriptedRequest) -> Fault | None:
        if request.model == "flaky":
            return Fault.status(401, "no access to flaky")
        return Fault.server_error() if request.call_index % 3 == 2 else None

    srv.fault_plan = plan
    outcomes = []
    for model in ["good", "good", "good", "flaky", "good", "good"]:
        try:
            ask_openai(oai, model=model)
            outcomes.append(200)
        except openai.APIStatusError as exc:
            outcomes.append(exc.status_code)
    assert outcomes == [200, 200, 500, 401, 200, 500]


def test_queued_faults_take_precedence_over_the_plan(
    srv: ScriptedModelServer, oai: openai.OpenAI
) -> None:
    srv.fault_plan = lambda r: Fault.server_error()
    srv.inject(Fault.rate_limit(0.1))
    with pytest.raises(openai.RateLimitError):
        ask_openai(oai)
    with pytest.raises(openai.InternalServerError):
        ask_openai(oai)
    srv.fault_plan = None
    assert ask_openai(oai) == "hello"


def test_reset_clears_records_and_queued_faults(
    srv: ScriptedModelServer, oai: openai.OpenAI
) -> None:
    ask_openai(oai)
    srv.inject(Fault.server_error())
    srv.reset()
    assert srv.calls == [] and srv.call_count == 0
    assert ask_openai(oai) == "hello"
    assert srv.calls[0].request.call_index == 0


def test_inject_rejects_non_faults(srv: ScriptedModelServer) -> None:
    with pytest.raises(TypeError):
        srv.inject("rate_limit")  # type: ignore[arg-type]


# --- policy failures and bad requests --------------------------------------------------


def test_policy_exception_is_a_500_naming_it(
    srv: ScriptedModelServer, oai: openai.OpenAI, claude: anthropic.Anthropic
) -> None:
    def broken(request: ScriptedRequest) -> str:
        raise ValueError("boom in policy")

    srv.policy = broken
    with pytest.raises(openai.InternalServerError) as caught:
        ask_openai(oai)
    assert "ValueError: boom in policy" in str(caught.value)
    with pytest.raises(anthropic.InternalServerError) as a_caught:
        ask_claude(claude)
    assert "ValueError: boom in policy" in (a_caught.value.api_message or "")
    assert [(c.status, c.error) for c in srv.calls] == [
        (500, "ScriptedModelServer policy raised ValueError: boom in policy")
    ] * 2


def test_policy_returning_a_wrong_type_is_a_500(
    srv: ScriptedModelServer, oai: openai.OpenAI
) -> None:
    srv.policy = lambda r: 42  # type: ignore[assignment, return-value]
    with pytest.raises(openai.InternalServerError, match="TypeError: policy returned int"):
        ask_openai(oai)


def test_unknown_routes_are_404_in_the_provider_shape(srv: ScriptedModelServer) -> None:
    status, body = raw_post(srv, "/v1/embeddings", b"{}")
    assert status == 404
    assert body["error"]["type"] == "invalid_request_error"
    assert "/v1/embeddings" in body["error"]["message"]
    status, body = raw_post(srv, "/v1/complete", b"{}", {"anthropic-version": "2023-06-01"})
    assert (status, body["type"], body["error"]["type"]) == (404, "error", "not_found_error")
    assert srv.call_count == 0


def test_base_url_without_v1_is_not_found(srv: ScriptedModelServer) -> None:
    with (
        openai.OpenAI(api_key="test", base_url=srv.url, max_retries=0) as client,
        pytest.raises(openai.NotFoundError),
    ):
        ask_openai(client)


def test_invalid_requests_are_400_and_not_recorded(srv: ScriptedModelServer) -> None:
    status, body = raw_post(srv, "/v1/chat/completions", b"{not json")
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    status, body = raw_post(srv, "/v1/messages", b"[1, 2]")
    assert status == 400 and body["type"] == "error"
    no_max_tokens = json.dumps({"model": "c", "messages": USER}).encode()
    status, body = raw_post(srv, "/v1/messages", no_max_tokens)
    assert status == 400 and "max_tokens" in body["error"]["message"]
    streaming = json.dumps({"model": "m", "messages": USER, "stream": True}).encode()
    status, body = raw_post(srv, "/v1/chat/completions", streaming)
    assert status == 400 and "stream" in body["error"]["message"]
    status, body = raw_post(srv, "/openai/deployments/d/chat/completions", streaming)
    assert status == 400 and "api-version" in body["error"]["message"]
    assert srv.call_count == 0


def test_keep_alive_serves_several_requests_on_one_connection(srv: ScriptedModelServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", int(srv.url.rsplit(":", 1)[1]), timeout=5)
    try:
        for word in ["one", "two", "three"]:
            payload = json.dumps({"model": "m", "messages": [{"role": "user", "content": word}]})
            conn.request("POST", "/v1/chat/completions", body=payload)
            response = conn.getresponse()
            assert response.status == 200
            assert response.getheader("Content-Type") == "application/json"
            assert json.loads(response.read())["choices"][0]["message"]["content"] == word
    finally:
        conn.close()


# --- concurrency and lifecycle ---------------------------------------------------------


def test_sixteen_concurrent_requests_sleep_in_parallel() -> None:
    with (
        ScriptedModelServer(lambda r: f"#{r.last_user}", latency=0.2) as srv,
        openai.OpenAI(api_key="test", base_url=srv.openai_base_url, max_retries=0) as client,
    ):
        results: list[str | None] = []
        lock = threading.Lock()

        def worker(i: int) -> None:
            completion = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": str(i)}]
            )
            with lock:
                results.append(completion.choices[0].message.content)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        elapsed = time.monotonic() - started
        assert sorted(results) == sorted(f"#{i}" for i in range(16))
        assert 0.2 <= elapsed < 1.6
        assert sorted(c.request.call_index for c in srv.calls) == list(range(16))


def test_start_stop_lifecycle() -> None:
    srv = ScriptedModelServer()
    with pytest.raises(RuntimeError):
        _ = srv.url
    srv.start()
    assert srv.start() is srv
    url = srv.url
    port = int(url.rsplit(":", 1)[1])
    assert url.startswith("http://127.0.0.1:")
    assert srv.openai_base_url == url + "/v1"
    assert srv.anthropic_base_url == srv.azure_endpoint == url
    client = openai.OpenAI(api_key="test", base_url=srv.openai_base_url, max_retries=0)
    assert ask_openai(client) == "hello"  # leaves an idle keep-alive connection open
    started = time.monotonic()
    srv.stop()
    srv.stop()
    assert time.monotonic() - started < 1.0
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass
    with pytest.raises(openai.APIConnectionError):
        ask_openai(client)
    client.close()


def test_stop_abandons_replies_waiting_out_latency() -> None:
    srv = ScriptedModelServer(latency=5.0).start()
    client = openai.OpenAI(api_key="test", base_url=srv.openai_base_url, max_retries=0)
    errors: list[Exception] = []

    def call() -> None:
        try:
            ask_openai(client)
        except openai.APIConnectionError as exc:
            errors.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    while srv.call_count == 0:
        time.sleep(0.01)
    started = time.monotonic()
    srv.stop()
    thread.join(5)
    assert time.monotonic() - started < 1.0
    assert len(errors) == 1
    client.close()


@pytest.mark.slow
def test_command_line_server_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    (tmp_path / "my_policy.py").write_text(
        textwrap.dedent(
            """
            def shout(request):
                return request.last_user.upper() + " from " + request.model
            """
        )
    )
    command = [sys.executable, "-m", "skillopt_ci.sim.server", "--port", "0"]
    command += ["--latency", "0.05", "--policy", "my_policy:shout"]
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env
    ) as proc:
        watchdog = threading.Timer(10, proc.kill)
        watchdog.start()
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("READY http://127.0.0.1:"), line
            with openai.OpenAI(
                api_key="test", base_url=line.split()[1] + "/v1", max_retries=0
            ) as c:
                assert ask_openai(c, model="m1") == "HELLO from m1"
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=5)
            assert proc.returncode == 0, err
            assert "Traceback" not in err
            assert out == ""
        finally:
            watchdog.cancel()
            if proc.poll() is None:
                proc.kill()
