"""Models by role, behind the cache, retries, a concurrency limit and spend accounting.

This is the :class:`ModelCaller` the engine and the scorers use. Backends (and their SDKs) are
created on the first cache miss of a role, so a fully cached run never builds a client.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from skillopt_ci.core.errors import InputError, ProviderError, RuntimeFailure
from skillopt_ci.inputs.config import Config, ModelSpec
from skillopt_ci.inputs.preflight import max_output
from skillopt_ci.models.base import Backend, Completion, Message, ToolSpec, Usage
from skillopt_ci.models.batch import BatchRouter
from skillopt_ci.models.budget import SpendGuard, Spent, estimate_call
from skillopt_ci.models.cache import ResponseCache, cache_key, redacted
from skillopt_ci.models.limiter import AdaptiveLimit
from skillopt_ci.models.pricing import LOCAL_PRICE, cost_of, is_loopback, price_for
from skillopt_ci.models.registry import Endpoint, base_url_of, create_backend, resolve_endpoint
from skillopt_ci.models.retry import BASE_DELAY_S, asks_too_long, wait_refused, with_retries
from skillopt_ci.models.structured import ReplyFormat, resolve_mode


@dataclass
class RoleSpend:
    """What one role cost in this process: calls made, cache hits, retries, tokens and dollars."""

    calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    errors: int = 0
    usage: Usage = field(default_factory=lambda: Usage(0, 0))
    cost_usd: float = 0.0
    cost_known: bool = True

    def charge(self, usage: Usage, cost: float | None, calls: int = 1) -> None:
        """Count ``calls`` calls billed ``usage`` at ``cost`` dollars (None: unknown)."""
        self.calls += calls
        self.usage = self.usage + usage
        if cost is None:
            self.cost_known = False
        else:
            self.cost_usd += cost

    def to_dict(self) -> dict[str, object]:
        return {
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "retries": self.retries,
            "errors": self.errors,
            "input_tokens": self.usage.input_tokens or 0,
            "output_tokens": self.usage.output_tokens or 0,
            "cost_usd": round(self.cost_usd, 6) if self.cost_known else None,
        }


def endpoint_key(spec: ModelSpec) -> str:
    """What a provider's rate limit applies to: one model at one endpoint (its key goes with it)."""
    return f"{spec.provider} {spec.base_url or ''} {spec.model}"


def batch_error(exc: ProviderError) -> ProviderError:
    """A call that failed in batch mode says so: an endpoint without the batch API answers its file
    and batch routes with 404 or 405, which alone reads like a broken model."""
    missing = " (does this endpoint offer the batch API? run without --batch)" if exc.status in (404, 405) else ""
    return ProviderError(exc.kind, f"through the batch API: {exc.message}{missing}", status=exc.status,
                         retryable=exc.retryable, retry_after=exc.retry_after)


