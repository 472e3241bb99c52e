"""The pull-request gate: which skills changed, base vs head on the same held-out tasks, verdicts.

- Changed skills are found with real ``git`` between the merge base of the two refs and the head:
  a skill whose file changed, or whose suite directory changed. A skill added at head is
  evaluated alone (against ``gate.min_score`` if set); a skill deleted at head is reported only.
- The base version is read with ``git show``, never checked out. The head version is read the same
  way when ``--head`` is given, else from the working tree (so local edits can be gated). A
  folder skill's files at a ref are written to a temporary folder for the evaluation, so each
  side runs with its own ``scripts/`` and ``references/``.
- Both sides run on the checked-out suite (the same tasks, the same repeats), through one cache:
  when only the head changed, the base side is answered from the cache.

Changed skills come from :mod:`skillopt_ci.gate.changes`, verdicts from
:mod:`skillopt_ci.gate.verdict`; this module runs the evaluations in between and writes
``gate.json``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.shard import Shard
from skillopt_ci.core.skill import SKILL_FILE, Skill, load_skill, parse_skill
from skillopt_ci.engine.evaluation import EvalSession, make_plan
from skillopt_ci.engine.rundir import write_json_atomic
from skillopt_ci.engine.runner import EvalOutcome, EvalPlan
from skillopt_ci.gate.changes import resolve_changes
from skillopt_ci.gate.git import Git
from skillopt_ci.gate.identity import config_hash
from skillopt_ci.gate.verdict import (
    WORKTREE,
    GateReport,
    SkillChange,
    SkillVerdict,
    decide,
    new_skill_verdict,
)
from skillopt_ci.inputs.config import Config, GatePolicy
from skillopt_ci.inputs.suite import load_suite


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
    baseline: bool = False,
) -> GateReport:
    """Evaluate every changed skill on both sides and decide. Writes ``gate.json`` into ``out``
    (with one eval run directory per skill and side under it) and returns the report."""
    policy = config.gate
    base_sha, head_sha, merge_base, changes = resolve_changes(config, git, base_ref, head_ref, only)
    top = git.top_level()
    verdicts = [_gate_skill(config, git, session, out, change, policy, top, merge_base,
                            head_sha if head_ref else None, shard, fresh, baseline) for change in changes]
    report = GateReport(base_ref=base_ref, head_ref=head_ref or WORKTREE, base_sha=base_sha, head_sha=head_sha,
                        merge_base=merge_base, policy=policy, skills=verdicts, shard=str(shard) if shard else None,
                        config_hash=config_hash(config))
    write_json_atomic(out / "gate.json", report.to_dict())
    return report


def _gate_skill(config: Config, git: Git, session: EvalSession, out: Path, change: SkillChange, policy: GatePolicy,
                top: Path, base: str, head: str | None, shard: Shard | None, fresh: bool = False,
                baseline: bool = False) -> SkillVerdict:
    """One changed skill, with the head skill's soft spec deviations attached as warnings."""
    if change.status == "deleted":
        return SkillVerdict(change, "deleted", False, "skill file deleted; nothing to evaluate")
    with tempfile.TemporaryDirectory(prefix="skillopt-gate-") as scratch:
        head_skill = skill_at(git, top, head, change.path, change.path, Path(scratch) / "head")
        if head_skill is None:
            raise InputError(f"skill {change.path!r} does not exist at {(head or '')[:12]}")
        suite = load_suite(top / change.suite, display=change.suite)
        plan = make_plan(head_skill, suite, policy.split, policy.repeats, shard)
        all_ids = tuple(t.id for t in suite.tasks(policy.split))
        head_run = session.evaluate(plan, out / change.name / "head", fresh=fresh, label=f"gate {change.name} head")
        if baseline:
            head_run = with_no_skill(session, plan, head_run, out / change.name / "no-skill", fresh, policy)
        base_skill = skill_at(git, top, base, change.base_path, f"{base[:12]}:{change.base_path}",
                              Path(scratch) / "base") if change.base_path else None
        if base_skill is None:
            return replace(new_skill_verdict(change, head_run.summary, policy, all_ids), warnings=head_skill.warnings)
        base_plan = make_plan(base_skill, suite, policy.split, policy.repeats, shard)
        base_run = session.evaluate(base_plan, out / change.name / "base", fresh=fresh,
                                    label=f"gate {change.name} base")
    return replace(decide(change, base_run.results, head_run.results, [t.id for t in plan.tasks], policy,
                          base_run.summary, head_run.summary, all_ids), warnings=head_skill.warnings)


