"""Merging the run directories of ``skillopt-ci gate --shard i/n`` jobs into one gate.

Per skill, each side's eval shards are merged (:func:`skillopt_ci.engine.merge.merge_eval_runs`)
and the verdict is decided again over the whole split, so the merged ``gate.json`` is the one a
single unsharded gate would write. Shards of different changes (refs or skills) are refused.

A skill measured on part of its split (a shard missing, or stopped early) is never passed: its
verdict becomes ``inconclusive`` with a reason that names the missing shard and tasks, even when the
tasks that are there would cover enough for a decision. A regression found on the tasks that are
there still counts (its reason says the run is incomplete), so a lost shard cannot hide it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.records import EvalSummary
from skillopt_ci.engine.merge import check_shards, merge_eval_runs, read_json
from skillopt_ci.engine.rundir import write_json_atomic
from skillopt_ci.gate.verdict import GateReport, SkillVerdict, decide, new_skill_verdict


def merge_gate_runs(dirs: Sequence[Path], out: Path) -> GateReport:
    """Join gate shards: per skill, union both sides' results and decide over the whole split."""
    reports = [GateReport.from_dict(read_json(d / "gate.json")) for d in dirs]
    first = reports[0]
    for d, r in zip(dirs, reports, strict=True):
        if (r.base_sha, r.head_sha, [s.change.name for s in r.skills]) != (
            first.base_sha, first.head_sha, [s.change.name for s in first.skills]
        ):
            raise InputError("shard gates a different change (refs or skills differ)", where=str(d))
    check_shards(dirs, [r.shard for r in reports])
    merged: list[SkillVerdict] = []
    for skill in first.skills:
        name = skill.change.name
        if skill.verdict == "deleted":
            merged.append(skill)
            continue
        head_summary, head_results = merge_eval_runs([d / name / "head" for d in dirs], out / name / "head",
                                                     skill.task_ids)
        if skill.verdict == "new" or skill.change.status == "added":
            verdict = new_skill_verdict(skill.change, head_summary, first.policy, skill.task_ids)
        else:
            base_summary, base_results = merge_eval_runs([d / name / "base" for d in dirs], out / name / "base",
                                                         skill.task_ids)
            verdict = decide(skill.change, base_results, head_results, list(skill.task_ids), first.policy,
                             base_summary, head_summary, skill.task_ids)
        merged.append(_incomplete(replace(verdict, warnings=skill.warnings), first.policy.fail_on))
    report = GateReport(first.base_ref, first.head_ref, first.base_sha, first.head_sha, first.merge_base,
                        first.policy, merged, shard=None, mode=first.mode)
    write_json_atomic(out / "gate.json", report.to_dict())
    return report


def _incomplete_text(summary: EvalSummary) -> str:
    listed = summary.missing_tasks[:10]
    more = len(summary.missing_tasks) - len(listed)
    tasks = f"; no results for {', '.join(listed)}" + (f" and {more} more" if more else "") if listed else ""
    return f"incomplete: {summary.stopped or 'a shard did not finish'}{tasks}"


def _incomplete(verdict: SkillVerdict, fail_on: Sequence[str]) -> SkillVerdict:
    sides = [s for s in (verdict.base, verdict.head) if s is not None and not s.complete]
    if not sides or verdict.verdict == "deleted":
        return verdict
    why = _incomplete_text(max(sides, key=lambda s: len(s.missing_tasks)))
    if verdict.verdict == "regressed":
        return replace(verdict, reason=f"{verdict.reason}; {why}")
    return replace(verdict, verdict="inconclusive", failed="inconclusive" in fail_on, reason=why)


def incomplete_note(report: GateReport) -> str | None:
    """Why a merged gate is incomplete (the first skill's missing shard), or None when every
    side of every skill was measured on its whole split."""
    for skill in report.skills:
        for side in (skill.base, skill.head):
            if side is not None and not side.complete:
                return side.stopped or "a shard did not finish"
    return None
