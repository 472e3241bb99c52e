"""Merging the run directories of ``skillopt-ci gate --shard i/n`` jobs into one gate.

Per skill, each side's eval shards are merged (:func:`skillopt_ci.engine.merge.merge_eval_runs`)
and the verdict is decided again over the whole split, so the merged ``gate.json`` is the one a
single unsharded gate would write. Shards of different changes (refs or skills) are refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from skillopt_ci.core.errors import InputError
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
        merged.append(replace(verdict, warnings=skill.warnings))
    report = GateReport(first.base_ref, first.head_ref, first.base_sha, first.head_sha, first.merge_base,
                        first.policy, merged, shard=None, mode=first.mode)
    write_json_atomic(out / "gate.json", report.to_dict())
    return report
