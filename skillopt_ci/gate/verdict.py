"""The gate's records and decisions, pure: one :class:`SkillVerdict` per changed skill, the
:class:`GateReport` that ``gate.json`` holds, and :func:`decide`, which turns both sides' results
into a verdict under the gate policy. No git, no files, no model calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from skillopt_ci import __version__
from skillopt_ci.core.codec import Record
from skillopt_ci.core.compare import ComparePolicy, Comparison, compare_results
from skillopt_ci.core.records import EvalSummary, TaskResult
from skillopt_ci.core.stats import below
from skillopt_ci.core.triggering import compare_triggering
from skillopt_ci.inputs.config import GatePolicy

GATE_SCHEMA_VERSION = 1
MAX_LISTED_TASKS = 10
WORKTREE = "WORKTREE"


@dataclass(frozen=True)
class SkillChange:
    """A configured skill touched by the change. ``status``: modified, added, deleted or
    suite-changed. Paths are relative to the repository root. ``files`` lists the files of a
    skill folder that changed besides ``SKILL.md``, as (path inside the folder, ``added`` |
    ``changed`` | ``deleted``): a folder skill is modified when any of its files is."""

    name: str
    path: str
    suite: str
    status: str
    base_path: str | None = None
    files: tuple[tuple[str, str], ...] = ()

    def files_line(self, limit: int = 10) -> str:
        """``scripts/check.py changed, references/api.md added`` (the first ``limit``), or ''."""
        shown = ", ".join(f"{path} {how}" for path, how in self.files[:limit])
        more = f" and {len(self.files) - limit} more" if len(self.files) > limit else ""
        return shown + more


@dataclass(frozen=True)
class TaskExample(Record):
    """A task whose score dropped, for the report: what went in, what was expected, both answers."""

    task_id: str
    delta: float
    input: Any
    expected: Any
    base_output: str | None
    head_output: str | None


@dataclass
class SkillVerdict(Record):
    change: SkillChange
    verdict: str  # improved | regressed | unchanged | inconclusive | new | deleted
    failed: bool
    reason: str
    task_ids: tuple[str, ...] = ()
    comparison: Comparison | None = None
    base: EvalSummary | None = None
    head: EvalSummary | None = None
    regressed_tasks: list[TaskExample] = field(default_factory=list)
    warnings: tuple[str, ...] = ()  # the head skill's soft Agent Skills deviations

    def _json_out(self, data: dict[str, Any]) -> dict[str, Any]:
        """The change's fields at the top level; its files, when there are any, as objects."""
        change = data.pop("change")
        files = change.pop("files")
        return {**change, **({"files": [{"path": p, "change": how} for p, how in files]} if files else {}), **data}

    @classmethod
    def _json_in(cls, data: dict[str, Any]) -> dict[str, Any]:
        change = {k: data[k] for k in ("name", "path", "suite", "status")}
        change.update(base_path=data.get("base_path"), files=[(f["path"], f["change"]) for f in data.get("files") or ()])
        return {**data, "change": change}


@dataclass
class GateReport(Record):
    JSON_HEAD: ClassVar = {"schema_version": GATE_SCHEMA_VERSION, "kind": "gate"}

    base_ref: str
    head_ref: str
    base_sha: str
    head_sha: str
    merge_base: str
    policy: GatePolicy
    skills: list[SkillVerdict]
    shard: str | None = None
    overridden: bool = False
    mode: str = "gate"  # or "compare": two skill files, refs are their paths, shas their content hashes
    config_hash: str | None = None  # gate/identity.py: what a sharded merge checks its shards against

    @property
    def failed(self) -> bool:
        return any(s.failed for s in self.skills)

    @property
    def verdict(self) -> str:
        """One word for the whole gate: failed, inconclusive, passed, or skipped (nothing to do)."""
        if self.failed:
            return "overridden" if self.overridden else "failed"
        if not any(s.verdict != "deleted" for s in self.skills):
            return "skipped"
        if any(s.verdict == "inconclusive" for s in self.skills):
            return "inconclusive"
        return "passed"

    def _json_out(self, data: dict[str, Any]) -> dict[str, Any]:
        """What the gate decided (``verdict``, ``failed``) and the tool's version, for readers; not read back."""
        keys = ("mode", "base_ref", "head_ref", "base_sha", "head_sha", "merge_base", "policy", "shard", "config_hash")
        return {**{k: data[k] for k in keys}, "verdict": self.verdict, "failed": self.failed,
                "overridden": data["overridden"], "skills": data["skills"], "tool_version": __version__}


def new_skill_verdict(change: SkillChange, head: EvalSummary, policy: GatePolicy,
                      all_ids: tuple[str, ...]) -> SkillVerdict:
    change = SkillChange(change.name, change.path, change.suite, "added")
    if not head.complete or head.coverage < policy.min_coverage:
        # A partial run (a missing shard, a budget) cannot vouch for a new skill's score.
        why = head.stopped or f"only {head.n_tasks_scored} of {head.n_tasks} tasks were measured"
        return SkillVerdict(change, "inconclusive", "inconclusive" in policy.fail_on, f"new skill: {why}", all_ids,
                            head=head)
    failed, reason = _below_minimum(head, policy)
    return SkillVerdict(change, "new", failed, reason or "new skill: evaluated alone", all_ids, head=head)


def _below_minimum(head: EvalSummary, policy: GatePolicy) -> tuple[bool, str | None]:
    if policy.min_score is None or head.mean is None:
        return False, None
    if below(head.mean, policy.min_score):
        return True, f"head score {head.mean:.3f} is below the minimum {policy.min_score:.3f}"
    return False, None


def decide(change: SkillChange, base_results: Sequence[TaskResult], head_results: Sequence[TaskResult],
           task_ids: Sequence[str], policy: GatePolicy, base: EvalSummary, head: EvalSummary,
           all_ids: tuple[str, ...]) -> SkillVerdict:
    """The verdict for one skill from both sides' results. Pure."""
    comparison = compare_results(
        base_results, head_results, task_ids,
        ComparePolicy.from_gate(policy),
    )
    verdict, failed, reason = comparison.verdict, comparison.verdict in policy.fail_on, comparison.reason
    triggering = compare_triggering(base_results, head_results)
    if triggering is not None and triggering.regressed(1 - policy.confidence):
        verdict, failed = "regressed", "regressed" in policy.fail_on
        reason = f"{triggering.reason()}; the score: {reason}"
    low, why = _below_minimum(head, policy)
    if low:
        failed, reason = True, f"{why}; {reason}"
    return SkillVerdict(change, verdict, failed, reason, all_ids, comparison, base, head,
                        regressed_examples(comparison, base_results, head_results))


def regressed_examples(comparison: Comparison, base: Sequence[TaskResult],
                       head: Sequence[TaskResult]) -> list[TaskExample]:
    """The tasks that lost the most, worst first, with one answer from each side."""
    def first_output(results: Sequence[TaskResult], task_id: str) -> tuple[str | None, Any, str]:
        for r in results:
            if r.task_id == task_id and r.ok:
                return r.output, r.expected, r.prompt
        return None, None, ""

    worst = sorted(((t.delta, t) for t in comparison.tasks if t.delta is not None and below(t.delta, 0.0)),
                   key=lambda pair: pair[0])
    examples = []
    for delta, t in worst[:MAX_LISTED_TASKS]:
        base_out, expected, prompt = first_output(base, t.task_id)
        head_out, _, _ = first_output(head, t.task_id)
        examples.append(TaskExample(t.task_id, round(delta, 4), prompt, expected, base_out, head_out))
    return examples
