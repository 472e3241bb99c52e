"""Records of an evaluation: one :class:`TaskResult` per task × repeat, one :class:`EvalSummary`,
and the :class:`Usage` (token counts) both carry.

Both are versioned (``schema_version``) and have JSON Schemas in ``skillopt_ci/inputs/schemas/``. An
errored result (provider failure, unparseable judge verdict) is *missing data*: it has no score
and is left out of every mean, never counted as zero.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from statistics import fmean
from typing import Annotated, Any, ClassVar

from skillopt_ci.core import codec
from skillopt_ci.core.stats import mean_ci

RESULT_SCHEMA_VERSION = 1
SUMMARY_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Usage(codec.Record):
    """Token counts. ``None`` means the server did not say (some servers omit usage)."""

    input_tokens: int | None = None
    output_tokens: int | None = None

    def __add__(self, other: Usage) -> Usage:
        def add(a: int | None, b: int | None) -> int | None:
            if a is None and b is None:
                return None
            return (a or 0) + (b or 0)

        return Usage(add(self.input_tokens, other.input_tokens), add(self.output_tokens, other.output_tokens))


@dataclass(frozen=True)
class Consult(codec.Record):
    """Whether an agent rollout consulted the skill under test: when (``step``, an index into its
    steps), how, and whether it read the skill's other files or ran its scripts
    (:mod:`skillopt_ci.core.consult` reads it from the steps)."""

    consulted: bool
    step: Annotated[int | None, codec.OMIT_NONE] = None
    how: Annotated[str, codec.OMIT_EMPTY] = ""
    references: Annotated[bool, codec.OMIT_EMPTY] = False
    scripts: Annotated[bool, codec.OMIT_EMPTY] = False


@dataclass(frozen=True)
class TaskResult(codec.Record):
    """One rollout of one task, scored. ``error`` is ``{"kind", "message"}`` when it failed."""

    JSON_HEAD: ClassVar = {"schema_version": RESULT_SCHEMA_VERSION}

    task_id: str
    repeat: int
    prompt: str = ""
    output: str | None = None
    score: float | None = None
    passed: bool | None = None
    feedback: str = ""
    usage: Usage = field(default_factory=Usage)
    scorer_usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    latency_s: float = 0.0
    cached: bool = False
    finish_reason: str | None = None
    error: dict[str, str] | None = None
    expected: Any = None
    # What environments beyond ``chat`` add (left out of the JSON when empty, so a chat result
    # reads as before): the steps as dicts (see core.trajectory.Step), the environment's reward,
    # the optimizer's bounded rendering, and the workspace files kept in the run directory.
    trajectory: Annotated[list[dict[str, Any]] | None, codec.OMIT_NONE] = None
    reward: Annotated[float | None, codec.OMIT_NONE] = None
    transcript: Annotated[str | None, codec.OMIT_NONE] = None
    files: Annotated[list[str] | None, codec.OMIT_NONE] = None
    consult: Annotated[Consult | None, codec.OMIT_NONE] = None  # agent environments only
    should_trigger: Annotated[bool | None, codec.OMIT_NONE] = None  # a trigger task's (scorers.trigger)

    @property
    def ok(self) -> bool:
        return self.error is None and self.score is not None


@dataclass(frozen=True)
class TaskScore:
    """A task's repeats tallied. ``mean`` and ``pass_rate`` are ``None`` when no repeat produced a
    measurement; ``flaky``: its measured repeats both passed and failed."""

    task_id: str
    mean: float | None
    pass_rate: float | None
    n_valid: int
    n_errors: int
    flaky: bool = False


def by_task(results: Iterable[TaskResult]) -> dict[str, list[TaskResult]]:
    """``results`` grouped by task, tasks and each task's results in the order they come."""
    groups: dict[str, list[TaskResult]] = defaultdict(list)
    for r in results:
        groups[r.task_id].append(r)
    return groups


def task_scores(results: Iterable[TaskResult], task_ids: Sequence[str]) -> list[TaskScore]:
    """The one tally of rollouts by task, in ``task_ids`` order; errored repeats are counted and
    left out of the mean (missing data)."""
    groups = by_task(results)
    out = []
    for tid in task_ids:
        rs = groups.get(tid, [])
        valid = [r for r in rs if r.ok]
        out.append(
            TaskScore(
                task_id=tid,
                mean=fmean(r.score for r in valid) if valid else None,  # type: ignore[misc]  # r.ok: its score is not None
                pass_rate=fmean(1.0 if r.passed else 0.0 for r in valid) if valid else None,
                n_valid=len(valid),
                n_errors=len(rs) - len(valid),
                flaky=len({bool(r.passed) for r in valid}) > 1,
            )
        )
    return out


