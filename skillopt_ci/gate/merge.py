"""Merging the run directories of ``skillopt-ci gate --shard i/n`` jobs into one gate.

Per skill, each side's eval shards are merged (:func:`skillopt_ci.engine.merge.merge_eval_runs`)
and the verdict is decided again over the whole split, so the merged ``gate.json`` is the one a
single unsharded gate would write. Shards of different changes (refs or skills) are refused.

A skill measured on part of its split (a shard missing, or stopped early) is never passed: its
verdict becomes ``inconclusive`` with a reason that names the missing shard and tasks, even when the
tasks that are there would cover enough for a decision. A regression found on the tasks that are
there still counts (its reason says the run is incomplete), so a lost shard cannot hide it.

With a :class:`MergeJudge` (the Action's merge job, and ``merge`` given the project's config)
the verdicts are decided under the judge's own policy, split and suites, never under what a
shard's ``gate.json`` says: a shard whose ``config_hash`` or (per skill and side) suite hash is
not the judge's is refused (:class:`InputError`, exit 2, naming the shard), and so is a shard
of a skill the judge's config does not have. Without one, the shards must agree on the policy
among themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.records import EvalSummary
from skillopt_ci.engine.merge import check_shards, merge_eval_runs, read_json
from skillopt_ci.engine.rundir import write_json_atomic
from skillopt_ci.gate.identity import config_hash
from skillopt_ci.gate.verdict import GateReport, SkillVerdict, decide, new_skill_verdict
from skillopt_ci.inputs.config import Config, GatePolicy
from skillopt_ci.inputs.suite import load_suite


@dataclass(frozen=True)
class MergeJudge:
    """What the merging job knows for itself: its gate policy, its config's hash
    (:func:`skillopt_ci.gate.identity.config_hash`) and, per configured skill name, its suite's
    hash and the task ids of the policy's split."""

    policy: GatePolicy
    config_hash: str
    suites: Mapping[str, tuple[str, tuple[str, ...]]]


def judge_for(config: Config, names: Iterable[str | None]) -> MergeJudge:
    """The judge a job with ``config`` is: its own policy and config hash, and the suites (hash,
    the split's task ids) of those of ``names`` it configures; a name it does not configure is
    left out, so a shard gating it is refused."""
    wanted = set(names)
    suites = {}
    for entry in config.skills:
        if entry.name in wanted:
            suite = load_suite(entry.suite, display=entry.name)
            suites[entry.name] = (suite.hash, tuple(task.id for task in suite.tasks(config.gate.split)))
    return MergeJudge(config.gate, config_hash(config), suites)


def merge_gate_runs(dirs: Sequence[Path], out: Path, judge: MergeJudge | None = None) -> GateReport:
    """Join gate shards: per skill, union both sides' results and decide over the whole split,
    under ``judge``'s policy when given (see the module docstring)."""
    reports = [GateReport.from_dict(read_json(d / "gate.json")) for d in dirs]
    first = reports[0]
    for d, r in zip(dirs, reports, strict=True):
        if (r.base_sha, r.head_sha, [s.change.name for s in r.skills]) != (
            first.base_sha, first.head_sha, [s.change.name for s in first.skills]
        ):
            raise InputError("shard gates a different change (refs or skills differ)", where=str(d))
        if judge is None and r.policy != first.policy:
            raise InputError(f"shard's gate policy differs from {dirs[0]}'s", where=str(d / "gate.json"),
                             hint="merge the shards of one gate run")
    check_shards(dirs, [r.shard for r in reports])
    if judge is not None:
        _check_identity(judge, dirs, reports)
    policy = judge.policy if judge is not None else first.policy
    merged: list[SkillVerdict] = []
    for skill in first.skills:
        name = skill.change.name
        if skill.verdict == "deleted":
            merged.append(skill)
            continue
        task_ids = judge.suites[name][1] if judge is not None else skill.task_ids
        head_summary, head_results = merge_eval_runs([d / name / "head" for d in dirs], out / name / "head",
                                                     task_ids)
        if skill.verdict == "new" or skill.change.status == "added":
            verdict = new_skill_verdict(skill.change, head_summary, policy, task_ids)
        else:
            base_summary, base_results = merge_eval_runs([d / name / "base" for d in dirs], out / name / "base",
                                                         task_ids)
            verdict = decide(skill.change, base_results, head_results, list(task_ids), policy,
                             base_summary, head_summary, task_ids)
        merged.append(_incomplete(replace(verdict, warnings=skill.warnings), policy.fail_on))
    report = GateReport(first.base_ref, first.head_ref, first.base_sha, first.head_sha, first.merge_base,
                        policy, merged, shard=None, mode=first.mode,
                        config_hash=judge.config_hash if judge is not None else first.config_hash)
    write_json_atomic(out / "gate.json", report.to_dict())
    return report


def _check_identity(judge: MergeJudge, dirs: Sequence[Path], reports: Sequence[GateReport]) -> None:
    """Refuse a shard measured under another configuration or suite than the judge's."""
    for d, report in zip(dirs, reports, strict=True):
        if report.config_hash != judge.config_hash:
            raise InputError(f"shard ran with another configuration (config hash {str(report.config_hash)[:12]}, "
                             f"this job's is {judge.config_hash[:12]})", where=str(d / "gate.json"),
                             hint="merge only the shards of this workflow run, made from this commit's config")
        for skill in report.skills:
            if skill.verdict == "deleted":
                continue
            if skill.change.name not in judge.suites:
                raise InputError(f"shard gates the skill {skill.change.name!r}, which this job's config does not have",
                                 where=str(d / "gate.json"), hint="merge only this workflow run's shards")
            want = judge.suites[skill.change.name][0]
            for side in ("head", "base"):
                manifest = d / skill.change.name / side / "run.json"
                if manifest.is_file() and read_json(manifest).get("suite_hash") != want:
                    raise InputError(f"shard measured {skill.change.name!r} on another version of its suite "
                                     f"(suite hash {str(read_json(manifest).get('suite_hash'))[:12]}, this job's is "
                                     f"{want[:12]})", where=str(manifest), hint="merge only this workflow run's shards")


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
