"""The scripted server's batch endpoints through the real SDKs, and how the batch clients read
what a batch returns (cancelled, refused as a whole, errored and expired lines)."""

from __future__ import annotations

import asyncio
import json

import anthropic
import openai
import pytest

from skillopt_ci.core.errors import ProviderError
from skillopt_ci.models.anthropic_backend import AnthropicBackend
from skillopt_ci.models.batch_anthropic import AnthropicBatch
from skillopt_ci.models.batch_openai import OpenAIBatch, _line_outcome
from skillopt_ci.models.openai_backend import OpenAIBackend
from skillopt_ci.models.registry import Endpoint
from skillopt_ci.sim import Fault
from skillopt_ci.sim.server import echo


@pytest.fixture(autouse=True)
def _echo(server):
    server.policy = echo


LINE = {"model": "sim", "messages": [{"role": "user", "content": "hello there"}]}


def upload(client, lines: list[dict]) -> str:
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    return client.files.create(file=("in.jsonl", data), purpose="batch").id


def test_openai_batch_runs_each_line_through_the_policy_and_splits_errors(server):
    client = openai.OpenAI(api_key="sk-test", base_url=server.openai_base_url, max_retries=0)
    server.inject(Fault.status(400, "Scripted refusal."))
    file_id = upload(client, [{"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions", "body": LINE}
                              for i in range(3)])
    batch = client.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h")
    done = client.batches.retrieve(batch.id)
    assert done.status == "completed" and done.request_counts.completed == 2 and done.request_counts.failed == 1
    output = [json.loads(x) for x in client.files.content(done.output_file_id).text.splitlines()]
    errors = [json.loads(x) for x in client.files.content(done.error_file_id).text.splitlines()]
    assert [x["custom_id"] for x in output] == ["r1", "r2"]
    assert output[0]["response"]["body"]["choices"][0]["message"]["content"] == "hello there"
    assert errors[0]["custom_id"] == "r0" and errors[0]["response"]["status_code"] == 400
    assert server.call_count == 3 and server.batches.uploads == 1 and server.batches.creates == 1


def test_a_held_openai_batch_can_be_cancelled(server):
    server.batches.delay = 3600
    client = openai.OpenAI(api_key="sk-test", base_url=server.openai_base_url, max_retries=0)
    file_id = upload(client, [{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": LINE}])
    batch = client.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h")
    assert client.batches.retrieve(batch.id).status == "in_progress"
    client.batches.cancel(batch.id)
    ended = client.batches.retrieve(batch.id)
    assert ended.status == "cancelled" and ended.output_file_id is None


def test_a_batch_refused_as_a_whole_fails_every_request_with_the_reason(server):
    backend = OpenAIBackend(Endpoint("openai", "sim", "sk-test", server.openai_base_url), timeout=10)
    client = OpenAIBatch(backend)

    async def go():
        batch_id = await client.submit([("same", LINE), ("same", LINE)])  # custom ids must be unique
        assert await client.ended(batch_id)
        return await client.results(batch_id)

    found = asyncio.run(go())
    error = found["*"]
    assert isinstance(error, ProviderError) and error.kind == "bad_request" and not error.retryable
    assert "custom_id unique" in error.message


def test_anthropic_errored_results_map_to_the_synchronous_errors(server):
    backend = AnthropicBackend(Endpoint("anthropic", "sim", "sk-ant-test", server.anthropic_base_url), timeout=10)
    client = AnthropicBatch(backend)
    good = {**LINE, "max_tokens": 50}
    server.inject(Fault.overloaded())

    async def go():
        batch_id = await client.submit([("busy", good), ("no-max", LINE), ("ok", good)])
        assert await client.ended(batch_id)
        return await client.results(batch_id)

    found = asyncio.run(go())
    assert isinstance(found["busy"], ProviderError) and found["busy"].retryable and found["busy"].status == 529
    assert isinstance(found["no-max"], ProviderError) and found["no-max"].kind == "bad_request"
    assert "max_tokens" in found["no-max"].message
    assert backend.read(found["ok"], 0.0).text == "hello there"


def test_anthropic_sdk_lists_a_cancelled_batch_as_canceled(server):
    server.batches.delay = 3600
    client = anthropic.Anthropic(api_key="sk-ant-test", base_url=server.anthropic_base_url, max_retries=0)
    batch = client.messages.batches.create(requests=[{"custom_id": "a", "params": {**LINE, "max_tokens": 5}}])
    assert client.messages.batches.retrieve(batch.id).processing_status == "in_progress"
    client.messages.batches.cancel(batch.id)
    assert client.messages.batches.retrieve(batch.id).processing_status == "ended"
    assert [r.result.type for r in client.messages.batches.results(batch.id)] == ["canceled"]


@pytest.mark.parametrize(("line", "kind", "retryable"), [
    ({"custom_id": "x", "response": None, "error": {"code": "batch_expired", "message": "late"}}, "expired", True),
    ({"custom_id": "x", "response": {"status_code": 429, "body": {"error": {"message": "slow down"}}}},
     "rate_limit", True),
    ({"custom_id": "x", "response": {"status_code": 401, "body": {"error": {"message": "who"}}}}, "auth", False),
])
def test_error_file_lines_become_the_errors_a_synchronous_call_raises(line, kind, retryable):
    cid, error = _line_outcome(line)
    assert cid == "x" and isinstance(error, ProviderError)
    assert (error.kind, error.retryable) == (kind, retryable)
