"""The eval runner: skill × tasks × repeats with bounded concurrency, resumable, never crashing on
a failed rollout.

Contract:
- A provider failure (after retries) or an unparseable judge verdict becomes an *errored* result
  (missing data), not an exception. Too many of them abort the run with :class:`RuntimeFailure`.
- A scorer that raises (:class:`ScorerCrash`) aborts the run: it is a bug in the suite.
- Each result is appended to the run directory as it finishes (one ``O_APPEND`` write of one
  line), so a killed run loses only the rollouts in flight; on resume, finished task × repeat
  pairs are skipped and errored ones are tried again.
- Budgets (tokens, dollars, wall time) stop the launch of new rollouts, and every model call
  reserves its estimated cost first (:mod:`skillopt_ci.engine.budgets`): a call that would pass a
  dollar or token budget is not sent, its rollout keeps no result (it is tried again on resume),
  and the run stops. The summary then says ``complete: false`` and why, with the true spend.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillopt_ci import __version__
from skillopt_ci.core.errors import ProviderError, RuntimeFailure, ScoringError
from skillopt_ci.core.names import slug
from skillopt_ci.core.options import NoOptions
from skillopt_ci.core.records import EvalSummary, TaskResult, error_kinds, summarize
from skillopt_ci.core.skill import Skill
from skillopt_ci.core.task import Task
from skillopt_ci.core.text import cut
from skillopt_ci.core.trajectory import Rollout
from skillopt_ci.engine.budgets import budget_limits, budget_stop, final_stop
from skillopt_ci.engine.progress import Progress
from skillopt_ci.engine.rollout_cache import cached_rollout, rollout_key, store_rollout
from skillopt_ci.engine.rundir import RunDir
from skillopt_ci.envs.base import BaseEnvironment, RolloutRequest
from skillopt_ci.envs.chat import ChatEnvironment
from skillopt_ci.inputs.config import Budgets
from skillopt_ci.inputs.suite import Suite
from skillopt_ci.models.base import Usage
from skillopt_ci.models.budget import BudgetReached
from skillopt_ci.models.pool import ModelPool
from skillopt_ci.scorers import Scorer
from skillopt_ci.scorers.trigger import TriggerScorer

NOT_FOR_THE_SKILL = TriggerScorer()  # scores a should_trigger: false task, whatever the suite's scorer


@dataclass(frozen=True)
class EvalPlan:
    """What to evaluate: a skill on some tasks of a suite split, each ``repeats`` times."""

    skill: Skill
    suite: Suite
    split: str
    tasks: tuple[Task, ...]
    repeats: int
    shard: str | None = None
    sample_offset: int = 0  # repeat r is model sample ``sample_offset + r`` (fresh samples per epoch)
    split_task_ids: tuple[str, ...] = ()  # every task of the split, not only this shard's (for merge)
    environment: dict[str, Any] | None = None  # the environment's identity (settings, an agent CLI's version)

    def manifest(self, model: dict[str, Any]) -> dict[str, Any]:
        """What run.json records. A shard also records every task of its split, so ``merge`` can
        tell a missing shard from a complete set."""
        data = {
            "sample_offset": self.sample_offset,
            "kind": "eval",
            "skill_hash": self.skill.hash,
            "suite_hash": self.suite.hash,
            "split": self.split,
            "repeats": self.repeats,
            "model": model,
            "shard": self.shard,
            "task_ids": [t.id for t in self.tasks],
        }
        environment = self.environment or dict(self.suite.environment)
        if environment != {"type": "chat"}:  # chat runs keep the identity they had before environments
            data["environment"] = environment
        if self.shard:
            data["split_task_ids"] = list(self.split_task_ids)
        return data


@dataclass(frozen=True)
class ErrorPolicy:
    max_error_rate: float = 0.5
    min_attempts: int = 10


@dataclass
class EvalOutcome:
    summary: EvalSummary
    results: list[TaskResult]
    run_dir: Path
    # Rollouts that were in flight when ``stop_when`` stopped the run and were cancelled: their
    # model calls may already have been sent (and billed), but no result was kept.
    cancelled: int = 0


async def rollout(plan: EvalPlan, task: Task, repeat: int, prompt: str, pool: ModelPool, scorer: Scorer,
                  environment: BaseEnvironment, run_path: Path | None = None) -> TaskResult:
    """Run one task once in ``environment`` and score it. A rollout that did not finish and a
    scoring failure become errored results (its steps kept); the workspace is always released.
    An environment that caches rollouts is not run again for a rollout the cache holds."""
    request = RolloutRequest(
        skill=plan.skill, task=task, prompt=prompt, suite_dir=plan.suite.path,
        sample_index=plan.sample_offset + repeat, skill_dir=getattr(plan.skill, "folder", None),
        keep_dir=run_path / "files" / slug(task.id) / str(repeat) if run_path else None,
        image_dir=run_path / "images" if run_path else None,
    )
    key = None
    if environment.caches_rollouts:  # an agent CLI's calls bypass the response cache: cache the whole rollout
        key = rollout_key(plan.skill, plan.suite, task, request.sample_index, environment, pool)
    if key is not None and (hit := cached_rollout(pool, key, request.keep_dir)) is not None:
        return hit
    done = await environment.run(request, pool)
    try:
        result = await _scored(done, task, repeat, prompt, pool, scorer)
    finally:
        done.close()
    if key is not None:
        store_rollout(pool, key, result, request.keep_dir)
    return result


async def _scored(done: Rollout, task: Task, repeat: int, prompt: str, pool: ModelPool, scorer: Scorer) -> TaskResult:
    nothing_happened = done.error is not None and not done.steps and not (done.usage.input_tokens or 0)
    base: dict[str, Any] = dict(
        task_id=task.id,
        repeat=repeat,
        prompt=prompt,
        expected=task.expected,
        output=None if nothing_happened else done.output,
        usage=done.usage,
        latency_s=round(done.latency_s, 4),
        cached=done.cached,
        finish_reason=done.finish_reason,
        trajectory=[s.to_dict() for s in done.steps] or None,
        reward=done.reward,
        transcript=done.transcript,
        files=list(done.files) or None,
        consult=done.consult,
        should_trigger=task.should_trigger,
    )
    if done.error is not None:
        return TaskResult(score=None, passed=None, cost_usd=None if nothing_happened else done.cost_usd,
                          error=dict(done.error), **base)
    if task.should_trigger is False:  # a request the skill is not for: only whether it was left alone counts
        scorer = NOT_FOR_THE_SKILL
    try:
        score = await scorer.ascore_rollout(done, task, pool)
    except ScoringError as exc:
        spent = exc.usage if isinstance(exc.usage, Usage) else Usage()
        return TaskResult(score=None, passed=None, cost_usd=done.cost_usd, scorer_usage=spent,
                          error={"kind": "scoring", "message": cut(exc, 500)}, **base)
    except ProviderError as exc:
        return TaskResult(score=None, passed=None, cost_usd=done.cost_usd,
                          error={"kind": f"scorer_{exc.kind}", "message": exc.message}, **base)
    cost = done.cost_usd
    if (score.usage.input_tokens or 0) + (score.usage.output_tokens or 0) > 0:
        judge_cost = pool.cost("judge", score.usage)
        cost = None if cost is None or judge_cost is None else cost + judge_cost
    return TaskResult(score=score.value, passed=score.passed, feedback=score.feedback, scorer_usage=score.usage,
                      cost_usd=None if cost is None else round(cost, 8), **base)


async def evaluate(
    plan: EvalPlan,
    pool: ModelPool,
    scorer: Scorer,
    run: RunDir,
    *,
    budgets: Budgets | None = None,
    errors: ErrorPolicy | None = None,
    progress: Progress | None = None,
    fresh: bool = False,
    clock: Callable[[], float] = time.monotonic,
    stop_when: Callable[[Mapping[tuple[str, int], TaskResult]], str | None] | None = None,
    environment: BaseEnvironment | None = None,
) -> EvalOutcome:
    """Evaluate ``plan`` into ``run``. See the module docstring for the contract.

    ``stop_when`` sees every result so far (resumed ones included) before the first launch and
    after each new result; ``environment`` runs each rollout (default: ``chat``); when it returns a reason, rollouts in flight are cancelled, nothing
    more is launched, and the summary says ``complete: false`` with that reason (early rejection
    of a training candidate that can no longer win).
    """
    started = clock()
    model = pool.spec("target").to_dict()
    previous = run.open(plan.manifest(model), fresh=fresh)
    latest = {(r.task_id, r.repeat): r for r in previous}
    todo = [(t, k) for t in plan.tasks for k in range(plan.repeats) if not (latest.get((t.id, k)) and latest[(t.id, k)].ok)]
    loop = _Workers(plan, pool, scorer, environment or ChatEnvironment(NoOptions(), plan.suite.path), run,
                    budgets or Budgets(), errors or ErrorPolicy(),
                    progress or Progress(len(todo), plan.skill.name, enabled=False), run.result_log(), clock, started,
                    stop_when, latest, iter(todo), spent_before=pool.total_spend().cost_usd)
    if stop_when is not None and (reason := stop_when(latest)):
        loop.stop.append(reason)
    with pool.guard.limited(budget_limits(loop.budgets)):
        if not loop.stop:
            loop.workers += [asyncio.ensure_future(loop.work()) for _ in range(max(1, min(pool.config.concurrency, len(todo))))]
        await loop.join()
    if loop.budget_stopped:  # written again now that every call in flight has landed: the true spend
        loop.stop[0] = final_stop(pool, loop.budgets, loop.stop[0], loop.refused,
                                  pool.total_spend().cost_usd - loop.spent_before - loop.kept_usd)
    summary = _summary(plan, latest, model, clock() - started, loop.stop)
    return EvalOutcome(summary=summary, results=_in_plan_order(plan, latest), run_dir=run.path,
                       cancelled=loop.cancelled)


@dataclass
class _Workers:
    """What the concurrent workers of one evaluation share: the queue of (task, repeat) left, the
    latest result of each, the error counts, and why the run stopped early (if it did)."""

    plan: EvalPlan
    pool: ModelPool
    scorer: Scorer
    environment: BaseEnvironment
    run: RunDir
    budgets: Budgets
    errors: ErrorPolicy
    progress: Progress
    log: Any
    clock: Callable[[], float]
    started: float
    stop_when: Callable[[Mapping[tuple[str, int], TaskResult]], str | None] | None
    latest: dict[tuple[str, int], TaskResult]
    queue: Iterator[tuple[Task, int]]
    prompts: dict[str, str] = field(default_factory=dict)
    attempts: int = 0
    failures: int = 0
    stop: list[str] = field(default_factory=list)
    workers: list[asyncio.Future[None]] = field(default_factory=list)
    in_flight: int = 0  # rollouts started and not yet recorded
    cancelled: int = 0  # rollouts in flight when stop_when stopped the run
    budget_stopped: bool = False  # stop[0] is a budget's
    refused: BudgetReached | None = None  # the call a budget refused to send, if one was
    spent_before: float = 0.0  # the pool's dollars when this evaluation started
    kept_usd: float = 0.0  # what the results kept by this process spent (the summary's spent_usd)

    def halt_others(self) -> None:
        current = asyncio.current_task()
        for w in self.workers:
            if w is not current:
                w.cancel()

    async def work(self) -> None:
        """Take (task, repeat) pairs off the shared queue until it is empty or the run stops."""
        for task, repeat in self.queue:
            if self.stop:
                return
            reason = budget_stop(self.pool, self.budgets, self.clock() - self.started, in_flight=self.in_flight)
            if reason:
                self.stop_for_budget(reason)
                return
            prompt = self.prompts.get(task.id)
            if prompt is None:
                prompt = self.prompts[task.id] = self.plan.suite.render_prompt(task)
            self.in_flight += 1
            try:
                result = await rollout(self.plan, task, repeat, prompt, self.pool, self.scorer, self.environment,
                                       self.run.path)
            except BudgetReached as exc:  # a call of this rollout was not sent: no result, the run stops
                self.refused = self.refused or exc
                self.stop_for_budget(str(exc))
                return
            finally:
                self.in_flight -= 1
            if self.record(task, repeat, result):
                return

    def stop_for_budget(self, reason: str) -> None:
        """Launch nothing more; rollouts in flight finish (their calls hold reservations)."""
        if not self.stop:
            self.stop.append(reason)
            self.budget_stopped = True

    def record(self, task: Task, repeat: int, result: TaskResult) -> bool:
        """Keep ``result``; True when the run stops here. Too many errors raise RuntimeFailure."""
        self.latest[(task.id, repeat)] = result
        self.log.append(result)
        if not result.cached and result.output is not None:
            self.kept_usd += result.cost_usd or 0.0
        self.progress.advance(error=not result.ok)
        self.attempts += 1
        self.failures += not result.ok
        if self.attempts >= self.errors.min_attempts and self.failures / self.attempts > self.errors.max_error_rate:
            self.halt_others()
            raise RuntimeFailure(_abort_message(self.failures, self.attempts, self.latest.values()),
                                 hint=_abort_hint(self.pool, self.latest.values(), _kept(self.run, self.latest.values())))
        if self.stop_when is not None and not self.stop and (reason := self.stop_when(self.latest)):
            self.stop.append(reason)
            self.cancelled = self.in_flight
            self.halt_others()
            return True
        return False

    async def join(self) -> None:
        """Wait for every worker; on any failure (or cancellation) cancel the rest, close the log,
        drop a run directory that kept nothing, and re-raise."""
        try:
            outcomes = await asyncio.gather(*self.workers, return_exceptions=True)
            failed = [o for o in outcomes if isinstance(o, BaseException) and not isinstance(o, asyncio.CancelledError)]
            if failed:
                raise failed[0]
        except BaseException:
            for w in self.workers:
                w.cancel()
            await asyncio.gather(*self.workers, return_exceptions=True)
            self.log.close()
            self.progress.close()
            if _kept(self.run, self.latest.values()) is None:
                self.run.discard()
            raise
        self.log.close()
        self.progress.close()


def _in_plan_order(plan: EvalPlan, latest: Mapping[tuple[str, int], TaskResult]) -> list[TaskResult]:
    order = {t.id: i for i, t in enumerate(plan.tasks)}
    return sorted(latest.values(), key=lambda r: (order.get(r.task_id, len(order)), r.repeat))


def _summary(plan: EvalPlan, latest: Mapping[tuple[str, int], TaskResult], model: dict[str, Any], wall_time_s: float,
             stop: list[str]) -> EvalSummary:
    return summarize(
        _in_plan_order(plan, latest),
        [t.id for t in plan.tasks],
        skill=plan.skill.identity(),
        suite={"name": plan.suite.name, "path": plan.suite.display, "hash": plan.suite.hash},
        split=plan.split,
        model=model,
        repeats=plan.repeats,
        wall_time_s=wall_time_s,
        complete=not stop,
        stopped=stop[0] if stop else None,
        shard=plan.shard,
        tool_version=__version__,
    )


def _kept(run: RunDir, results: Any) -> Path | None:
    """Where an aborted run's results stay: a directory this process created is removed when
    nothing in it was measured (a training step re-creates it on resume, possibly for another
    candidate); then the abort message itself must carry the errors."""
    return run.path if not run.created or any(r.ok for r in results) else None


def _abort_message(failures: int, attempts: int, results: Any) -> str:
    """The count of each error kind and the first error itself, so the line alone says what went wrong."""
    errors = [r.error for r in results if r.error]
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(error_kinds(results).items(), key=lambda kv: -kv[1]))
    text = f"aborted after {failures} of {attempts} rollouts failed ({kinds})"
    if errors:
        message = " ".join(cut(errors[0]["message"], 300).split())  # redacted before it is flattened
        text += f"; first error: {errors[0]['kind']}: {message}"
    return text


def _abort_hint(pool: ModelPool, results: Any, kept: Path | None) -> str:
    kinds = {r.error["kind"] for r in results if r.error}
    spec = pool.spec("target")
    if kinds & {"connection", "timeout"}:
        where = spec.base_url or f"the {spec.provider} endpoint"
        return f"check that {where} is reachable (models.target.base_url or the provider's *_BASE_URL variable)"
    if "auth" in kinds:
        return "check the API key for models.target"
    if "rate_limit" in kinds:
        return "lower concurrency in skillopt.yml or raise models.target.max_retries"
    if kinds == {"replay_miss"}:
        return "record the answers first with --cache read-write; replay-only never calls the model"
    if kept is not None:
        return f"every error is in {kept / 'results.jsonl'}; re-running the same command retries the failed rollouts"
    if "malformed" in kinds:
        where = spec.base_url or f"the {spec.provider} endpoint"
        return f"{where} did not answer like a model API (a web page or a proxy?): check models.target.base_url"
    return "nothing was measured, so no run directory is kept; re-running the same command tries again"