class ModelPool:
    """Call models by role. ``complete`` never raises for a failed call except as
    :class:`ProviderError` (after retries) or :class:`RuntimeFailure` (a replay-only cache miss)."""

    def __init__(
        self,
        config: Config,
        cache: ResponseCache,
        *,
        env: Mapping[str, str] | None = None,
        backend_factory: Callable[[ModelSpec, Mapping[str, str]], Backend] | None = None,
        retry_base_delay: float = BASE_DELAY_S,
    ):
        self.config = config
        self.cache = cache
        self.env = dict(os.environ if env is None else env)
        self.spend: dict[str, RoleSpend] = {}
        self._backends: dict[str, Backend] = {}
        self._factory = backend_factory or create_backend
        self.limiter = AdaptiveLimit(config.concurrency, adaptive=config.adaptive_concurrency)
        self._retry_base_delay = retry_base_delay
        self.batch: BatchRouter | None = None  # set by eval --batch: calls go through provider batches
        self.guard = SpendGuard(self._spent)  # budgets: calls reserve their estimated cost first

    def spec(self, role: str) -> ModelSpec:
        spec = self.config.models.get(role)
        if spec is None:
            raise InputError(f"no {role!r} model configured", where=f"{self.config.file}: models.{role}",
                             hint=f"add models.{role} with a provider and a model")
        return spec

    def check_credentials(self, *roles: str) -> None:
        """Fail fast (exit 2) when a role's key or endpoint is missing, unless the cache alone
        will answer (replay-only)."""
        if self.cache.mode == "replay-only":
            return
        for role in roles:
            resolve_endpoint(self.spec(role), self.env)

    def price(self, spec: ModelSpec) -> tuple[float, float] | None:
        """USD per 1M (input, output) tokens: the price table's, else free for a model served on
        this machine (loopback base URL), else ``None`` (unknown). In batch mode, the batch price."""
        found = price_for(spec.model, self.config.pricing, batch=self.batch is not None)
        if found is None and self.is_local(spec):
            return LOCAL_PRICE
        return found

    def is_local(self, spec: ModelSpec) -> bool:
        """Whether ``spec`` is served from a loopback address (llama.cpp, vLLM, Ollama on this machine)."""
        return is_loopback(base_url_of(spec, self.env))

    def cost(self, role: str, usage: Usage) -> float | None:
        """Dollar cost of ``usage`` at ``role``'s model price; ``None`` when unknown."""
        return cost_of(usage, self.price(self.spec(role)))

    async def complete(
        self,
        role: str,
        messages: list[Message],
        sample_index: int = 0,
        *,
        tools: Sequence[ToolSpec] = (),
        context: Mapping[str, Any] | None = None,
        reply: ReplyFormat | None = None,
    ) -> Completion:
        """One call by role. ``tools`` are offered to the model; ``tools`` and ``context`` (the
        calling environment's identity) are part of the cache key. ``reply`` asks for a JSON reply
        of its schema in the way the role's ``structured_output`` setting says (``off``: not at
        all); what was asked joins the cache key."""
        spec = self.spec(role)
        spend = self.spend.setdefault(role, RoleSpend())
        params = dict(spec.params)
        if reply is not None:
            mode = resolve_mode(spec.structured_output, spec.provider)
            reply = None if mode == "off" else replace(reply, mode=mode)
        key = cache_key(spec.provider, spec.model, params, messages, sample_index,
                        tools=tools, context=context, api=spec.api, reply=reply.key() if reply else None)
        cached = self.cache.get(key)
        price = self.price(spec)
        if cached is not None:
            spend.cache_hits += 1
            return replace(cached, cost_usd=cost_of(cached.usage, price))
        if self.cache.mode == "replay-only":
            raise RuntimeFailure(
                f"response cache miss for the {role} model {spec.model!r} in replay-only mode",
                where=str(self.cache.path),
                hint="record the responses once with cache mode read-write, then replay",
            )
        reservation = None
        if self.guard.limits.active:  # budgets: the call's estimated cost is reserved before it is sent
            reservation = await self.guard.reserve(role, estimate_call(messages, tools, max_output(spec), price), price,
                                                   first_alone=self.batch is None)
        billed = Usage(None, None)
        try:
            completion = await self._send(role, spec, key, messages, params, tools, reply, spend)
            cost = cost_of(completion.usage, price)
            spend.charge(completion.usage, cost)  # counted before the reservation is let go
            billed = completion.usage
        finally:
            self.guard.release(reservation, billed.input_tokens, billed.output_tokens)
        self.cache.put(key, spec.provider, spec.model, completion)
        return replace(completion, cost_usd=cost)

    async def _send(self, role: str, spec: ModelSpec, key: str, messages: list[Message], params: dict[str, Any],
                    tools: Sequence[ToolSpec], reply: ReplyFormat | None, spend: RoleSpend) -> Completion:
        """One call after a cache miss, with its retries (through a provider batch in batch mode);
        the answer redacted."""
        backend = self._backend(role, spec)

        def count_retry(error: ProviderError, delay: float) -> None:
            spend.retries += 1

        def attempt() -> Awaitable[Completion]:
            if self.batch is not None:
                return self.batch.complete(role, spec, backend, key, messages, params, tools, reply,
                                           lambda done: self.cache.put(key, spec.provider, spec.model, done))
            return self._attempt(backend, messages, params, tools, reply, spec.max_retry_wait,
                                 endpoint_key(spec))

        try:
            completion = await with_retries(attempt, spec.max_retries, on_retry=count_retry,
                                            base_delay=self._retry_base_delay, max_wait=spec.max_retry_wait)
        except ProviderError as exc:
            spend.errors += 1
            if asks_too_long(exc, spec.max_retry_wait):
                raise wait_refused(exc, f"the {role} model {spec.model!r}", f"models.{role}.max_retry_wait",
                                   spec.max_retry_wait) from exc
            if self.batch is not None:
                raise batch_error(exc) from exc
            raise
        return redacted(completion)  # at the source: what the cache stores is what the run sees

    async def _attempt(self, backend: Backend, messages: list[Message], params: dict[str, Any],
                       tools: Sequence[ToolSpec], reply: ReplyFormat | None, max_wait: float,
                       key: str) -> Completion:
        """One call, inside the adaptive concurrency limit, which learns from how it ended (a
        server's retry-after holds new calls to the same endpoint, ``key``, no longer than
        ``max_wait``, as it holds retries)."""
        wave = await self.limiter.acquire(key)
        limited, retry_after, rate = False, None, None
        try:
            # only what is used is passed: a backend written before tools or replies still works
            extra: tuple[Any, ...] = (tools,) if tools or reply is not None else ()
            named: dict[str, Any] = {"reply": reply} if reply else {}
            done = await backend.complete(messages, params, *extra, **named)
            rate = done.rate
            return done
        except ProviderError as exc:
            limited, retry_after = exc.kind == "rate_limit" or exc.status == 529, exc.retry_after
            raise
        finally:
            self.limiter.release(wave, limited=limited, retry_after=retry_after, rate=rate, max_pause=max_wait,
                                 key=key)

    def _backend(self, role: str, spec: ModelSpec) -> Backend:
        backend = self._backends.get(role)
        if backend is None:
            backend = self._factory(spec, self.env)
            self._backends[role] = backend
        return backend

    def endpoint(self, role: str) -> Endpoint:
        """Where ``role``'s model is served and with which key, for an agent CLI that calls the
        model itself (``codex``, ``claude-code``): the same base URL and key every other call of
        this tool uses. The key is registered as a secret (never written out)."""
        return resolve_endpoint(self.spec(role), self.env)

    def record_external(self, role: str, usage: Usage, cost_usd: float | None = None, *,
                        calls: int = 1) -> float | None:
        """Count ``calls`` made outside this pool (by an agent CLI, through the forwarder) in the
        one spend ledger, so budgets stop a run. ``cost_usd`` is the CLI's own figure; without
        one, ``usage`` is priced with the price table. Returns the cost counted (``None`` when unknown)."""
        spend = self.spend.setdefault(role, RoleSpend())
        cost = cost_usd if cost_usd is not None else cost_of(usage, self.price(self.spec(role)))
        spend.charge(usage, cost, calls)
        return cost

    def _spent(self) -> Spent:
        total = self.total_spend()
        return Spent(total.cost_usd, (total.usage.input_tokens or 0) + (total.usage.output_tokens or 0))

    def total_spend(self) -> RoleSpend:
        total = RoleSpend()
        for s in self.spend.values():
            total.charge(s.usage, s.cost_usd, s.calls)
            total.cache_hits += s.cache_hits
            total.retries += s.retries
            total.errors += s.errors
            total.cost_known = total.cost_known and s.cost_known
        return total

    async def aclose(self) -> None:
        if self.batch is not None:
            await self.batch.aclose()
        for backend in self._backends.values():
            await backend.aclose()
        self._backends.clear()