@dataclass(frozen=True)
class EvalSummary(codec.Record):
    """The headline of one evaluation. ``complete`` is false when the run stopped early
    (budget, abort); ``stopped`` then says why."""

    JSON_HEAD: ClassVar = {"schema_version": SUMMARY_SCHEMA_VERSION, "kind": "eval"}

    skill: dict[str, Any]
    suite: dict[str, Any]
    split: str
    model: dict[str, Any]
    repeats: int
    n_tasks: int
    n_tasks_scored: int
    n_results: int
    n_errors: int
    mean: float | None
    ci95: tuple[float, float] | None
    pass_rate: float | None
    coverage: float
    input_tokens: int
    output_tokens: int
    scorer_input_tokens: int
    scorer_output_tokens: int
    cost_usd: float | None
    spent_usd: float | None
    cache_hits: int
    wall_time_s: float
    complete: bool = True
    stopped: str | None = None
    shard: str | None = None
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    tool_version: str = ""
    missing_tasks: list[str] = field(default_factory=list)  # of a merge whose shards were not all given
    no_skill: Annotated[dict[str, Any] | None, codec.OMIT_NONE] = None  # --baseline none: core.baseline.SkillWorth.to_dict()
    pricing: Annotated[str | None, codec.OMIT_NONE] = None  # "batch": priced at the batch price (eval --batch)
    # Agent environments: of the finished rollouts with the skill installed, how many consulted it.
    consulted: Annotated[Consulted | None, codec.OMIT_NONE] = None
    # Trigger tasks (should_trigger): the confusion counts of "consulted" against "should have".
    trigger: Annotated[TriggerCounts | None, codec.OMIT_NONE] = None


@dataclass(frozen=True)
class Consulted(codec.Record):
    """How often agent rollouts consulted the skill (see :class:`Consult`): over ``rollouts``
    finished rollouts that had it installed, ``consulted`` read it, ``references`` read another of
    its files, ``scripts`` ran one of its files."""

    consulted: int
    rollouts: int
    references: int = 0
    scripts: int = 0

    @property
    def rate(self) -> float | None:
        return self.consulted / self.rollouts if self.rollouts else None

    @staticmethod
    def of(results: Iterable[TaskResult]) -> Consulted | None:
        seen = [r.consult for r in results if r.consult is not None and r.error is None]
        if not seen:
            return None
        return Consulted(sum(c.consulted for c in seen), len(seen), sum(c.references for c in seen),
                         sum(c.scripts for c in seen))


@dataclass(frozen=True)
class TriggerCounts(codec.Record):
    """Trigger tasks' finished rollouts: consulted and should have (``tp``), consulted for a
    request the skill is not for (``fp``), left alone rightly (``tn``), missed (``fn``)."""

    tp: int = 0
    fp: int = 0
    tn: int = 0
    fn: int = 0

    @property
    def rollouts(self) -> int:
        return self.tp + self.fp + self.tn + self.fn

    def rates(self) -> dict[str, tuple[int, int]]:
        """``recall``, ``precision`` and ``accuracy`` as (hits, of how many)."""
        return {"recall": (self.tp, self.tp + self.fn), "precision": (self.tp, self.tp + self.fp),
                "accuracy": (self.tp + self.tn, self.rollouts)}

    @staticmethod
    def of(results: Iterable[TaskResult]) -> TriggerCounts | None:
        pairs = [(r.should_trigger, r.consult.consulted) for r in results
                 if r.should_trigger is not None and r.consult is not None and r.ok]
        if not pairs:
            return None
        return TriggerCounts(tp=sum(s and c for s, c in pairs), fp=sum(c and not s for s, c in pairs),
                             tn=sum(not s and not c for s, c in pairs), fn=sum(s and not c for s, c in pairs))


def error_kinds(results: Iterable[TaskResult]) -> dict[str, int]:
    """How many results errored with each kind, in the order the kinds first appear."""
    return dict(Counter(r.error.get("kind", "error") for r in results if r.error))


def summarize(
    results: Sequence[TaskResult],
    task_ids: Sequence[str],
    *,
    skill: dict[str, Any],
    suite: dict[str, Any],
    split: str,
    model: dict[str, Any],
    repeats: int,
    wall_time_s: float,
    complete: bool = True,
    stopped: str | None = None,
    shard: str | None = None,
    tool_version: str = "",
) -> EvalSummary:
    """Aggregate results into a summary. Pure: the same results give the same summary."""
    scores = task_scores(results, task_ids)
    means = [s.mean for s in scores if s.mean is not None]
    passes = [s.pass_rate for s in scores if s.pass_rate is not None]
    costs = [r.cost_usd for r in results if r.error is None or r.output is not None]
    cost_known = all(c is not None for c in costs)
    spent = [r.cost_usd for r in results if not r.cached and r.output is not None]
    return EvalSummary(
        skill=skill,
        suite=suite,
        split=split,
        model=model,
        repeats=repeats,
        n_tasks=len(task_ids),
        n_tasks_scored=len(means),
        n_results=len(results),
        n_errors=sum(1 for r in results if not r.ok),
        mean=fmean(means) if means else None,
        ci95=mean_ci(means),
        pass_rate=fmean(passes) if passes else None,
        coverage=len(means) / len(task_ids) if task_ids else 0.0,
        input_tokens=sum(r.usage.input_tokens or 0 for r in results),
        output_tokens=sum(r.usage.output_tokens or 0 for r in results),
        scorer_input_tokens=sum(r.scorer_usage.input_tokens or 0 for r in results),
        scorer_output_tokens=sum(r.scorer_usage.output_tokens or 0 for r in results),
        cost_usd=round(sum(c for c in costs if c is not None), 6) if cost_known else None,
        spent_usd=round(sum(c for c in spent if c is not None), 6) if all(c is not None for c in spent) else None,
        cache_hits=sum(1 for r in results if r.cached),
        wall_time_s=round(wall_time_s, 3),
        complete=complete,
        stopped=stopped,
        shard=shard,
        errors_by_kind=error_kinds(results),
        tool_version=tool_version,
        consulted=Consulted.of(results),
        trigger=TriggerCounts.of(results),
    )
