"""What one Action run carries between its steps, and what every flow shares: the run's
:class:`Context` (settings, output, publisher, outputs, GitHub failures kept for the summary), the
configuration as the workspace has it, the skills a run selects, whether a model key is missing,
and the two ways a flow ends without a verdict of its own: skipped (:func:`skip`) and a shard
job's end (:func:`shard_done`).

Every flow imports this module: the gate (github/gate_flow.py), the eval (github/eval_flow.py),
training (github/train_flow.py), the merge of a sharded run (github/sharded.py) and reviewer
commands (github/commands.py). No flow imports github/action.py, the dispatcher that runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from skillopt_ci.core.errors import EXIT_OK, InputError
from skillopt_ci.core.records import EvalSummary
from skillopt_ci.gate.verdict import GateReport
from skillopt_ci.github.publisher import Publisher, PublishError
from skillopt_ci.github.runner_files import append_summary, command
from skillopt_ci.github.settings import ActionSettings
from skillopt_ci.inputs.config import Config, load_config
from skillopt_ci.models.registry import resolve_endpoint
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
    config_warned: bool = False  # the config's deprecation warnings are in the log once

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


def _config(ctx: Context) -> Config:
    path = ctx.settings.workspace / ctx.settings.config
    config = load_config(path, display=ctx.settings.config)
    if not ctx.config_warned:
        for line in config.warnings:
            command("warning", line, stream=ctx.out)
        ctx.config_warned = True
    return config


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


def _trust_line(ctx: Context) -> str:
    """What the comment must say about trust: a fork's documents only, a run without a sandbox."""
    # The trust note is markdown built from escaped parts (paths in code spans); escaping it again
    # would show its backticks. The unisolated note is plain text.
    unisolated = policy.unisolated_note()
    lines = [" ".join(ctx.trust_note.split()), escape_inline(unisolated, 3000) if unisolated else ""]
    return "".join(f"\n> {line}\n" for line in lines if line)


def shard_done(ctx: Context, measured: GateReport | list[tuple[str, EvalSummary]]) -> int:
    """A shard job's end: a job summary naming its slice; nothing is posted to GitHub."""
    if isinstance(measured, GateReport):
        mode = "gate"
        lines = [f"- {escape_inline(s.change.name, 100)}: base and head on {s.head.n_tasks if s.head else 0} "
                 f"of {len(s.task_ids)} tasks" for s in measured.skills]
    else:
        mode = "eval"
        lines = [f"- {escape_inline(name, 100)}: {summary.n_tasks} tasks of split {code_span(summary.split, 40)}"
                 for name, summary in measured]
    body = "\n".join(lines) or "- no configured skill or suite changed"
    ctx.summary(f"## skillopt-ci {mode}: shard {ctx.settings.shard} evaluated\n\n{body}\n\n"
                "This job measured one slice of the tasks; the merge job reports the verdict.\n")
    ctx.outputs["verdict"] = "shard"
    return EXIT_OK
