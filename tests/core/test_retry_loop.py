"""The one retry loop (core/retry.py) under its two callers: GitHub's sync calls and the model
providers' async ones keep their own schedules (how many calls, which waits) through it."""

from __future__ import annotations

import asyncio
import random

import pytest
from github import GithubException

from skillopt_ci.core.errors import ProviderError
from skillopt_ci.core.retry import RetryPolicy
from skillopt_ci.github.retry import call_with_retry
from skillopt_ci.models.retry import with_retries


def github_calls(policy: RetryPolicy, failures: list[BaseException]) -> tuple[int, list[float], BaseException | None]:
    """Run a GitHub call that fails with ``failures`` in turn, then succeeds: (calls, waits, raised)."""
    calls, waits = [0], []

    def call() -> str:
        calls[0] += 1
        if failures:
            raise failures.pop(0)
        return "done"

    try:
        call_with_retry(policy, call, sleep=waits.append)
    except Exception as exc:
        return calls[0], waits, exc
    return calls[0], waits, None


def model_calls(failures: list[ProviderError], max_retries: int, **kwargs) -> tuple[int, list[float], str | None]:
    """The same for a model call through ``with_retries``: (calls, waits, the message raised)."""
    calls, waits = [0], []

    async def call() -> str:
        calls[0] += 1
        if failures:
            raise failures.pop(0)
        return "done"

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    try:
        asyncio.run(with_retries(call, max_retries, sleep=sleep, **kwargs))
    except ProviderError as exc:
        return calls[0], waits, exc.message
    return calls[0], waits, None


def test_github_waits_double_and_the_last_failure_propagates() -> None:
    calls, waits, raised = github_calls(RetryPolicy(), [OSError("reset")] * 5)
    assert (calls, waits) == (3, [2.0, 4.0])
    assert isinstance(raised, OSError)


def test_github_retry_after_raises_the_wait_but_never_lowers_it() -> None:
    short = GithubException(503, {"message": "busy"}, {"Retry-After": "1"})
    long = GithubException(503, {"message": "busy"}, {"Retry-After": "9"})
    assert github_calls(RetryPolicy(), [short, long]) == (3, [2.0, 9.0], None)


def test_github_retry_after_beyond_the_cap_is_waited_up_to_the_cap() -> None:
    asked = GithubException(403, {"message": "You have exceeded a secondary rate limit"}, {"retry-after": "120"})
    assert github_calls(RetryPolicy(max_wait=5.0), [asked]) == (2, [5.0], None)


def test_github_primary_rate_limit_is_not_retried() -> None:
    primary = GithubException(403, {"message": "API rate limit exceeded for installation"}, {})
    calls, waits, raised = github_calls(RetryPolicy(), [primary])
    assert (calls, waits, raised) == (1, [], primary)


def test_model_backoff_is_jittered_doubling_capped_at_thirty_seconds() -> None:
    failures = [ProviderError("server", "503", status=503, retryable=True) for _ in range(8)]
    calls, waits, raised = model_calls(failures, 7, rng=random.Random(7), base_delay=4.0)
    same = random.Random(7)
    assert [round(w, 9) for w in waits] == [round(min(30.0, 4.0 * 2**k) * same.uniform(0.5, 1.5), 9)
                                            for k in range(7)]
    assert (calls, raised) == (8, "503")


def test_model_retry_after_replaces_the_backoff_even_when_shorter() -> None:
    failures = [ProviderError("rate_limit", "slow down", status=429, retryable=True, retry_after=0.1)]
    assert model_calls(failures, 3, base_delay=5.0) == (2, [0.1], None)


def test_model_retry_after_beyond_the_cap_is_not_retried_at_all() -> None:
    failures = [ProviderError("rate_limit", "quota", status=429, retryable=True, retry_after=301.0)]
    assert model_calls(failures, 5) == (1, [], "quota")


def test_model_errors_not_marked_retryable_propagate_at_once() -> None:
    failures = [ProviderError("auth", "bad key", status=401)]
    assert model_calls(failures, 5) == (1, [], "bad key")


def test_the_policy_grants_retries_until_its_attempts_are_spent() -> None:
    policy = RetryPolicy(attempts=2, backoff=1.0)
    assert policy.after(1, False, None) is None  # not worth another attempt
    assert policy.after(1, True, None) == 1.0
    assert policy.after(2, True, None) is None


@pytest.mark.parametrize("attempts", [0, 1])
def test_one_attempt_or_fewer_means_no_retry(attempts: int) -> None:
    assert RetryPolicy(attempts=attempts).after(1, True, None) is None
