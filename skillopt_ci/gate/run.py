"""The pull-request gate: which skills changed, base vs head on the same held-out tasks, verdicts.

- Changed skills are found with real ``git`` between the merge base of the two refs and the head:
  a skill whose file changed, or whose suite directory changed. A skill added at head is
  evaluated alone (against ``gate.min_score`` if set); a skill deleted at head is reported only.
- The base version is read with ``git show``, never checked out. The head version is read the same
  way when ``--head`` is given, else from the working tree (so local edits can be gated).
- Both sides run on the checked-out suite (the same tasks, the same repeats), through one cache:
  when only the head changed, the base side is answered from the cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from skillopt_ci import __version__
from skillopt_ci.core.compare import ComparePolicy, Comparison, compare_results
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.records import EvalSummary, TaskResult
from skillopt_ci.core.shard import Shard
from skillopt_ci.core.skill import Skill, parse_skill
from skillopt_ci.core.stats import below
from skillopt_ci.engine.evaluation import EvalSession, make_plan
from skillopt_ci.engine.rundir import write_json_atomic
from skillopt_ci.gate.git import Git
from skillopt_ci.inputs.config import Config, GatePolicy
from skillopt_ci.inputs.suite import load_suite

GATE_SCHEMA_VERSION = 1
MAX_LISTED_TASKS = 10
WORKTREE = "WORKTREE"


@dataclass(frozen=True)
class SkillChange:
    """A configured skill touched by the change. ``status``: modified, added, deleted or
    suite-changed. Paths are relative to the repository root."""

    name: str
    path: str
    suite: str
    status: str
    base_path: str | None = None


@dataclass(frozen=True)
class TaskExample:
    """A task whose score dropped, for the report: what went in, what was expected, both answers."""

    task_id: str
    delta: float
    input: Any
    expected: Any
    base_output: str | None
    head_output: str | None


@dataclass
class SkillVerdict:
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.change.name,
            "path": self.change.path,
            "suite": self.change.suite,
            "status": self.change.status,
            "base_path": self.change.base_path,
            "verdict": self.verdict,
            "failed": self.failed,
            "reason": self.reason,
            "task_ids": list(self.task_ids),
            "comparison": self.comparison.to_dict() if self.comparison else None,
            "base": self.base.to_dict() if self.base else None,
            "head": self.head.to_dict() if self.head else None,
            "regressed_tasks": [vars(t) for t in self.regressed_tasks],
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SkillVerdict:
        change = SkillChange(data["name"], data["path"], data["suite"], data["status"], data.get("base_path"))
        return cls(
            change=change,
            verdict=data["verdict"],
            failed=data["failed"],
            reason=data["reason"],
            task_ids=tuple(data.get("task_ids") or ()),
            comparison=Comparison.from_dict(data["comparison"]) if data.get("comparison") else None,
            base=EvalSummary.from_dict(data["base"]) if data.get("base") else None,
            head=EvalSummary.from_dict(data["head"]) if data.get("head") else None,
            regressed_tasks=[TaskExample(**t) for t in data.get("regressed_tasks") or []],
            warnings=tuple(data.get("warnings") or ()),
        )


@dataclass
class GateReport:
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": GATE_SCHEMA_VERSION,
            "kind": "gate",
            "mode": self.mode,
            "base_ref": self.base_ref,
            "head_ref": self.head_ref,
            "base_sha": self.base_sha,
            "head_sha": self.head_sha,
            "merge_base": self.merge_base,
            "policy": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(self.policy).items()},
            "shard": self.shard,
            "verdict": self.verdict,
            "failed": self.failed,
            "overridden": self.overridden,
            "skills": [s.to_dict() for s in self.skills],
            "tool_version": __version__,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GateReport:
        return cls(
            base_ref=data["base_ref"],
            head_ref=data["head_ref"],
            base_sha=data["base_sha"],
            head_sha=data["head_sha"],
            merge_base=data["merge_base"],
            policy=GatePolicy.from_dict(data["policy"]),
            skills=[SkillVerdict.from_dict(s) for s in data["skills"]],
            shard=data.get("shard"),
            overridden=data.get("overridden", False),
            mode=data.get("mode", "gate"),
        )


def find_changes(git: Git, config: Config, base: str, head: str | None) -> list[SkillChange]:
    """Configured skills whose file or suite changed between ``base`` and ``head`` (the working
    tree when ``head`` is None), plus skills configured at ``base`` whose file was deleted."""
    top = git.top_level().resolve()
    changes = git.changed_files(base, head) if head else git.worktree_changes(base)
    by_path = {c.path: c for c in changes}
    found: list[SkillChange] = []
    for entry in config.skills:
        path = _relative(entry.path, top)
        suite = _relative(entry.suite, top)
        change = by_path.get(path)
        if change is not None and change.status == "A":
            found.append(SkillChange(entry.name, path, suite, "added"))
        elif change is not None and change.status in "MTRC":
            found.append(SkillChange(entry.name, path, suite, "modified", change.old_path or path))
        elif any(c.path.startswith(suite + "/") or (c.old_path or "").startswith(suite + "/") for c in changes):
            found.append(SkillChange(entry.name, path, suite, "suite-changed", path))
    listed = {c.path for c in found}
    for name, path, suite in _skills_at(git, base, _relative(config.root, top)):
        if path not in listed and path in by_path and by_path[path].status == "D":
            found.append(SkillChange(name, path, suite, "deleted", path))
    return found


def _relative(path: Path, top: Path) -> str:
    try:
        return path.resolve().relative_to(top).as_posix()
    except ValueError:
        raise InputError(f"{path} is outside the git repository {top}") from None


def _skills_at(git: Git, ref: str, config_dir: str) -> list[tuple[str, str, str]]:
    """(name, path, suite) of the skills the config listed at ``ref``, read without validation."""
    prefix = "" if config_dir in ("", ".") else config_dir + "/"
    text = git.show(ref, f"{prefix}skillopt.yml")
    try:
        data = yaml.safe_load(text) if text else None
    except yaml.YAMLError:
        return []
    out = []
    for item in (data or {}).get("skills") or []:
        if isinstance(item, dict) and isinstance(item.get("path"), str):
            path = Path(prefix + item["path"]).as_posix()
            default = Path(path).parent.name if Path(path).name == "SKILL.md" else Path(path).stem
            out.append((str(item.get("name") or default), path, prefix + str(item.get("suite", ""))))
    return out


def resolve_changes(config: Config, git: Git, base_ref: str, head_ref: str | None,
                    only: Sequence[str] = ()) -> tuple[str, str, str, list[SkillChange]]:
    """(base sha, head sha, merge base, changed skills) — cheap: git only, no model call."""
    base_sha = git.resolve(base_ref)
    head_sha = git.resolve(head_ref) if head_ref else git.resolve("HEAD")
    merge_base = git.merge_base(base_sha, head_sha)
    changes = find_changes(git, config, merge_base, head_sha if head_ref else None)
    if only:
        unknown = sorted(set(only) - {c.name for c in config.skills})
        if unknown:
            raise InputError(f"no configured skill named {', '.join(unknown)}",
                             hint=f"configured: {', '.join(c.name for c in config.skills)}")
        changes = [c for c in changes if c.name in only]
    return base_sha, head_sha, merge_base, changes


def run_gate(
    config: Config,
    git: Git,
    session: EvalSession,
    out: Path,
    *,
    base_ref: str,
    head_ref: str | None = None,
    shard: Shard | None = None,
    only: Sequence[str] = (),
    fresh: bool = False,
) -> GateReport:
    """Evaluate every changed skill on both sides and decide. Writes ``gate.json`` into ``out``
    (with one eval run directory per skill and side under it) and returns the report."""
    policy = config.gate
    base_sha, head_sha, merge_base, changes = resolve_changes(config, git, base_ref, head_ref, only)
    top = git.top_level()
    verdicts = []
    for change in changes:
        verdicts.append(_gate_skill(config, git, session, out, change, policy, top, merge_base,
                                    head_sha if head_ref else None, shard, fresh))
    report = GateReport(base_ref=base_ref, head_ref=head_ref or WORKTREE, base_sha=base_sha, head_sha=head_sha,
                        merge_base=merge_base, policy=policy, skills=verdicts, shard=str(shard) if shard else None)
    write_json_atomic(out / "gate.json", report.to_dict())
    return report


def _gate_skill(config: Config, git: Git, session: EvalSession, out: Path, change: SkillChange, policy: GatePolicy,
                top: Path, base: str, head: str | None, shard: Shard | None, fresh: bool = False) -> SkillVerdict:
    """One changed skill, with the head skill's soft spec deviations attached as warnings."""
    verdict, head_skill = _judge_skill(config, git, session, out, change, policy, top, base, head, shard, fresh)
    return replace(verdict, warnings=head_skill.warnings) if head_skill is not None else verdict


