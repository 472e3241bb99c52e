"""``skillopt-ci merge``: join the run directories of ``--shard i/n`` jobs into one report.

The merged report is the one a single run over all tasks would give: results are unioned, and
every statistic (means, intervals, the paired bootstrap with its seed) is recomputed over the
whole split in the suite's task order. Shards must come from the same run (same skills, suite,
split, repeats and model); anything else is refused.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skillopt_ci.errors import InputError
from skillopt_ci.gate import GateReport, SkillVerdict, decide, new_skill_verdict
from skillopt_ci.records import EvalSummary, TaskResult, summarize
from skillopt_ci.rundir import MANIFEST, RunDir, run_kind, write_json_atomic

IDENTITY = ("kind", "skill_hash", "suite_hash", "split", "repeats", "model")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("missing", where=str(path), hint="is this a finished shard run directory?") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", where=f"{path}:{exc.lineno}") from None


def kind_of(directory: Path) -> str:
    """``gate`` or ``eval``: the kinds of run a shard can be."""
    kind = run_kind(directory)
    if kind not in ("gate", "eval"):
        raise InputError("not the run directory of an eval or gate shard (no gate.json, or run.json of an eval)",
                         where=str(directory))
    return kind


def merge_eval_runs(dirs: Sequence[Path], out: Path) -> tuple[EvalSummary, list[TaskResult]]:
    """Union the results of eval shards into ``out`` and summarize them as one run."""
    manifests = [_read_json(d / MANIFEST) for d in dirs]
    first = manifests[0]
    for d, m in zip(dirs, manifests, strict=True):
        differ = [k for k in IDENTITY if m.get(k) != first.get(k)]
        if differ:
            raise InputError(f"shard is from a different run ({', '.join(differ)} differ from {dirs[0]})", where=str(d))
    summaries = [EvalSummary.from_dict(_read_json(d / "summary.json")) for d in dirs]
    results = _union_results(dirs)
    task_ids = _ordered_ids([m["task_ids"] for m in manifests])
    ref = summaries[0]
    summary = summarize(
        results, task_ids, skill=ref.skill, suite=ref.suite, split=ref.split, model=ref.model, repeats=ref.repeats,
        wall_time_s=sum(s.wall_time_s for s in summaries), complete=all(s.complete for s in summaries),
        stopped=next((s.stopped for s in summaries if s.stopped), None), tool_version=ref.tool_version,
    )
    manifest = {**{k: first.get(k) for k in IDENTITY}, "shard": None, "task_ids": task_ids}
    run = RunDir(out)
    run.open(manifest, fresh=True)
    run.append_results(results)
    shutil.copyfile(dirs[0] / "skill.md", out / "skill.md")
    run.write_json("summary.json", summary.to_dict())
    return summary, results


def _union_results(dirs: Sequence[Path]) -> list[TaskResult]:
    seen: dict[tuple[str, int], TaskResult] = {}
    for d in dirs:
        for r in RunDir(d).load_results():
            key = (r.task_id, r.repeat)
            if key in seen and seen[key].ok and r.ok and seen[key] != r:
                raise InputError(f"task {r.task_id!r} repeat {r.repeat} appears in two shards", where=str(d))
            if key not in seen or r.ok:
                seen[key] = r
    return list(seen.values())


def _ordered_ids(id_lists: Sequence[Sequence[str]]) -> list[str]:
    return list(dict.fromkeys(i for chunk in id_lists for i in chunk))


def merge_gate_runs(dirs: Sequence[Path], out: Path) -> GateReport:
    """Join gate shards: per skill, union both sides' results and decide over the whole split."""
    reports = [GateReport.from_dict(_read_json(d / "gate.json")) for d in dirs]
    first = reports[0]
    for d, r in zip(dirs, reports, strict=True):
        if (r.base_sha, r.head_sha, [s.change.name for s in r.skills]) != (
            first.base_sha, first.head_sha, [s.change.name for s in first.skills]
        ):
            raise InputError("shard gates a different change (refs or skills differ)", where=str(d))
    merged: list[SkillVerdict] = []
    for skill in first.skills:
        name = skill.change.name
        if skill.verdict == "deleted":
            merged.append(skill)
            continue
        head_summary, head_results = merge_eval_runs([d / name / "head" for d in dirs], out / name / "head")
        if skill.verdict == "new":
            merged.append(new_skill_verdict(skill.change, head_summary, first.policy, skill.task_ids))
            continue
        base_summary, base_results = merge_eval_runs([d / name / "base" for d in dirs], out / name / "base")
        merged.append(decide(skill.change, base_results, head_results, list(skill.task_ids), first.policy,
                             base_summary, head_summary, skill.task_ids))
    report = GateReport(first.base_ref, first.head_ref, first.base_sha, first.head_sha, first.merge_base,
                        first.policy, merged, shard=None, mode=first.mode)
    write_json_atomic(out / "gate.json", report.to_dict())
    return report
