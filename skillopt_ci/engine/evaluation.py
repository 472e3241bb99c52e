"""Evaluations end to end: load inputs, check them, run, write the run directory.

Everything that can be wrong with the input is found before a run directory is created, so bad
input never leaves a half-written run behind. An :class:`EvalSession` shares one response cache,
one model pool and one event loop across several evaluations (the gate evaluates base and head of
every changed skill in one session, so clients and connections are reused).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import sys
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO, TypeVar

from skillopt_ci.core.errors import EXIT_FAILED, EXIT_OK, EXIT_RUNTIME, InputError
from skillopt_ci.core.names import run_dir_name
from skillopt_ci.core.paths import display_path
from skillopt_ci.core.records import EvalSummary, TaskResult
from skillopt_ci.core.shard import Shard
from skillopt_ci.core.skill import Skill, load_skill
from skillopt_ci.engine.progress import Progress
from skillopt_ci.engine.rundir import BATCHES, RunDir
from skillopt_ci.engine.runlock import RunLock
from skillopt_ci.engine.runner import ErrorPolicy, EvalOutcome, EvalPlan, evaluate
from skillopt_ci.envs.base import BaseEnvironment
from skillopt_ci.envs.chat import chat_messages
from skillopt_ci.envs.registry import build_environment
from skillopt_ci.inputs.config import Budgets, Config, ModelSpec
from skillopt_ci.inputs.preflight import estimate_plan, max_output, plan_warnings
from skillopt_ci.inputs.suite import Suite, load_suite, scorer_where
from skillopt_ci.models.base import Backend
from skillopt_ci.models.batch import BatchRouter, batch_problem
from skillopt_ci.models.cache import ResponseCache, cache_key
from skillopt_ci.models.pool import ModelPool
from skillopt_ci.models.pricing import price_for
from skillopt_ci.render.eval_report import eval_report
from skillopt_ci.scorers import Scorer, build_scorer
from skillopt_ci.scorers.trigger import trigger_problem

MIN_COVERAGE = 0.8
T = TypeVar("T")


@dataclass(frozen=True)
class EvalRequest:
    skill: Path
    suite: Path
    split: str = "val"
    repeats: int | None = None
    out: Path | None = None
    fresh: bool = False
    threshold: float | None = None
    cache_mode: str | None = None
    shard: Shard | None = None
    strict: bool = False
    assume_yes: bool = False
    wait: bool = False  # queue behind another process writing to the same run directory
    baseline: str | None = None  # "none": also evaluate the same tasks with no skill (engine/baseline.py)
    batch: bool = False  # send the model calls through the providers' batch APIs (models/batch.py)


def default_run_dir(config: Config, plan: EvalPlan, prefix: str = "eval") -> Path:
    """Deterministic per (skill, suite, split, repeats, model, shard): the same command resumes."""
    manifest = plan.manifest(config.models["target"].to_dict())
    manifest.pop("split_task_ids", None)  # follows from the rest; keeps the names of older runs
    ident = json.dumps(manifest, sort_keys=True)
    key = hashlib.sha256(ident.encode()).hexdigest()[:10]
    return config.runs_dir / run_dir_name(prefix, plan.skill.name, plan.split, key)


def make_plan(skill: Skill, suite: Suite, split: str, repeats: int | None, shard: Shard | None = None,
              sample_offset: int = 0) -> EvalPlan:
    """The tasks of ``split`` (or of one shard of it). Raises :class:`InputError` when empty."""
    tasks = suite.tasks(split)
    if not tasks:
        raise InputError(f"the {split!r} split has no tasks", where=suite.split_files.get(split, suite.display))
    all_ids = tuple(t.id for t in tasks)
    if shard is not None:
        tasks = shard.select(tasks)
    return EvalPlan(skill=skill, suite=suite, split=split, tasks=tasks, repeats=repeats or suite.repeats,
                    shard=str(shard) if shard else None, sample_offset=sample_offset, split_task_ids=all_ids)


def prepare(request: EvalRequest) -> EvalPlan:
    """Load and check the skill and the suite split; raises :class:`InputError`."""
    skill = load_skill(request.skill, display=display_path(request.skill))
    suite = load_suite(request.suite, display=display_path(request.suite))
    return make_plan(skill, suite, request.split, request.repeats, request.shard)


def needed_roles(suite: Suite) -> tuple[str, ...]:
    return ("target", "judge") if suite.scorer.get("type") == "llm_judge" else ("target",)


class EvalSession:
    """One cache, one model pool and one event loop for a series of evaluations. Use as a context
    manager; :meth:`check` fails fast (exit 2) on a missing key, model role or price."""

    def __init__(
        self,
        config: Config,
        *,
        cache_mode: str | None = None,
        env: Mapping[str, str] | None = None,
        backend_factory: Callable[[ModelSpec, Mapping[str, str]], Backend] | None = None,
        show_progress: bool = True,
        stream: TextIO | None = None,
        strict: bool = False,
        assume_yes: bool = False,
        estimate_runs: int = 1,
        wait: bool = False,
        batch: bool = False,
    ):
        if batch:  # every rollout's call waits in the batch at once, so the first wave is one batch
            config = replace(config, concurrency=max(config.concurrency, config.batch.max_requests))
        self.config = config
        self.wait = wait
        # Preflight (see check): --strict, --yes, and how many evaluations of the first plan's size
        # the command will make (a gate evaluates base and head), for the cost estimate.
        self.strict, self.assume_yes, self.estimate_runs = strict, assume_yes, estimate_runs
        self._said: set[str] = set()
        self._warned: set[str] = set()  # by message: a training candidate repeats its skill's warnings
        self._estimated = False
        self._evaluated = 0
        self.cache = ResponseCache(config.cache.path, cache_mode or config.cache.mode)
        self.pool = ModelPool(config, self.cache, env=env, backend_factory=backend_factory)
        if batch:
            self.pool.batch = BatchRouter(config.batch, notify=self._say)
        self.show_progress = show_progress
        self.stream = stream
        self._loop = asyncio.new_event_loop()
        self._scorers: dict[Path, Scorer] = {}
        # by suite and environment: one suite may be evaluated under several environments (bench run --env)
        self._environments: dict[tuple[Path, str], BaseEnvironment] = {}

    def __enter__(self) -> EvalSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._loop.run_until_complete(self.pool.aclose())
        finally:
            self._loop.close()
            self.cache.close()

    def scorer(self, suite: Suite) -> Scorer:
        if suite.path not in self._scorers:
            self._scorers[suite.path] = build_scorer(dict(suite.scorer), suite.path, where=f"{scorer_where(suite)}: scorer")
        return self._scorers[suite.path]

    def environment(self, suite: Suite) -> BaseEnvironment:
        key = (suite.path, json.dumps(dict(suite.environment), sort_keys=True, default=str))
        if key not in self._environments:
            environment = build_environment(dict(suite.environment), suite.path,
                                            where=f"{suite.display}/suite.yaml: environment")
            problem = trigger_problem(suite, environment.name, environment.records_consults)
            if problem:
                raise InputError(problem, where=f"{suite.display}/suite.yaml")
            self._environments[key] = environment
        return self._environments[key]

    def check(self, suite: Suite, plan: EvalPlan | None = None, budgets: Budgets | None = None) -> None:
        """Everything that can be checked before spending anything: models, keys, prices; with a
        ``plan``, also its warnings and (once per session) its cost against the budget left."""
        roles = needed_roles(suite)
        for role in roles:
            spec = self.pool.spec(role)
            if price_for(spec.model, self.config.pricing) is None and self.pool.is_local(spec):
                self._say(f"notice: {spec.model!r} has no price and is served on this machine (loopback base URL): "
                          "counted as $0")
        self.pool.check_credentials(*roles)
        if self.pool.batch is not None:
            self._check_batch(suite, roles)
        if plan is not None:
            self._preflight(plan, budgets or self.config.budgets)
        if self.config.budgets.max_dollars is None:
            return
        for role in roles:
            spec = self.pool.spec(role)
            if self.pool.price(spec) is None:
                raise InputError(
                    f"budgets.max_dollars is set but the price of {spec.model!r} is unknown",
                    where=self.config.file,
                    hint=f"add pricing: {{{spec.model}: {{input: …, output: …}}}} in USD per million tokens",
                )

    def _check_batch(self, suite: Suite, roles: tuple[str, ...]) -> None:
        """--batch needs a provider with a batch API and an environment whose calls go through the pool."""
        for role in roles:
            problem = batch_problem(self.pool.spec(role))
            if problem:
                raise InputError(f"--batch: {problem}", where=f"{self.config.file}: models.{role}",
                                 hint="run without --batch")
        environment = self.environment(suite)
        if environment.caches_rollouts:
            raise InputError(f"--batch: the {environment.name} environment's agent calls the model itself, "
                             "so its calls cannot be batched", where=f"{suite.display}/suite.yaml: environment",
                             hint="run without --batch")

    def _say(self, line: str) -> None:
        if line not in self._said:
            self._said.add(line)
            print(line, file=self.stream or sys.stderr, flush=True)

    def _preflight(self, plan: EvalPlan, budgets: Budgets) -> None:
        """Print the plan's warnings (an error under --strict before anything ran), then refuse a
        first evaluation whose estimated cost exceeds the dollars left, unless --yes."""
        problems = [p for p in plan_warnings(plan, self.config.limits) if p.message not in self._warned]
        if problems and self.strict and not self._evaluated:
            raise problems[0].to_error(hint=f"--strict makes warnings errors; {len(problems)} warning(s), "
                                            "run skillopt-ci validate to list them")
        for problem in problems:
            self._warned.add(problem.message)
            self._say(f"warning: {problem}")
        if self._estimated or budgets.max_dollars is None:
            return
        self._estimated = True
        target = self.pool.spec("target")
        judge = self.pool.spec("judge") if "judge" in needed_roles(plan.suite) else None
        wanted = [self.pool.price(s) for s in (target, judge) if s is not None]
        prices = [p for p in wanted if p is not None]
        if len(prices) < len(wanted):
            return  # refused just below with the missing price
        estimate = estimate_plan(plan.skill, plan.suite, plan.tasks, plan.repeats, target_price=prices[0],
                                 judge_price=prices[1] if judge else None, output_tokens=max_output(target),
                                 cached=self._cached_probe(plan, target),
                                 turns=self.environment(plan.suite).max_calls)
        usd = estimate.usd * self.estimate_runs
        left = budgets.max_dollars - self.pool.total_spend().cost_usd
        if usd > left and not self.assume_yes:
            raise InputError(
                f"estimated cost {estimate.describe()}{f' per evaluation, ×{self.estimate_runs}' if self.estimate_runs > 1 else ''}"
                f" exceeds the ${left:,.2f} left of budgets.max_dollars", where=self.config.file,
                hint="pass --yes to run anyway, the budget still stops it; or shrink the skill or the split")

    def _cached_probe(self, plan: EvalPlan, spec: ModelSpec) -> Callable[[Any, str, int], bool]:
        """Whether a chat rollout's answer is already cached (without touching the hit counters)."""
        if not self.cache.readable or not self.environment(plan.suite).is_default:
            return lambda task, prompt, repeat: False  # other environments' calls depend on the episode

        def cached(task: Any, prompt: str, repeat: int) -> bool:
            key = cache_key(spec.provider, spec.model, dict(spec.params), chat_messages(plan.skill, prompt),
                            plan.sample_offset + repeat)
            hits, misses = self.cache.hits, self.cache.misses
            found = self.cache.get(key) is not None
            self.cache.hits, self.cache.misses = hits, misses
            return found

        return cached

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the session's loop (model clients are bound to it). On Ctrl-C the
        coroutine is cancelled and allowed to clean up (close its result log, drop an empty run)."""
        task = self._loop.create_task(coroutine)
        try:
            return self._loop.run_until_complete(task)
        except BaseException:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):  # the first exception is the one to report
                    self._loop.run_until_complete(task)
            raise

    def evaluate(self, plan: EvalPlan, out: Path, *, fresh: bool = False, label: str | None = None,
                 budgets: Budgets | None = None,
                 stop_when: Callable[[Mapping[tuple[str, int], TaskResult]], str | None] | None = None) -> EvalOutcome:
        """Evaluate ``plan`` into the run directory ``out`` (resuming it if it holds this run).
        ``budgets`` default to the config's; ``stop_when`` is passed to the runner."""
        scorer = self.scorer(plan.suite)
        environment = self.environment(plan.suite)
        plan = replace(plan, environment=environment.identity())  # run.json records what ran (a CLI's version)
        self.check(plan.suite, plan, budgets)
        self._evaluated += 1
        run = RunDir(out)
        if self.pool.batch is not None:
            self.pool.batch.use_journal(out / BATCHES)
        progress = Progress(len(plan.tasks) * plan.repeats, label or f"eval {plan.skill.name}/{plan.split}",
                            stream=self.stream, enabled=self.show_progress)
        with RunLock(out, wait=self.wait):
            outcome = self.run(
                evaluate(plan, self.pool, scorer, run, budgets=budgets or self.config.budgets,
                         errors=ErrorPolicy(self.config.max_error_rate, self.config.min_attempts),
                         progress=progress, fresh=fresh, stop_when=stop_when, environment=environment)
            )
            s = outcome.summary
            if self.pool.batch is not None and s.cache_hits < s.n_results:
                # a run answered wholly from the cache sent nothing through a batch: no batch price to note
                outcome = replace(outcome, summary=replace(s, pricing="batch"))
            run.write_text("skill.md", plan.skill.text)
            run.write_json("summary.json", outcome.summary.to_dict())
        return outcome


