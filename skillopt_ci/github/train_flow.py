"""Mode train: nightly training of each configured skill, and the pull request that delivers it.

When the best skill beats the current one on validation and holds on test, its pull request is
opened or updated (github/training_pr.py). Training improved but no pull request could be opened
is exit 3: the night's deliverable is lost; a pull request opened but not labelled or checked is a
warning, and its number is still in the ``pr-number`` output.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import EXIT_OK, EXIT_RUNTIME
from skillopt_ci.gate.git import Git
from skillopt_ci.github import apply_flow
from skillopt_ci.github.context import Context, _config, missing_key, selected_skills, skip
from skillopt_ci.github.publisher import Publisher, PublishError
from skillopt_ci.github.runner_files import command
from skillopt_ci.inputs.config import Config
from skillopt_ci.render.markdown import code_span, escape_inline


def train_flow(ctx: Context) -> int:
    """Nightly training: train each configured skill (or the named ones); when the best skill
    beats the current one on validation and holds on test, open or update its pull request."""
    from skillopt_ci.train.report import summary_table

    s = ctx.settings
    config = _config(ctx)
    entries = selected_skills(config, s.skills)
    reason = missing_key(config, ("target", "optimizer", "judge"))
    if reason:
        return skip(ctx, "No model key", f"{reason}. Nothing was trained.")
    publisher = ctx.publisher_factory(s) if s.token else None
    sections, improved = [], []
    numbers: list[str] = []  # the pull requests opened or updated
    lost: list[str] = []  # the improved skills whose pull request could not be opened
    top = Git(s.workspace).top_level().resolve()
    for entry in entries:
        outcome = train_skill(ctx, config, entry.name)
        summary = outcome.summary
        line = "improved" if summary.improved else "no improvement: no pull request"
        if summary.improved:
            improved.append(entry.name)
        if summary.improved and publisher:
            line = _deliver_training(ctx, publisher, config, entry.name, outcome, top, numbers, lost)
        sections.append(f"### {escape_inline(entry.name, 60)}: {line}\n\n"
                        f"```text\n{summary_table(summary)}\n```\n")
    if publisher:  # what /skillopt train left for pull requests that closed without /skillopt apply
        pruned = ctx.publish(lambda: publisher.prune_branches(apply_flow.BRANCH_PREFIX, apply_flow.branch_number))
        if pruned:
            sections.append("Deleted the trained-skill branches of closed pull requests: "
                            + ", ".join(code_span(b, 100) for b in pruned) + ".\n")
    ctx.summary("## skillopt-ci train\n\n" + "\n".join(sections))
    ctx.outputs["verdict"] = "improved" if improved else "unchanged"
    if numbers:
        ctx.outputs["pr-number"] = " ".join(numbers)
    if lost:
        command("error", f"training improved {', '.join(lost)} but no pull request could be opened; "
                "see the warning above for the permission to add", stream=ctx.out, title="skillopt-ci train")
        return EXIT_RUNTIME
    return EXIT_OK


def train_skill(ctx: Context, config: Config, name: str) -> Any:
    """One skill trained, its log in a collapsed group; its run directory joins the job's."""
    from skillopt_ci.train.entry import TrainRequest, run_training

    command("group", f"Training {name}", stream=ctx.out)
    try:
        outcome = run_training(config, TrainRequest(skill=name), log=lambda line: print(line, file=ctx.out, flush=True),
                               session_options=ctx.session_options)
    finally:
        command("endgroup", "", stream=ctx.out)
    ctx.run_dirs.append(outcome.run_dir)
    return outcome


def _deliver_training(ctx: Context, publisher: Publisher, config: Config, name: str, outcome: Any, top: Path,
                      numbers: list[str], lost: list[str]) -> str:
    """Open or update the pull request of an improved skill; the line the job summary shows for it.
    Its number goes to ``numbers``; a skill whose pull request could not be opened goes to ``lost``."""
    from skillopt_ci.core.names import training_branch
    from skillopt_ci.github.training_pr import TrainingPRIncomplete, propose_training_pr
    from skillopt_ci.train.pr_body import render_training_check, render_training_pr

    s, summary = ctx.settings, outcome.summary
    line = "improved"
    title, body = render_training_pr(summary, current_text=outcome.baseline_text,
                                     trained_text=outcome.best_text, run_url=s.run_url,
                                     artifact_hint="the run directory is in the workflow run's artifact")
    check_title, check_summary = render_training_check(summary, s.run_url)
    try:
        pr = propose_training_pr(
            publisher, skill_path=outcome.entry.path.resolve().relative_to(top).as_posix(),
            trained_text=outcome.best_text, title=title, body=body, branch=training_branch(name),
            labels=config.train.labels, check_summary=check_summary, check_title=check_title,
            details_url=s.run_url)
    except TrainingPRIncomplete as exc:  # the PR exists; labels or the check run failed
        ctx.warn(exc)
        pr = exc.pull_request
    except PublishError as exc:  # no PR: the improvement is not delivered
        ctx.warn(exc)
        lost.append(name)
        pr = None
        line = f"improved, but the pull request could not be opened: {escape_inline(str(exc), 500)}"
    if pr is not None and pr.number:
        numbers.append(str(pr.number))
        line = f"pull request [#{pr.number}]({pr.url}) {'opened' if pr.created else 'updated'}"
    return line
