"""Mode gate on a pull request: the changed skills' base and head evaluated on the gate split,
then the sticky comment, the job summary, the check run, the labels and the outputs
(:func:`publish_gate`, which the merge job of a sharded run publishes through as well).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from skillopt_ci.core.errors import EXIT_FAILED, EXIT_OK, EXIT_RUNTIME, SkilloptError
from skillopt_ci.core.names import run_dir_name
from skillopt_ci.engine.evaluation import EvalSession
from skillopt_ci.engine.rundir import write_atomic, write_json_atomic
from skillopt_ci.gate.changes import resolve_changes
from skillopt_ci.gate.git import Git
from skillopt_ci.gate.report import render_gate
from skillopt_ci.gate.run import run_gate
from skillopt_ci.gate.verdict import GateReport
from skillopt_ci.github.context import (
    Context,
    _config,
    _trust_line,
    missing_key,
    shard_done,
)
from skillopt_ci.github.publisher import Annotation, Publisher, marker
from skillopt_ci.github.review_flow import fork_review, static_review_flow
from skillopt_ci.github.runner_files import command
from skillopt_ci.github.settings import PullRequest, shard_name
from skillopt_ci.github.sticky import post_sticky
from skillopt_ci.render.markdown import code_span, escape_inline, truncate


def gate_flow(ctx: Context) -> int:
    s = ctx.settings
    pr = s.gate_pull_request()
    if pr.fork and ctx.evaluated_head is None:  # only a command's trusted tree stands in for a fork's head
        return fork_review(ctx)
    config = _config(ctx)
    git = Git(s.workspace)
    evaluated = ctx.evaluated_head or pr.head_sha
    _, _, _, changes = resolve_changes(config, git, pr.base_sha, evaluated, s.skills)
    head_sha = pr.head_sha
    reason = missing_key(config, ("target", "judge")) if changes else None
    if reason:
        return static_review_flow(ctx, pr, "No model key", f"{reason}. Add the key as a repository secret and pass "
                                  "it to the step's env for the paired evaluation; no model was called.")
    publisher = ctx.publisher_factory(s) if s.token and not s.shard else None  # a shard job posts nothing
    if changes and publisher and s.comment:
        names = ", ".join(code_span(c.name, 60) for c in changes)
        post_sticky(ctx, publisher, pr.number,
                    f"{marker('gate', pr.head_sha)}\n## skillopt-ci gate: ⏳ evaluating…\n\nEvaluating {names} on "
                    f"split {code_span(config.gate.split, 40)} at `{head_sha[:7]}`. This comment is updated "
                    "when the results are in.\n")
    out = config.runs_dir / run_dir_name(f"gate-pr{pr.number}", head_sha[:12], shard_name(s.shard))
    ctx.run_dirs.append(out)
    command("group", "Evaluating changed skills", stream=ctx.out)
    try:
        with EvalSession(config, **ctx.session_options) as session:
            report = run_gate(config, git, session, out, base_ref=pr.base_sha, head_ref=evaluated, only=s.skills,
                              baseline=s.baseline, shard=s.shard)
        if evaluated != pr.head_sha:  # the report names the pull request's head, not the stand-in commit
            report = replace(report, head_ref=pr.head_sha, head_sha=pr.head_sha)
    except SkilloptError as exc:
        if publisher and s.comment and changes:
            body = f"{marker('gate', pr.head_sha)}\n## skillopt-ci gate: 💥 could not run\n\n{escape_inline(str(exc), 2000)}\n"
            post_sticky(ctx, publisher, pr.number, body)
        raise
    finally:
        command("endgroup", "", stream=ctx.out)
    return shard_done(ctx, report) if s.shard else publish_gate(ctx, report, out, pr, publisher)


def publish_gate(ctx: Context, report: GateReport, out: Path, pr: PullRequest, publisher: Publisher | None,
                 incomplete: str | None = None) -> int:
    """``incomplete`` (a merge missing shards): the check fails, titled so, and the exit code is 3."""
    s = ctx.settings
    labels = list(pr.labels)
    if report.failed and publisher:
        labels = ctx.publish(lambda: publisher.labels(pr.number)) or labels
    report = replace(report, overridden=report.failed and report.policy.override_label in labels)
    if report.overridden:  # the run directory (and its HTML report) must say so too
        write_json_atomic(out / "gate.json", report.to_dict())
    full = render_gate(report, limit=1_000_000, run_url=s.run_url)
    write_atomic(out / "report.md", full)
    ctx.summary(full)
    ctx.outputs.update({"verdict": report.verdict, "report-path": str(out / "report.md")})
    label = escape_inline(report.policy.override_label, 60)
    for skill in report.skills:
        if not skill.failed:
            continue
        if report.overridden:
            command("notice", f"{skill.reason} (allowed by the label {label})", stream=ctx.out,
                    file=skill.change.path, line=1, title=f"skillopt-ci: {skill.change.name} {skill.verdict}, overridden")
        else:
            command("error", skill.reason, stream=ctx.out, file=skill.change.path, line=1,
                    title=f"skillopt-ci: {skill.change.name} {skill.verdict}")
    if publisher:
        if s.comment:
            body = render_gate(report, header=marker('gate', pr.head_sha), run_url=s.run_url) + _trust_line(ctx)
            url = post_sticky(ctx, publisher, pr.number, body, create=bool(report.skills))
            if url:
                ctx.outputs["comment-url"] = url
        # GitHub has no "overridden" conclusion: success lets the PR merge, the title says why.
        conclusion = {"failed": "failure", "inconclusive": "neutral"}.get(report.verdict, "success")
        level = "notice" if report.overridden else "failure"
        suffix = f" (overridden by the label {report.policy.override_label})" if report.overridden else ""
        annotations = [Annotation(sk.change.path, sk.reason + suffix, f"{sk.change.name}: {sk.verdict}{suffix}", level)
                       for sk in report.skills if sk.failed]
        title = {"failed": "A skill regressed",
                 "overridden": f"Overridden: regression allowed by the label {report.policy.override_label}",
                 "inconclusive": "Inconclusive: too few measurements", "skipped": "No skill changed",
                 "passed": "No regression"}[report.verdict]
        if incomplete:
            conclusion, title = "failure", truncate(f"Incomplete: {incomplete}", 200)
        ctx.publish(lambda: publisher.check_run(pr.head_sha, conclusion=conclusion, title=title,
                                                summary=render_gate(report, limit=60_000, run_url=s.run_url)
                                                + _trust_line(ctx),
                                                annotations=annotations, details_url=s.run_url))
    if incomplete or (report.failed and not report.overridden and s.fail):
        return EXIT_RUNTIME if incomplete else EXIT_FAILED
    return EXIT_OK