def with_no_skill(session: EvalSession, plan: EvalPlan, run: EvalOutcome, out: Path, fresh: bool,
                  policy: GatePolicy) -> EvalOutcome:
    """``--baseline none``: ``run`` with what its skill adds over no skill on its summary."""
    from skillopt_ci.core.compare import ComparePolicy
    from skillopt_ci.core.skill import NO_SKILL_NAME
    from skillopt_ci.engine.baseline import measure_worth

    worth = measure_worth(session, plan, run, fresh=fresh, out=out, policy=ComparePolicy.from_gate(policy),
                          label=f"{NO_SKILL_NAME} ({plan.skill.name})")
    return replace(run, summary=replace(run.summary, no_skill=worth.to_dict()))


def skill_at(git: Git, top: Path, ref: str | None, path: str, shown: str, scratch: Path) -> Skill | None:
    """The skill at ``path`` (relative to the repository) as of ``ref``, or from the working tree
    when ``ref`` is None; ``None`` when it does not exist at ``ref``. A ``SKILL.md``'s folder at a
    ref is written into ``scratch`` (which must outlive the evaluation), so the skill's resources,
    its hash and what an environment installs are that ref's, never the working tree's."""
    if ref is None:
        return load_skill(top / path, display=shown)
    text = git.show(ref, path)
    if text is None:
        return None
    if Path(path).name != SKILL_FILE:
        return parse_skill(text, path=shown)
    scratch.mkdir(parents=True, exist_ok=True)
    git.export(ref, Path(path).parent.as_posix(), scratch)
    exported = load_skill(scratch / SKILL_FILE, display=shown)
    # The text as git shows it, so a lone SKILL.md reads exactly as it always has.
    return exported.with_text(text) if exported.text != text else exported


def run_compare(config: Config, session: EvalSession, base_path: Path, head_path: Path, suite_path: Path,
                out: Path, *, shard: Shard | None = None, fresh: bool = False, baseline: bool = False) -> GateReport:
    """``skillopt-ci compare``: the gate's paired comparison for two skill files."""
    from skillopt_ci.core.names import slug
    from skillopt_ci.core.paths import display_path

    policy = config.gate
    base_skill = load_skill(base_path, display=display_path(base_path))
    head_skill = load_skill(head_path, display=display_path(head_path))
    suite = load_suite(suite_path, display=display_path(suite_path))
    head_plan = make_plan(head_skill, suite, policy.split, policy.repeats, shard)
    base_plan = make_plan(base_skill, suite, policy.split, policy.repeats, shard)
    all_ids = tuple(t.id for t in suite.tasks(policy.split))
    name = slug(head_skill.name)  # a file's stem may be anything; it names a directory here
    head_run = session.evaluate(head_plan, out / name / "head", fresh=fresh, label=f"compare {name} head")
    if baseline:
        head_run = with_no_skill(session, head_plan, head_run, out / name / "no-skill", fresh, policy)
    base_run = session.evaluate(base_plan, out / name / "base", fresh=fresh, label=f"compare {name} base")
    change = SkillChange(name, display_path(head_path), suite.display, "modified", display_path(base_path))
    verdict = replace(decide(change, base_run.results, head_run.results, [t.id for t in head_plan.tasks], policy,
                             base_run.summary, head_run.summary, all_ids), warnings=head_skill.warnings)
    report = GateReport(base_ref=display_path(base_path), head_ref=display_path(head_path), base_sha=base_skill.hash,
                        head_sha=head_skill.hash, merge_base=base_skill.hash, policy=policy, skills=[verdict],
                        shard=str(shard) if shard else None, mode="compare")
    write_json_atomic(out / "gate.json", report.to_dict())
    return report
