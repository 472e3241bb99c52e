"""Rate limits that ask for a long wait (models/retry.py, limiter.py, pool.py): a Retry-After
beyond ``max_retry_wait`` fails the run at once (exit 3, "quota exhausted", when to come back)
instead of waiting out the cap; a pause the provider asks for holds only that endpoint's calls."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

from helpers.cli import run_cli
from helpers.project import write_project
from skillopt_ci.models.limiter import AdaptiveLimit
from skillopt_ci.sim import Fault


def hhmm_between(start: datetime, end: datetime, seconds: float) -> set[str]:
    return {f"{t + timedelta(seconds=seconds):%H:%M}" for t in (start, end)}


def test_a_retry_after_beyond_the_cap_fails_the_eval_at_once_saying_when_to_come_back(tmp_path, server):
    project = write_project(tmp_path / "p", server.openai_base_url, target={"max_retry_wait": 10, "max_retries": 5})
    server.inject(Fault.rate_limit(retry_after=3600))
    before = datetime.now(timezone.utc)
    res = run_cli("eval", "ticket-triage", "--out", str(tmp_path / "run"), "--cache", "off", "--quiet", cwd=project)
    after = datetime.now(timezone.utc)
    assert res.code == 3, (res.code, res.err)
    line = next(line for line in res.err.splitlines() if "quota exhausted" in line)
    assert "the target model 'sim-triage-1': quota exhausted (HTTP 429): retry after " in line
    assert any(f"retry after {hhmm} UTC" in line for hhmm in hhmm_between(before, after, 3600)), line
    assert "models.target.max_retry_wait" in res.err
    limited = [c for c in server.calls if c.status == 429]
    first = limited[0].request.last_user
    assert len(limited) == 1 and [c.request.last_user for c in server.calls].count(first) == 1  # not retried
    assert "Traceback" not in res.err


def test_a_pause_asked_of_one_endpoint_does_not_hold_another():
    now = [0.0]
    limit = AdaptiveLimit(4, clock=lambda: now[0])

    async def scenario():
        wave = await limit.acquire("openai sim-a")
        limit.release(wave, limited=True, retry_after=5.0, key="openai sim-a")
        other = asyncio.ensure_future(limit.acquire("openai sim-b"))
        same = asyncio.ensure_future(limit.acquire("openai sim-a"))
        await asyncio.sleep(0)
        assert other.done() and not same.done()
        same.cancel()

    asyncio.run(scenario())


def test_a_wait_beyond_the_cap_pauses_nothing():
    limit = AdaptiveLimit(4, clock=lambda: 0.0)

    async def scenario():
        wave = await limit.acquire("k")
        limit.release(wave, limited=True, retry_after=86400.0, max_pause=10.0, key="k")
        again = asyncio.ensure_future(limit.acquire("k"))
        await asyncio.sleep(0)
        assert again.done()

    asyncio.run(scenario())