def run_eval(
    config: Config,
    request: EvalRequest,
    *,
    stream: TextIO | None = None,
    show_progress: bool = True,
    env: Mapping[str, str] | None = None,
    backend_factory: Callable[[ModelSpec, Mapping[str, str]], Backend] | None = None,
) -> EvalOutcome:
    """``skillopt-ci eval``: writes ``results.jsonl``, ``summary.json``, ``report.md``, ``skill.md``."""
    from skillopt_ci.engine.baseline import check_baseline, measure_worth

    with_none = check_baseline(request.baseline)
    plan = prepare(request)
    out = request.out or default_run_dir(config, plan)
    with RunLock(out, wait=request.wait), \
            EvalSession(config, cache_mode=request.cache_mode, env=env, backend_factory=backend_factory,
                        show_progress=show_progress, stream=stream, strict=request.strict,
                        assume_yes=request.assume_yes, estimate_runs=2 if with_none else 1,
                        batch=request.batch) as session:
        outcome = session.evaluate(plan, out, fresh=request.fresh)
        if with_none:
            worth = measure_worth(session, plan, outcome, fresh=request.fresh)
            outcome = replace(outcome, summary=replace(outcome.summary, no_skill=worth.to_dict()))
            RunDir(outcome.run_dir).write_json("summary.json", outcome.summary.to_dict())
        RunDir(outcome.run_dir).write_text(
            "report.md", eval_report(outcome.summary, outcome.results, threshold=request.threshold)
        )
    return outcome


