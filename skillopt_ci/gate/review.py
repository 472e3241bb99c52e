"""The static review of the configured skills a change touches: no model, no key, nothing run.

The skills' files are read from the working tree (the checkout of the pull request's head, as
data) and the base's text from git, so the review runs on a fork's pull request as on any other
(:mod:`skillopt_ci.core.skill_review` says what it looks for)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from skillopt_ci.core.paths import display_path
from skillopt_ci.core.skill_review import SkillReview
from skillopt_ci.gate.git import Git
from skillopt_ci.inputs.config import Config, SkillEntry
from skillopt_ci.inputs.review import review_path


def review_skills(config: Config, git: Git | None, base_ref: str | None, names: Sequence[str] = ()) -> list[SkillReview]:
    """The review of each configured skill (``names``: only those); with ``git`` and ``base_ref``,
    against the base's text of the same file (a sharp change in size is noted)."""
    top = git.top_level() if git is not None else None
    reviews = []
    for entry in config.skills:
        if names and entry.name not in names:
            continue
        shown = _relative(entry, top)
        base = git.show(base_ref, shown) if git is not None and base_ref else None
        findings = review_path(entry.path, shown, base_text=base, token_limit=config.limits.skill_tokens)
        reviews.append(SkillReview(entry.name, shown, tuple(findings)))
    return reviews


def _relative(entry: SkillEntry, top: Path | None) -> str:
    if top is not None:
        try:
            return entry.path.resolve().relative_to(top.resolve()).as_posix()
        except ValueError:
            pass
    return display_path(entry.path)
