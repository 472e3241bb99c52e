"""Adaptive concurrency (models/limiter.py): the provider's rate-limit headers, the AIMD limit,
and the pool under a rate-limited scripted server through the real OpenAI SDK."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import MappingProxyType

import pytest

from skillopt_ci.inputs.config import Config, ModelSpec
from skillopt_ci.models.base import Message
from skillopt_ci.models.cache import ResponseCache
from skillopt_ci.models.limiter import AdaptiveLimit, RateInfo, parse_duration, rate_info
from skillopt_ci.models.pool import ModelPool
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.ratelimit import RateLimit


@pytest.mark.parametrize(("text", "seconds"), [("1s", 1.0), ("6m0s", 360.0), ("20ms", 0.02), ("1h2m3.5s", 3723.5),
                                               ("0.5", 0.5), ("soon", None)])
def test_openai_reset_durations(text, seconds):
    assert parse_duration(text) == seconds


def test_rate_info_reads_openai_and_anthropic_headers():
    openai = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-remaining-tokens": "900",
              "x-ratelimit-reset-requests": "1.5s", "x-ratelimit-reset-tokens": "10ms"}
    assert rate_info(openai) == RateInfo(0, 900, 1.5)
    anthropic = {"anthropic-ratelimit-requests-remaining": "12", "anthropic-ratelimit-tokens-remaining": "0",
                 "anthropic-ratelimit-tokens-reset": "2026-12-01T00:00:30Z"}
    info = rate_info(anthropic, now=1796083200.0)  # 2026-12-01T00:00:00Z
    assert info == RateInfo(12, 0, 30.0) and info.exhausted
    assert rate_info({"content-type": "application/json"}) is None


def test_the_limit_halves_once_per_wave_and_grows_back_by_one_per_full_window():
    now = [0.0]
    limit = AdaptiveLimit(8, clock=lambda: now[0])

    async def scenario():
        waves = [await limit.acquire() for _ in range(8)]
        assert limit.in_flight == 8
        for wave in waves[:3]:  # three 429s from calls started in the same wave: one halving
            limit.release(wave, limited=True, retry_after=2.0)
        assert limit.limit == 4 and limit.decreases == 1
        for wave in waves[3:]:
            limit.release(wave)
        # retry-after holds every new start for 2 s
        started = asyncio.ensure_future(limit.acquire())
        await asyncio.sleep(0.01)
        assert not started.done()
        now[0] = 2.5
        limit.release(await _extra(limit))  # any release wakes the waiters, which re-check the clock
        return await started

    asyncio.run(scenario())
    assert limit.limit == 4
    for _ in range(4):
        limit.in_flight += 1
        limit.release(limit._wave)
    assert limit.limit == 5  # +1 after a full limit's worth of successes


async def _extra(limit: AdaptiveLimit) -> int:
    limit.in_flight += 1
    return limit._wave


def test_a_fixed_limit_never_changes():
    limit = AdaptiveLimit(4, adaptive=False)
    limit.in_flight = 1
    limit.release(0, limited=True, retry_after=5.0)
    assert limit.limit == 4 and limit.decreases == 0


def pool_for(tmp_path: Path, server: ScriptedModelServer, concurrency: int, adaptive: bool) -> ModelPool:
    spec = ModelSpec.from_dict("target", {"provider": "openai-compatible", "model": "m", "max_retries": 50,
                                          "base_url": server.openai_base_url, "params": {"max_tokens": 16}})
    config = Config(root=tmp_path, file="skillopt.yml", models=MappingProxyType({"target": spec}),
                    concurrency=concurrency, adaptive_concurrency=adaptive)
    return ModelPool(config, ResponseCache(tmp_path / "c.sqlite", "off"), env={"OPENAI_API_KEY": "k"},
                     retry_base_delay=0.01)


def many_calls(pool: ModelPool, n: int) -> list:
    async def go():
        try:
            return await asyncio.gather(*(pool.complete("target", [Message("user", f"ticket {i}")]) for i in range(n)),
                                        return_exceptions=True)
        finally:
            await pool.aclose()

    return asyncio.run(go())


@pytest.mark.slow
def test_under_a_rate_limit_the_adaptive_pool_backs_off_and_finishes_every_call(tmp_path):
    limit = RateLimit(requests_per_minute=1200, burst_s=0.5)  # 20 calls/s, 10 at once
    with ScriptedModelServer(lambda request: "ok", latency=0.2, rate_limit=limit) as server:
        pool = pool_for(tmp_path, server, concurrency=32, adaptive=True)
        results = many_calls(pool, 80)
    assert all(not isinstance(r, BaseException) for r in results)
    assert pool.limiter.decreases >= 1 and pool.limiter.lowest < 32  # it learned the limit
    assert limit.limited < 80  # fewer 429s than calls: not one failure per call


def test_a_window_the_provider_says_is_used_up_is_waited_for_without_a_429(tmp_path):
    limit = RateLimit(requests_per_minute=120, burst_s=2.0)  # 4 at once, then 2 per second
    with ScriptedModelServer(lambda request: "ok", rate_limit=limit) as server:
        pool = pool_for(tmp_path, server, concurrency=1, adaptive=True)
        results = many_calls(pool, 7)
    assert all(not isinstance(r, BaseException) for r in results)
    assert limit.limited == 0  # one at a time, each waiting for the reset the headers announced
