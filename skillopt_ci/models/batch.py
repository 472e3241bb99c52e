"""Provider batch APIs behind the model pool (``eval --batch``).

Contract:
- With batch mode on, a call that misses the response cache is registered with its role's
  :class:`_Collector` and waits for its answer. The collector submits what it holds as one batch
  once no new request has arrived for ``batch.quiet_seconds`` (or ``max_requests`` wait), polls it
  (waits growing from ``poll_seconds`` by half each time, up to ``max_poll_seconds``) until it
  ends, then stores each answer in the response cache and hands it to its caller. Identical
  requests (one cache key) share one line.
- A line the batch answered with an error raises the :class:`ProviderError` the synchronous call
  would have raised, so the pool's retries send a retryable one again (in the next batch) and the
  runner records the rest as errored rollouts, which a re-run tries again.
- Before polling, each batch is recorded in the journal (``batches.jsonl`` of the run directory):
  role, provider, model, batch id and its ``custom_id`` → cache key map; a ``collected`` line follows
  once its answers are in the cache (``abandoned`` when the provider no longer knows it, whose
  requests are then submitted again). A later process asked for a key of a batch that was
  submitted but never collected polls that batch instead of submitting again: an interrupted run
  costs nothing more. Batches run in rounds: a multi-turn rollout's next call joins the next batch.
  Each journal line is redacted (:mod:`skillopt_ci.core.redact`): an ``abandoned`` line quotes
  the provider's reason.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import InputError, ProviderError
from skillopt_ci.core.redact import redact
from skillopt_ci.inputs.config import PROVIDERS, BatchSettings, ModelSpec
from skillopt_ci.models.base import Backend, Completion, Message, ToolSpec
from skillopt_ci.models.batch_protocol import BatchClient
from skillopt_ci.models.registry import provider_of

POLL_GROWTH = 1.5
MAX_POLL_FAILURES = 10  # status checks in a row that may fail (connection, 5xx) before giving up


def batch_problem(spec: ModelSpec) -> str | None:
    """Why ``spec``'s calls cannot go through a batch API, or ``None``."""
    if provider_of(spec).batch is None:
        able = [name for name, provider in PROVIDERS.items() if provider.batch is not None]
        return f"the {spec.provider} provider has no batch API (--batch works with {', '.join(able)})"
    if spec.api != "chat":
        return f"--batch sends Chat Completions and Anthropic Messages, not api: {spec.api}"
    return None


def batch_client(spec: ModelSpec, backend: Backend) -> BatchClient:
    """The batch API of ``spec``'s provider, beside its ``backend`` (its SDK client, so Azure stays Azure)."""
    factory = provider_of(spec).batch
    if factory is None:
        raise InputError(f"the {spec.provider} backend has no batch API", hint="run without --batch")
    return factory(backend)