def _judge_skill(config: Config, git: Git, session: EvalSession, out: Path, change: SkillChange,
                 policy: GatePolicy, top: Path, base: str, head: str | None, shard: Shard | None,
                 fresh: bool) -> tuple[SkillVerdict, Skill | None]:
    if change.status == "deleted":
        return SkillVerdict(change, "deleted", False, "skill file deleted; nothing to evaluate"), None
    head_text = git.show(head, change.path) if head else (top / change.path).read_text(encoding="utf-8")
    if head_text is None:
        raise InputError(f"skill {change.path!r} does not exist at {head[:12]}")
    head_skill = parse_skill(head_text, path=change.path)
    suite = load_suite(top / change.suite, display=change.suite)
    plan = make_plan(head_skill, suite, policy.split, policy.repeats, shard)
    all_ids = tuple(t.id for t in suite.tasks(policy.split))
    head_run = session.evaluate(plan, out / change.name / "head", fresh=fresh, label=f"gate {change.name} head")
    base_text = git.show(base, change.base_path) if change.base_path else None
    if base_text is None:
        return new_skill_verdict(change, head_run.summary, policy, all_ids), head_skill
    base_skill = parse_skill(base_text, path=f"{base[:12]}:{change.base_path}")
    base_plan = make_plan(base_skill, suite, policy.split, policy.repeats, shard)
    base_run = session.evaluate(base_plan, out / change.name / "base", fresh=fresh,
                                label=f"gate {change.name} base")
    return decide(change, base_run.results, head_run.results, [t.id for t in plan.tasks], policy,
                  base_run.summary, head_run.summary, all_ids), head_skill


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
    failed = comparison.verdict in policy.fail_on
    reason = comparison.reason
    low, why = _below_minimum(head, policy)
    if low:
        failed, reason = True, f"{why}; {reason}"
    return SkillVerdict(change, comparison.verdict, failed, reason, all_ids, comparison, base, head,
                        regressed_examples(comparison, base_results, head_results))