def threshold_verdict(summary: EvalSummary, threshold: float | None) -> tuple[int, str]:
    """Exit code and one line for an eval-only check. Too little data is inconclusive (exit 3),
    never a silent pass. A shard that holds no task of the split passes (exit 0, as the gate's
    and the Action's shard jobs do): its slice is empty, and the merge of the slices judges."""
    if summary.shard and summary.n_tasks == 0:
        return EXIT_OK, (f"shard {summary.shard} holds no task of the {summary.split!r} split: nothing to "
                         "measure here (merge the slices for the verdict)")
    if not summary.complete:
        return EXIT_RUNTIME, f"incomplete: {summary.stopped}; re-run the same command to resume"
    if summary.coverage < MIN_COVERAGE or summary.mean is None:
        return EXIT_RUNTIME, (
            f"inconclusive: only {summary.n_tasks_scored} of {summary.n_tasks} tasks were measured "
            f"({summary.n_errors} errored rollouts)"
        )
    if threshold is None:
        return EXIT_OK, f"score {summary.mean:.3f}"
    if summary.mean < threshold:
        return EXIT_FAILED, f"score {summary.mean:.3f} is below the threshold {threshold:.3f}"
    return EXIT_OK, f"score {summary.mean:.3f} meets the threshold {threshold:.3f}"
