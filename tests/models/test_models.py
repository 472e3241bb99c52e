"""Model backends through the real SDKs against the scripted server: each provider, retries,
error mapping, usage and cost, credentials."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from types import MappingProxyType

import pytest

from skillopt_ci.core.errors import InputError, ProviderError
from skillopt_ci.inputs.config import Config, ModelSpec
from skillopt_ci.models.base import Message, Usage
from skillopt_ci.models.cache import ResponseCache
from skillopt_ci.models.pool import ModelPool
from skillopt_ci.models.pricing import cost_of, price_for
from skillopt_ci.models.registry import resolve_endpoint
from skillopt_ci.models.retry import model_policy, parse_retry_after, with_retries
from skillopt_ci.sim import Fault, ScriptedModelServer, ScriptedReply

MESSAGES = [Message("system", "Be brief."), Message("user", "Say hi")]


def make_pool(tmp_path: Path, spec: dict, env: dict, mode: str = "off", **config) -> ModelPool:
    model = ModelSpec.from_dict("target", {"max_retries": 2, **spec})
    cfg = Config(root=tmp_path, file="skillopt.yml", models=MappingProxyType({"target": model}), **config)
    return ModelPool(cfg, ResponseCache(tmp_path / "cache.sqlite", mode), env=env, retry_base_delay=0.01)


def call(pool: ModelPool, messages=MESSAGES, sample_index: int = 0):
    async def go():
        try:
            return await pool.complete("target", list(messages), sample_index)
        finally:
            await pool.aclose()

    return asyncio.run(go())


@pytest.fixture
def srv():
    with ScriptedModelServer(lambda r: ScriptedReply("hello there", input_tokens=11, output_tokens=2)) as s:
        yield s


def test_openai_backend_through_sdk(tmp_path, srv):
    env = {"OPENAI_API_KEY": "sk-test-123", "OPENAI_BASE_URL": srv.openai_base_url}
    pool = make_pool(tmp_path, {"provider": "openai", "model": "gpt-4o-mini", "params": {"temperature": 0.2, "seed": 7}}, env)
    done = call(pool)
    assert done.text == "hello there" and done.finish_reason == "stop"
    assert done.usage == Usage(11, 2)
    assert done.cost_usd == pytest.approx((11 * 0.15 + 2 * 0.60) / 1e6)
    req = srv.calls[0].request
    assert req.protocol == "openai" and req.model == "gpt-4o-mini"
    assert req.system == "Be brief." and req.last_user == "Say hi"
    assert req.params["temperature"] == 0.2 and req.params["seed"] == 7
    assert req.headers["authorization"] == "Bearer sk-test-123"


def test_openai_compatible_needs_no_key_and_passes_unknown_params(tmp_path, srv):
    spec = {"provider": "openai-compatible", "model": "qwen2.5-7b", "base_url": srv.openai_base_url,
            "params": {"temperature": 0, "top_k": 20}}
    done = call(make_pool(tmp_path, spec, env={}))
    assert done.text == "hello there"
    assert done.cost_usd == 0.0  # no price, but served on this machine (loopback): free
    req = srv.calls[0].request
    assert req.params["top_k"] == 20 and req.model == "qwen2.5-7b"


def test_azure_backend_uses_deployment_and_api_version(tmp_path, srv):
    env = {"AZURE_OPENAI_API_KEY": "az-key", "AZURE_OPENAI_ENDPOINT": srv.azure_endpoint, "OPENAI_API_VERSION": "2024-10-21"}
    done = call(make_pool(tmp_path, {"provider": "azure-openai", "model": "my-gpt4o-deployment"}, env))
    assert done.text == "hello there" and done.usage == Usage(11, 2)
    req = srv.calls[0].request
    assert req.protocol == "azure" and req.model == "my-gpt4o-deployment"
    assert req.headers["api-key"] == "az-key"


def test_anthropic_backend_system_field_and_sampling_params(tmp_path, srv):
    env = {"ANTHROPIC_API_KEY": "ant-key", "ANTHROPIC_BASE_URL": srv.anthropic_base_url}
    spec = {"provider": "anthropic", "model": "claude-haiku-4-5", "params": {"temperature": 0.5, "max_tokens": 50}}
    done = call(make_pool(tmp_path, spec, env))
    assert done.text == "hello there" and done.finish_reason == "end_turn"
    assert done.usage == Usage(11, 2)
    assert done.cost_usd == pytest.approx((11 * 1.0 + 2 * 5.0) / 1e6)
    req = srv.calls[0].request
    assert req.protocol == "anthropic" and req.system == "Be brief."
    assert req.messages == [{"role": "user", "content": "Say hi"}]
    assert req.params["temperature"] == 0.5 and req.params["max_tokens"] == 50


def test_config_base_url_overrides_environment(tmp_path, srv):
    env = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    spec = {"provider": "openai", "model": "gpt-4o", "base_url": srv.openai_base_url}
    assert call(make_pool(tmp_path, spec, env)).text == "hello there"


def test_usage_may_be_omitted(tmp_path):
    with ScriptedModelServer(lambda r: ScriptedReply("x", omit_usage=True)) as s:
        spec = {"provider": "openai-compatible", "model": "gpt-4o", "base_url": s.openai_base_url}
        done = call(make_pool(tmp_path, spec, {}))
    assert done.usage == Usage(None, None)
    assert done.cost_usd is None  # tokens unknown → cost unknown, even with a known price


@pytest.mark.parametrize(
    ("provider", "variable"),
    [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY"), ("azure-openai", "AZURE_OPENAI_API_KEY")],
)
def test_missing_key_names_the_variable(provider, variable):
    with pytest.raises(InputError) as err:
        resolve_endpoint(ModelSpec.from_dict("target", {"provider": provider, "model": "m"}), env={})
    assert variable in str(err.value)
    assert err.value.exit_code == 2


def test_custom_key_variable_and_key_never_in_repr():
    spec = ModelSpec.from_dict("judge", {"provider": "openai", "model": "m", "api_key_env": "MY_JUDGE_KEY"})
    with pytest.raises(InputError, match="MY_JUDGE_KEY"):
        resolve_endpoint(spec, env={"OPENAI_API_KEY": "not-this-one"})
    endpoint = resolve_endpoint(spec, env={"MY_JUDGE_KEY": "secret-value-42"})
    assert endpoint.api_key == "secret-value-42"
    assert "secret-value-42" not in repr(endpoint)


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        (Fault.rate_limit(retry_after=0.01), "rate_limit"),
        (Fault.server_error(), "server"),
        (Fault.overloaded(), "server"),
        (Fault.malformed(), "malformed"),
        (Fault.drop(), "connection"),
    ],
)
@pytest.mark.parametrize("provider", ["openai-compatible", "anthropic"])
def test_retryable_faults_are_retried_then_succeed(tmp_path, srv, fault, kind, provider):
    srv.inject(fault, fault)
    spec = {"provider": provider, "model": "m", "base_url": srv.url if provider == "anthropic" else srv.openai_base_url}
    pool = make_pool(tmp_path, spec, {"ANTHROPIC_API_KEY": "k"})
    assert call(pool).text == "hello there"
    assert srv.call_count == 3
    assert pool.spend["target"].retries == 2


def test_retries_exhausted_raise_provider_error(tmp_path, srv):
    srv.inject(*[Fault.server_error(503)] * 3)
    pool = make_pool(tmp_path, {"provider": "openai-compatible", "model": "m", "base_url": srv.openai_base_url}, {})
    with pytest.raises(ProviderError) as err:
        call(pool)
    assert err.value.kind == "server" and err.value.status == 503
    assert srv.call_count == 3 and pool.spend["target"].errors == 1


@pytest.mark.parametrize(("status", "kind"), [(401, "auth"), (400, "bad_request"), (404, "bad_request")])
def test_non_retryable_errors_fail_at_once(tmp_path, srv, status, kind):
    srv.inject(Fault.status(status, "nope"))
    pool = make_pool(tmp_path, {"provider": "openai-compatible", "model": "m", "base_url": srv.openai_base_url}, {})
    with pytest.raises(ProviderError) as err:
        call(pool)
    assert err.value.kind == kind and not err.value.retryable
    assert srv.call_count == 1


def test_timeout_is_retried(tmp_path, srv):
    srv.inject(Fault.slow(1.5))
    spec = {"provider": "openai-compatible", "model": "m", "base_url": srv.openai_base_url, "timeout": 0.3}
    pool = make_pool(tmp_path, spec, {})
    assert call(pool).text == "hello there"
    assert pool.spend["target"].retries == 1


def test_retry_honours_retry_after():
    slept: list[float] = []
    attempts = iter([ProviderError("rate_limit", "slow down", retryable=True, retry_after=2.5),
                     ProviderError("server", "503", retryable=True)])

    async def flaky():
        err = next(attempts, None)
        if err:
            raise err
        return "ok"

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    assert asyncio.run(with_retries(flaky, 3, sleep=fake_sleep, rng=random.Random(1))) == "ok"
    assert slept[0] == 2.5  # the server's Retry-After
    assert 0.25 <= slept[1] <= 0.75  # no Retry-After: 0.5 s × 2^0 with ±50% jitter


def test_parse_retry_after_forms():
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "0.2"}) == 0.2
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    huge = ProviderError("rate_limit", "", retryable=True, retry_after=10_000)
    assert model_policy(3).wait(1, huge.retry_after, random.Random(0)) == 300.0


def test_sample_index_is_part_of_the_cache_key(tmp_path, srv):
    spec = {"provider": "openai-compatible", "model": "m", "base_url": srv.openai_base_url}
    pool = make_pool(tmp_path, spec, {}, mode="read-write")
    call(pool, sample_index=0)
    call(pool, sample_index=1)
    call(pool, sample_index=0)
    assert srv.call_count == 2
    assert pool.cache.hits == 1


def test_replay_only_never_needs_a_key(tmp_path):
    pool = make_pool(tmp_path, {"provider": "openai", "model": "gpt-4o"}, env={}, mode="replay-only")
    pool.check_credentials("target")  # no error: the cache alone answers
    rw = make_pool(tmp_path, {"provider": "openai", "model": "gpt-4o"}, env={}, mode="read-write")
    with pytest.raises(InputError, match="OPENAI_API_KEY"):
        rw.check_credentials("target")


def test_pricing_table_and_overrides():
    assert price_for("gpt-4o-mini") == (0.15, 0.60)
    assert price_for("gpt-4o-mini-2024-07-18") == (0.15, 0.60)
    assert price_for("claude-sonnet-4-5-20250929") == (3.0, 15.0)
    assert price_for("gpt-4o-audio-preview") is None  # not a snapshot of gpt-4o: unknown
    assert price_for("my-local-model") is None
    assert price_for("my-local-model", {"my-local-model": {"input": 0.1, "output": 0.2}}) == (0.1, 0.2)
    assert cost_of(Usage(1_000_000, 500_000), (2.0, 8.0)) == pytest.approx(6.0)
    assert cost_of(Usage(None, 5), (2.0, 8.0)) is None


def test_an_agent_clis_spend_joins_the_ledger_and_stops_a_budget(tmp_path):
    from skillopt_ci.engine.runner import budget_stop
    from skillopt_ci.inputs.config import Budgets

    pool = make_pool(tmp_path, {"provider": "openai", "model": "gpt-4o-mini", "base_url": "http://127.0.0.1:9/v1"},
                     {"OPENAI_API_KEY": "sk-agent-key-0000000000000000"}, pricing={"gpt-4o-mini": {"input": 1.0, "output": 2.0}})
    endpoint = pool.endpoint("target")
    assert (endpoint.model, endpoint.base_url, endpoint.api_key) == ("gpt-4o-mini", "http://127.0.0.1:9/v1",
                                                                     "sk-agent-key-0000000000000000")
    assert "sk-agent-key" not in repr(endpoint)
    # Codex reports tokens: priced with the table. Claude Code reports dollars: taken as they are.
    assert pool.record_external("target", Usage(1_000_000, 0)) == pytest.approx(1.0)
    assert pool.record_external("target", Usage(10, 10), cost_usd=0.5) == 0.5
    spent = pool.total_spend()
    assert spent.calls == 2 and spent.cost_usd == pytest.approx(1.5) and spent.usage.input_tokens == 1_000_010
    assert "dollar budget reached" in budget_stop(pool, Budgets(max_dollars=1.2), 0.0)
