"""``skillopt-ci action``: the GitHub Action, a recipe over the same engine as the CLI.

pull_request → gate: settings → skip forks and key-less runs (neutral, explained) → "evaluating…"
comment → gate → report → sticky comment, job summary, check run, outputs → exit code.
schedule / workflow_dispatch → eval of every configured skill → job summary, outputs.
Sharded (inputs shard, shards-path): shard jobs publish nothing, the merge job all (github/sharded.py).
This module dispatches; each flow is a module of its own (github/gate_flow.py, eval_flow.py,
train_flow.py, sharded.py, commands.py) over what they share (github/context.py).

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
from typing import Any, TextIO

from skillopt_ci.core.errors import SkilloptError
from skillopt_ci.core.redact import SECRETS
from skillopt_ci.github import sharded
from skillopt_ci.github.context import Context
from skillopt_ci.github.eval_flow import eval_flow
from skillopt_ci.github.gate_flow import gate_flow
from skillopt_ci.github.publisher import Publisher
from skillopt_ci.github.review_flow import fork_review
from skillopt_ci.github.runner_files import command, write_outputs
from skillopt_ci.github.settings import ActionSettings, settings_from_env
from skillopt_ci.render.markdown import escape_inline
from skillopt_ci.sandbox import policy


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
        elif _fork_pull_request(settings):  # never a fork's code, and no key, in any mode: the free review only
            code = fork_review(ctx)
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


def _fork_pull_request(settings: ActionSettings) -> bool:
    """A ``pull_request`` (or ``pull_request_target``) event whose head is a fork's: skipped in
    every mode. A reviewer command on a fork is the one path that evaluates one (commands.py)."""
    if settings.event_name == "issue_comment":
        return False
    pr = settings.pull_request()
    return pr is not None and pr.fork