class BatchJournal:
    """``batches.jsonl``: one JSON line per submitted batch, and one when it has been collected."""

    def __init__(self, path: Path):
        self.path = path

    def open_batches(self, role: str | None = None, provider: str | None = None) -> dict[str, dict[str, str]]:
        """Batches (of ``role`` at ``provider``, when given) submitted and never collected:
        batch id → custom_id → cache key."""
        found: dict[str, dict[str, str]] = {}
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except OSError:
            return found
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line torn by a kill: its batch was never recorded whole
            if entry.get("event") == "submitted" and role in (None, entry.get("role")) \
                    and provider in (None, entry.get("provider")):
                found[entry["batch_id"]] = dict(entry["requests"])
            elif entry.get("event") in ("collected", "abandoned"):
                found.pop(entry.get("batch_id"), None)
        return found

    def append(self, entry: dict[str, Any]) -> None:
        """One whole line in one ``O_APPEND`` write, flushed to disk before polling starts."""
        line = json.dumps({**entry, "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}) + "\n"
        line = redact(line)  # a reason may quote a provider's error text
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()


@dataclass
class _Pending:
    """A registered request: its body (``None`` for one of a batch submitted earlier), how to read
    and store its answer, and the future its callers wait on."""

    body: dict[str, Any] | None
    reply: Any
    store: Callable[[Completion], None]
    future: asyncio.Future[Completion]
    started: float = field(default_factory=time.perf_counter)


class BatchRouter:
    """The pool's batch mode: one collector per role. ``use_journal`` points it at a run directory."""

    def __init__(self, settings: BatchSettings, *, notify: Callable[[str], None] | None = None):
        self.settings = settings
        self.notify = notify or (lambda line: None)
        self.journal: BatchJournal | None = None
        self._collectors: dict[str, _Collector] = {}

    def use_journal(self, path: Path) -> None:
        self.journal = BatchJournal(path)
        for collector in self._collectors.values():
            collector.known = None  # read again from the new journal on the next request

    async def complete(self, role: str, spec: ModelSpec, backend: Backend, key: str, messages: list[Message],
                       params: dict[str, Any], tools: Sequence[ToolSpec], reply: Any,
                       store: Callable[[Completion], None]) -> Completion:
        collector = self._collectors.get(role)
        if collector is None:
            collector = self._collectors[role] = _Collector(role, spec, batch_client(spec, backend), self)
        return await collector.answer(key, messages, params, tools, reply, store)

    async def aclose(self) -> None:
        """Stop waiting (an aborted run): submitted batches stay recorded, to be resumed."""
        for collector in self._collectors.values():
            await collector.aclose()


class _Collector:
    """Collects one role's requests into batches; see the module docstring."""

    def __init__(self, role: str, spec: ModelSpec, client: BatchClient, router: BatchRouter):
        self.role, self.spec, self.client, self.router = role, spec, client, router
        self.settings = router.settings
        self.waiting: dict[str, _Pending] = {}  # not submitted yet
        self.inflight: dict[str, _Pending] = {}  # in a submitted batch
        self.known: dict[str, str] | None = None  # key -> id of a journaled, uncollected batch
        self.journaled: dict[str, dict[str, str]] = {}
        self.answers: dict[str, bytes | ProviderError] = {}  # collected for nobody waiting (yet)
        self.polling: set[str] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def answer(self, key: str, messages: list[Message], params: dict[str, Any], tools: Sequence[ToolSpec],
                     reply: Any, store: Callable[[Completion], None]) -> Completion:
        if key in self.answers:
            return self._deliver_now(key, reply, store)
        pending = self.inflight.get(key) or self.waiting.get(key)
        if pending is None:
            future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
            pending = _Pending(self.client.request_body(messages, params, tools, reply), reply, store, future)
            batch_id = self._known().get(key)
            if batch_id is not None:  # submitted by an interrupted run: wait for that batch
                self.inflight[key] = pending
                self._poll_journaled(batch_id)
            else:
                self.waiting[key] = pending
                self._schedule()
        return await asyncio.shield(pending.future)  # one caller's cancellation is not the others'

    async def aclose(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _known(self) -> dict[str, str]:
        if self.known is None:
            journal = self.router.journal
            self.journaled = journal.open_batches(self.role, self.client.provider) if journal else {}
            self.known = {key: batch_id for batch_id, ids in self.journaled.items() for key in ids.values()}
        return self.known

    def _deliver_now(self, key: str, reply: Any, store: Callable[[Completion], None]) -> Completion:
        outcome = self.answers.pop(key)
        if isinstance(outcome, ProviderError):
            raise outcome
        completion = self.client.read(outcome, 0.0, reply)
        store(completion)
        return completion

    def _schedule(self) -> None:
        """Submit after a quiet window, or at once when a batch is full."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if len(self.waiting) >= self.settings.max_requests:
            self._submit_waiting()
        else:
            self._timer = asyncio.get_running_loop().call_later(self.settings.quiet_seconds, self._submit_waiting)

    def _submit_waiting(self) -> None:
        self._timer = None
        if self.waiting:
            batch, self.waiting = self.waiting, {}
            self._spawn(self._submit(batch))

    def _poll_journaled(self, batch_id: str) -> None:
        if batch_id not in self.polling:
            self.polling.add(batch_id)
            self.router.notify(f"batch {batch_id}: resuming the {self.role} batch an earlier run submitted")
            self._spawn(self._collect(batch_id, self.journaled[batch_id], resumed=True))

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _submit(self, batch: dict[str, _Pending]) -> None:
        ids = {f"r{i}": key for i, key in enumerate(batch)}
        try:
            batch_id = await self.client.submit([(cid, batch[key].body or {}) for cid, key in ids.items()])
        except BaseException as exc:  # the callers see why (a ProviderError is retried like any)
            for pending in batch.values():
                _settle(pending, exc if isinstance(exc, Exception) else ProviderError("cancelled", "batch not submitted"))
            if not isinstance(exc, Exception):
                raise
            return
        if self.router.journal is not None:
            self.router.journal.append({"event": "submitted", "role": self.role, "provider": self.client.provider,
                                        "model": self.spec.model, "batch_id": batch_id, "requests": ids})
        self.inflight.update(batch)
        self.polling.add(batch_id)
        self.router.notify(f"batch {batch_id}: {len(ids)} {self.role} request(s) submitted to {self.client.provider}; "
                           "waiting for it (an interrupted run resumes this batch)")
        await self._collect(batch_id, ids)

    async def _collect(self, batch_id: str, ids: dict[str, str], *, resumed: bool = False) -> None:
        """Poll until the batch ends, then store and deliver each answer. A resumed batch the
        provider no longer has is abandoned and its waiting requests go into a new batch."""
        try:
            results = await self._wait(batch_id)
        except ProviderError as exc:  # a retryable failure leaves it open: the next try polls it again
            self.polling.discard(batch_id)
            if not exc.retryable:  # gone for good (unknown id, other account): never poll it again
                self._close(batch_id, ids, {"event": "abandoned", "batch_id": batch_id, "reason": exc.message})
            again = {key: p for key in ids.values() if (p := self.inflight.pop(key, None)) is not None}
            if resumed and not exc.retryable:
                self.router.notify(f"batch {batch_id}: cannot be resumed ({exc.message}); submitting its "
                                   f"{len(again)} request(s) again")
                self.waiting.update(again)
                self._schedule()
                return
            for pending in again.values():
                _settle(pending, exc)
            return
        answered = 0
        for cid, key in ids.items():
            outcome = results.get(cid) or results.get("*") or ProviderError(
                "batch", f"batch {batch_id} returned no answer for {cid}", retryable=True)
            answered += not isinstance(outcome, ProviderError)
            waiter = self.inflight.pop(key, None)
            if waiter is None:
                self.answers[key] = outcome
            else:
                self._deliver(waiter, outcome)
        self._close(batch_id, ids, {"event": "collected", "batch_id": batch_id, "answered": answered,
                                    "errored": len(ids) - answered})
        self.polling.discard(batch_id)
        self.router.notify(f"batch {batch_id}: {answered} of {len(ids)} answered")

    def _close(self, batch_id: str, ids: dict[str, str], entry: dict[str, Any]) -> None:
        """Record that ``batch_id`` needs no more polling, here and in later runs."""
        for key in ids.values():
            if self.known is not None and self.known.get(key) == batch_id:
                del self.known[key]
        if self.router.journal is not None:
            self.router.journal.append(entry)

    async def _wait(self, batch_id: str) -> dict[str, bytes | ProviderError]:
        delay, failures = self.settings.poll_seconds, 0
        while True:
            try:
                if await self.client.ended(batch_id):
                    return await self.client.results(batch_id)
                failures = 0
            except ProviderError as exc:
                failures += 1
                if not exc.retryable or failures >= MAX_POLL_FAILURES:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * POLL_GROWTH, self.settings.max_poll_seconds)

    def _deliver(self, pending: _Pending, outcome: bytes | ProviderError) -> None:
        if isinstance(outcome, ProviderError):
            _settle(pending, outcome)
            return
        try:
            completion = self.client.read(outcome, time.perf_counter() - pending.started, pending.reply)
        except ProviderError as exc:
            _settle(pending, exc)
            return
        pending.store(completion)  # in the cache before the journal says collected
        if not pending.future.done():
            pending.future.set_result(completion)


def _settle(pending: _Pending, error: BaseException) -> None:
    if not pending.future.done():
        pending.future.set_exception(error)
        pending.future.exception()  # retrieved: a caller that went away leaves no warning
