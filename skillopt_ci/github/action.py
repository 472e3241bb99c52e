"""``skillopt-ci action``: the GitHub Action, a recipe over the same engine as the CLI.

pull_request → gate: settings → skip forks and key-less runs (neutral, explained) → "evaluating…"
comment → gate → report → sticky comment, job summary, check run, outputs → exit code.
schedule / workflow_dispatch → eval of every configured skill → job summary, outputs.
Sharded (inputs shard, shards-path): shard jobs publish nothing, the merge job all (github/sharded.py).

The job summary is written before anything is sent to GitHub, so when GitHub fails (a missing
permission, a rate limit) the scores are still in the summary, and the failure is one clear line.

The verdict decides the exit code. A GitHub write that still fails after its retries (comment,
check run, labels) is a ``::warning`` and a section at the end of the job summary naming the
permission to add — never exit 3 on its own, so a missing ``checks: write`` cannot turn a passing
gate red. The one exception is mode train: when training improved a skill but its pull request
could not be opened, the night's deliverable is lost, so the job exits 3 (the verdict output still
says ``improved``). A PR that was opened but could not be labelled or checked is a warning, and its
number is still in the ``pr-number`` output.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from skillopt_ci.core.errors import EXIT_FAILED, EXIT_OK, EXIT_RUNTIME, InputError, SkilloptError
from skillopt_ci.core.names import run_dir_name
from skillopt_ci.core.redact import SECRETS
from skillopt_ci.engine.evaluation import EvalSession, threshold_verdict
from skillopt_ci.engine.rundir import write_atomic, write_json_atomic
from skillopt_ci.gate.changes import resolve_changes
from skillopt_ci.gate.git import Git
from skillopt_ci.gate.report import render_gate
from skillopt_ci.gate.run import run_gate
from skillopt_ci.gate.verdict import GateReport
from skillopt_ci.github import sharded
from skillopt_ci.github.publisher import Annotation, Publisher, PublishError, marker
from skillopt_ci.github.runner_files import append_summary, command, write_outputs
from skillopt_ci.github.settings import ActionSettings, PullRequest, settings_from_env, shard_name
from skillopt_ci.github.sticky import post_sticky
from skillopt_ci.inputs.config import Config, load_config
from skillopt_ci.models.registry import resolve_endpoint
from skillopt_ci.render.eval_report import score_table
from skillopt_ci.render.markdown import code_span, escape_inline
from skillopt_ci.sandbox import policy


@dataclass
class Context:
    """What one action run carries between its steps."""

    settings: ActionSettings
    out: TextIO
    publisher_factory: Callable[[ActionSettings], Publisher]
    session_options: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    publish_errors: list[PublishError] = field(default_factory=list)
    run_dirs: list[Path] = field(default_factory=list)
    # A fork's head as the trust model allows it (github/commands.py): the commit evaluated in
    # its place (the base branch with the fork's skill documents), and the line that says so.
    evaluated_head: str | None = None
    trust_note: str = ""

    def summary(self, markdown: str) -> None:
        append_summary(self.settings.summary_file, markdown)

    def publish(self, doing: Callable[[], Any]) -> Any:
        """Run one GitHub call (already retried inside the publisher); a failure is a warning,
        remembered for the job summary, never raised."""
        try:
            return doing()
        except PublishError as exc:
            self.warn(exc)
            return None

    def warn(self, exc: PublishError) -> None:
        self.publish_errors.append(exc)
        command("warning", str(exc), stream=self.out, title="skillopt-ci could not update GitHub")

    def summarize_publish_errors(self) -> None:
        if not self.publish_errors:
            return
        needed = sorted({e.permission for e in self.publish_errors if e.permission})
        lines = [f"- {escape_inline(str(e), 1000)}" for e in self.publish_errors]
        fix = (f"\n\nTo fix: add `permissions: {', '.join(needed)}` to the workflow (or the job)."
               if needed else "")
        self.summary("## ⚠️ skillopt-ci could not update GitHub\n\n"
                     "The verdict stands; only these updates to GitHub are missing.\n\n"
                     + "\n".join(lines) + fix + "\n")


def default_publisher(settings: ActionSettings) -> Publisher:
    """PyGithub's pauses between requests protect GitHub from bursts; a server on the loopback
    interface (a local fake or proxy) is not GitHub, so it gets none."""
    from urllib.parse import urlsplit

    loopback = urlsplit(settings.api_url).hostname in ("127.0.0.1", "localhost", "::1")
    return Publisher(settings.token, settings.api_url, settings.repository, throttle=not loopback,
                     retry=settings.retry)


def run_action(env: Mapping[str, str], *, out: TextIO | None = None,
               publisher_factory: Callable[[ActionSettings], Publisher] = default_publisher,
               session_options: dict[str, Any] | None = None) -> int:
    """The whole action; returns the exit code (0 ok, 1 gate failed, 2 bad input, 3 runtime)."""
    SECRETS.add_env(env)
    policy.reset()  # one run's trust: a fork's command marks it untrusted (commands.py)
    settings = settings_from_env(env)
    SECRETS.add(settings.token)
    ctx = Context(settings, out or sys.stdout, publisher_factory, dict(session_options or {}))
    from skillopt_ci.github.train_flow import train_flow

    flows = {"gate": gate_flow, "eval": eval_flow, "train": train_flow, "merge": sharded.merge_flow}
    try:
        if settings.event_name == "issue_comment":  # a reviewer's /skillopt command (github/commands.py)
            from skillopt_ci.github.commands import command_flow
            code = command_flow(ctx)
        elif _fork_pull_request(settings):  # never a fork's code, and no key, in any mode
            code = skip(ctx, *FORK)
        else:
            code = flows["merge" if settings.shards_path else settings.resolved_mode](ctx)
    except SkilloptError as exc:
        file, line = _location(exc.where)
        command("error", str(exc), stream=ctx.out, file=file, line=line, title="skillopt-ci")
        ctx.summary(f"## skillopt-ci: could not run\n\n{escape_inline(str(exc), 2000)}\n")
        ctx.outputs.setdefault("verdict", "error")
        code = exc.exit_code
    note = policy.unisolated_note()
    if note:
        command("warning", note, stream=ctx.out, title="skillopt-ci ran without a sandbox")
        ctx.summary(f"\n> {escape_inline(note, 1000)}\n")
    ctx.summarize_publish_errors()
    write_reports(ctx)
    write_outputs(settings.output_file, ctx.outputs)
    return code


def write_reports(ctx: Context) -> None:
    """An HTML report in every run directory this job produced, and the ``run-dirs`` output that
    action.yml uploads as the workflow artifact. A report that cannot be written is a warning."""
    from skillopt_ci.viewer.report import write_html_report

    written = []
    for run in dict.fromkeys(ctx.run_dirs):
        if not run.is_dir():
            continue
        try:
            write_html_report(run, run / "report.html")
        except Exception as exc:  # the verdict stands even if a report cannot be drawn
            command("warning", f"no HTML report for {run}: {exc}", stream=ctx.out)
        written.append(str(run))
    if written:
        ctx.outputs["run-dirs"] = "\n".join(written)


def _location(where: str | None) -> tuple[str | None, str | None]:
    """``file:line`` (or ``file``) → (file, line) for an annotation."""
    if not where:
        return None, None
    file, _, rest = where.partition(":")
    line = rest.split(":")[0]
    return file, line if line.isdigit() else None


def _config(ctx: Context) -> Config:
    path = ctx.settings.workspace / ctx.settings.config
    return load_config(path, display=ctx.settings.config)


def selected_skills(config: Config, names: tuple[str, ...]) -> list[Any]:
    """The configured skills named by the ``skills`` input (all when empty); unknown names are
    an input error listing the configured ones."""
    unknown = sorted(set(names) - {e.name for e in config.skills})
    if unknown:
        raise InputError(f"no configured skill named {', '.join(unknown)}",
                         hint=f"configured: {', '.join(e.name for e in config.skills)}")
    return [e for e in config.skills if not names or e.name in names]


def missing_key(config: Config, roles: tuple[str, ...], env: Mapping[str, str] | None = None) -> str | None:
    """Why no paid call can be made (a missing key or endpoint), or None."""
    if config.cache.mode == "replay-only":
        return None
    for role in roles:
        spec = config.models.get(role)
        if spec is None:
            continue
        try:
            resolve_endpoint(spec, env)
        except InputError as exc:
            return exc.message
    return None


def skip(ctx: Context, why: str, detail: str) -> int:
    """A neutral result with its reason: a notice in the log, a job summary, a verdict output."""
    command("notice", f"{why}. {detail}", stream=ctx.out, title="skillopt-ci skipped")
    ctx.summary(f"## skillopt-ci: skipped\n\n**{why}.** {detail}\n")
    ctx.outputs["verdict"] = "skipped"
    return EXIT_OK


FORK = ("Pull request from a fork", "Fork pull requests run without secrets and with a read-only token, so no "
        "model is called and nothing is posted. A maintainer can evaluate the change by pushing the branch to this "
        "repository.")


def _fork_pull_request(settings: ActionSettings) -> bool:
    """A ``pull_request`` (or ``pull_request_target``) event whose head is a fork's: skipped in
    every mode. A reviewer command on a fork is the one path that evaluates one (commands.py)."""
    if settings.event_name == "issue_comment":
        return False
    pr = settings.pull_request()
    return pr is not None and pr.fork


def gate_flow(ctx: Context) -> int:
    s = ctx.settings
    pr = s.gate_pull_request()
    if pr.fork and ctx.evaluated_head is None:  # only a command's trusted tree stands in for a fork's head
        return skip(ctx, *FORK)
    config = _config(ctx)
    git = Git(s.workspace)
    evaluated = ctx.evaluated_head or pr.head_sha
    _, _, _, changes = resolve_changes(config, git, pr.base_sha, evaluated, s.skills)
    head_sha = pr.head_sha
    reason = missing_key(config, ("target", "judge")) if changes else None
    if reason:
        return skip(ctx, "No model key", f"{reason}. Add the key as a repository secret and pass it to the "
                    "step's env; nothing was evaluated.")
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
    return sharded.shard_done(ctx, report) if s.shard else publish_gate(ctx, report, out, pr, publisher)


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
            conclusion, title = "failure", f"Incomplete: {incomplete}"[:200]
        ctx.publish(lambda: publisher.check_run(pr.head_sha, conclusion=conclusion, title=title,
                                                summary=render_gate(report, limit=65_535, run_url=s.run_url),
                                                annotations=annotations, details_url=s.run_url))
    if incomplete or (report.failed and not report.overridden and s.fail):
        return EXIT_RUNTIME if incomplete else EXIT_FAILED
    return EXIT_OK


def _trust_line(ctx: Context) -> str:
    """What the comment must say about trust: a fork's documents only, a run without a sandbox."""
    lines = [ctx.trust_note, policy.unisolated_note() or ""]
    return "".join(f"\n> {escape_inline(line, 3000)}\n" for line in lines if line)