def regressed_examples(comparison: Comparison, base: Sequence[TaskResult],
                       head: Sequence[TaskResult]) -> list[TaskExample]:
    """The tasks that lost the most, worst first, with one answer from each side."""
    def first_output(results: Sequence[TaskResult], task_id: str) -> tuple[str | None, Any, str]:
        for r in results:
            if r.task_id == task_id and r.ok:
                return r.output, r.expected, r.prompt
        return None, None, ""

    worst = sorted((t for t in comparison.tasks if t.delta is not None and below(t.delta, 0.0)), key=lambda t: t.delta)
    examples = []
    for t in worst[:MAX_LISTED_TASKS]:
        base_out, expected, prompt = first_output(base, t.task_id)
        head_out, _, _ = first_output(head, t.task_id)
        examples.append(TaskExample(t.task_id, round(t.delta, 4), prompt, expected, base_out, head_out))
    return examples


def run_compare(config: Config, session: EvalSession, base_path: Path, head_path: Path, suite_path: Path,
                out: Path, *, shard: Shard | None = None, fresh: bool = False) -> GateReport:
    """``skillopt-ci compare``: the gate's paired comparison for two skill files."""
    from skillopt_ci.core.names import slug
    from skillopt_ci.core.paths import display_path
    from skillopt_ci.core.skill import load_skill

    policy = config.gate
    base_skill = load_skill(base_path, display=display_path(base_path))
    head_skill = load_skill(head_path, display=display_path(head_path))
    suite = load_suite(suite_path, display=display_path(suite_path))
    head_plan = make_plan(head_skill, suite, policy.split, policy.repeats, shard)
    base_plan = make_plan(base_skill, suite, policy.split, policy.repeats, shard)
    all_ids = tuple(t.id for t in suite.tasks(policy.split))
    name = slug(head_skill.name)  # a file's stem may be anything; it names a directory here
    head_run = session.evaluate(head_plan, out / name / "head", fresh=fresh, label=f"compare {name} head")
    base_run = session.evaluate(base_plan, out / name / "base", fresh=fresh, label=f"compare {name} base")
    change = SkillChange(name, display_path(head_path), suite.display, "modified", display_path(base_path))
    verdict = replace(decide(change, base_run.results, head_run.results, [t.id for t in head_plan.tasks], policy,
                             base_run.summary, head_run.summary, all_ids), warnings=head_skill.warnings)
    report = GateReport(base_ref=display_path(base_path), head_ref=display_path(head_path), base_sha=base_skill.hash,
                        head_sha=head_skill.hash, merge_base=base_skill.hash, policy=policy, skills=[verdict],
                        shard=str(shard) if shard else None, mode="compare")
    write_json_atomic(out / "gate.json", report.to_dict())
    return report


def default_base_ref(git: Git) -> str:
    """The branch a change is usually compared with: origin/HEAD, origin/main, main, master."""
    git.top_level()  # outside a repository, say so rather than "no default base branch"
    for ref in ("origin/HEAD", "origin/main", "origin/master", "main", "master"):
        try:
            git.resolve(ref)
            return ref
        except InputError:
            continue
    raise InputError("no default base branch found", hint="pass --base REF")
