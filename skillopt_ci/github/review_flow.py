"""The static review on a pull request that no model can be called for: a fork's (no secrets) or
one without a model key. It replaces the bare "skipped" with what a reviewer can use at no cost.

- The config is read from the **base** commit (a fork's ``skillopt.yml`` could point a "skill"
  at any file of the runner); only the skill files it names are read from the head's checkout,
  as text, and a skill file that is a symbolic link, or lies outside the repository, is not read.
- Every finding is a workflow-command annotation on its line (no token needed), the job summary
  holds the review, and when the token may write (a same-repository pull request, or a fork's
  under ``pull_request_target``) the sticky comment holds it too and the check run
  ``skillopt-ci gate`` carries each finding as an annotation on its line, concluded ``neutral``
  (a review without a measurement blocks no merge).
- The comment ends with the line that says how to get the paid evaluation.
"""

from __future__ import annotations

from pathlib import Path

from skillopt_ci.core.errors import EXIT_OK, InputError
from skillopt_ci.core.skill_review import SkillReview
from skillopt_ci.gate.changes import resolve_changes
from skillopt_ci.gate.git import Git
from skillopt_ci.gate.review import review_skills
from skillopt_ci.github.context import FORK, Context
from skillopt_ci.github.publisher import Annotation, marker
from skillopt_ci.github.runner_files import command
from skillopt_ci.github.settings import PullRequest
from skillopt_ci.github.sticky import post_sticky
from skillopt_ci.inputs.config import Config, config_from_doc
from skillopt_ci.inputs.yamlfile import parse_yaml
from skillopt_ci.render.skill_review import review_section

LEVELS = {"error": "error", "warning": "warning", "notice": "notice"}
CHECK_LEVELS = {"error": "failure", "warning": "warning", "notice": "notice"}  # a check run's annotation levels
FORK_REVIEW = ("Fork pull requests run without secrets, so no model was called and nothing of the fork was run. "
               "A maintainer can run the paired evaluation with a `/skillopt eval` comment.")


def fork_review(ctx: Context) -> int:
    """A fork's pull request, in any mode: the static review, and how to get the evaluation."""
    return static_review_flow(ctx, ctx.settings.gate_pull_request(), FORK[0], FORK_REVIEW)


def trusted_config(ctx: Context, git: Git, base_sha: str) -> Config:
    """The config as the base commit has it, its paths resolved in the checkout."""
    s = ctx.settings
    text = git.show(base_sha, s.config)
    if text is None:
        raise InputError(f"the base commit has no {s.config}", where=s.config)
    config, problems = config_from_doc(parse_yaml(text, f"{s.config} (base)"), (s.workspace / s.config).parent)
    errors = [p for p in problems if not p.is_warning]
    if config is None or errors:
        raise errors[0].to_error(hint="fix the config on the base branch")
    return config


def static_review_flow(ctx: Context, pr: PullRequest, why: str, paid: str) -> int:
    """Review the changed skills, annotate, summarise and (when the token may write) comment."""
    s = ctx.settings
    git = Git(s.workspace)
    config = trusted_config(ctx, git, pr.base_sha)
    top = git.top_level().resolve()
    _, _, _, changes = resolve_changes(config, git, pr.base_sha, pr.head_sha, s.skills)
    safe = [c.name for c in changes if _inside(config, c.name, top)]
    reviews = review_skills(config, git, pr.base_sha, safe) if safe else []
    for review in reviews:
        _annotate(ctx, review)
    errors = sum(r.errors for r in reviews)
    head = f"## skillopt-ci: static review {'❌' if errors else '✅'}\n\n**{why}.** {paid}\n\n"
    section = review_section(reviews, heading="### What a reviewer can see without a model")
    ctx.summary(head + section)
    if s.token and s.comment and changes and (not pr.fork or s.event_name == "pull_request_target"):
        publisher = ctx.publisher_factory(s)
        post_sticky(ctx, publisher, pr.number, f"{marker('gate', pr.head_sha)}\n{head}{section}")
        annotations = [Annotation(f.path, f.message, f"skillopt-ci review: {f.rule}", CHECK_LEVELS.get(f.level, "notice"),
                                  f.line or 1) for r in reviews for f in r.findings]
        found = sum(len(r.findings) for r in reviews)
        title = f"Static review: {found} finding{'s' if found != 1 else ''}, no model called"
        ctx.publish(lambda: publisher.check_run(pr.head_sha, conclusion="neutral", title=title, summary=head + section,
                                                annotations=annotations, details_url=s.run_url))
    ctx.outputs["verdict"] = "skipped"
    return EXIT_OK


def _inside(config: Config, name: str, top: Path) -> bool:
    """The skill file is a regular file inside the repository (a fork cannot send another file)."""
    entry = config.skill(name)
    if entry is None or entry.path.is_symlink() or not entry.path.is_file():
        return False
    return entry.path.resolve().is_relative_to(top)


def _annotate(ctx: Context, review: SkillReview) -> None:
    for f in review.findings:
        command(LEVELS.get(f.level, "notice"), f.message, stream=ctx.out, file=f.path, line=f.line,
                title=f"skillopt-ci review: {f.rule}")