def eval_flow(ctx: Context) -> int:
    """Scheduled or manual run: every configured skill (or the named ones), eval-only."""
    from skillopt_ci.github.trend import evaluate_entries, scheduled_section

    s = ctx.settings
    config = _config(ctx)
    entries = selected_skills(config, s.skills)
    reason = missing_key(config, ("target", "judge"))
    if reason:
        return skip(ctx, "No model key", f"{reason}. Nothing was evaluated.")
    options = {**ctx.session_options, "estimate_runs": 2} if s.baseline else ctx.session_options
    if s.batch:  # input batch: at the batch price, answered within the providers' 24-hour window
        options = {**options, "batch": True}
    with EvalSession(config, **options) as session:
        summaries, _, worth_lines = evaluate_entries(ctx, config, session, entries, "scheduled")
    pairs = [(e.name, summary) for e, summary in zip(entries, summaries, strict=True)]
    if s.shard:
        return sharded.shard_done(ctx, pairs)
    trend, warning = scheduled_section(s, [e.name for e in entries], summaries, ctx.outputs)
    if warning:
        command("warning", warning, stream=ctx.out, title="skillopt-ci: the default branch's last scores")
    return report_evals(ctx, config, pairs, worth_lines, trend=trend)


def report_evals(ctx: Context, config: Config, summaries: list[Any], worth_lines: list[str],
                 failed: tuple[str, ...] = (), trend: str = "") -> int:
    """Job summary, verdict and exit code of an eval: a score under gate.min_score or an incomplete run fails."""
    from skillopt_ci.github.trend import notes_of

    failing = list(failed)
    for name, summary in summaries:
        code, line = threshold_verdict(summary, config.gate.min_score)
        if code != EXIT_OK:
            failing.append(f"{name}: {line}")
    table = score_table([summary for _, summary in summaries], "github")
    notes = notes_of(worth_lines, failing)
    ctx.summary(f"## skillopt-ci eval: {'❌' if failing else '✅'} {len(summaries)} skill(s)\n\n{table}\n{notes}\n{trend}")
    ctx.outputs["verdict"] = "failed" if failing else "passed"
    return EXIT_FAILED if failing and ctx.settings.fail else EXIT_OK
