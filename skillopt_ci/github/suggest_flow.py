"""``/skillopt train [skill]`` on a pull request: training from the head's skills, delivered into
the pull request itself.

Each selected skill is trained as nightly training trains it, starting from the head's text. When
the trained skill beats the head on validation and holds on test, it is stored for ``/skillopt
apply`` (github/apply_flow.py: one commit on the head, on the branch ``skillopt/suggest/pr-<N>``)
and posted as a pull-request review that only comments: one comment per change that falls on
lines of the pull request's diff, carrying a ``suggestion`` block and the accepted edits behind it
(rationale, support, the validation gain it was accepted with), and in the review's body the score
table and, as a diff, the changes GitHub cannot show as suggestions (core/suggestions.py). If
GitHub refuses the comments' lines, the review is posted again with every change in its body. The
sticky comment gives the scores and links the review.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from skillopt_ci.core.errors import EXIT_OK
from skillopt_ci.core.redact import redact
from skillopt_ci.core.suggestions import Change, edits_behind, suggest
from skillopt_ci.gate.git import Git
from skillopt_ci.github import apply_flow
from skillopt_ci.github.context import Context, _config, missing_key, selected_skills, skip
from skillopt_ci.github.publisher import Publisher, PublishError, marker
from skillopt_ci.github.settings import PullRequest
from skillopt_ci.github.sticky import post_sticky
from skillopt_ci.github.train_flow import train_skill
from skillopt_ci.render.eval_report import fmt_score
from skillopt_ci.render.markdown import code_span, escape_inline


def train_on_pull(ctx: Context, publisher: Publisher, pr: PullRequest) -> int:
    """Train the selected skills from the head; review the pull request with what improved."""
    from skillopt_ci.train.report import summary_table

    s = ctx.settings
    config = _config(ctx)
    entries = selected_skills(config, s.skills)
    reason = missing_key(config, ("target", "optimizer", "judge"))
    if reason:
        return skip(ctx, "No model key", f"{reason}. Nothing was trained.")
    names = ", ".join(code_span(e.name, 60) for e in entries)
    if s.comment:
        post_sticky(ctx, publisher, pr.number, f"{marker('train', pr.head_sha)}\n## skillopt-ci train: ⏳ training…\n\n"
                    f"Training {names} from `{pr.head_sha[:7]}`. This comment links the review when it is done.\n")
    top = Git(s.workspace).top_level().resolve()
    improved: list[tuple[str, Any]] = []
    sections = []
    for entry in entries:
        outcome = train_skill(ctx, config, entry.name)
        sections.append(f"### {escape_inline(entry.name, 60)}\n\n```text\n{summary_table(outcome.summary)}\n```\n")
        if outcome.summary.improved and outcome.best_text != outcome.baseline_text:
            improved.append((outcome.entry.path.resolve().relative_to(top).as_posix(), outcome))
    ctx.summary("## skillopt-ci train (on this pull request)\n\n" + "\n".join(sections))
    commit = _store(ctx, pr, improved) if improved else None
    lines = [_deliver(ctx, publisher, pr, path, outcome, commit) for path, outcome in improved]
    ctx.outputs["verdict"] = "improved" if improved else "unchanged"
    if commit:
        ctx.outputs["suggestion-commit"] = commit
    if s.comment:
        post_sticky(ctx, publisher, pr.number, sticky_body(pr, entries, lines, commit, s.run_url))
    return EXIT_OK


def _store(ctx: Context, pr: PullRequest, improved: Sequence[tuple[str, Any]]) -> str | None:
    """The commit ``/skillopt apply`` takes, pushed to the suggestion branch; None when it could
    not be stored (or a trained text holds a secret, which is never committed)."""
    from skillopt_ci.train.pr_body import skill_name

    files = {path: outcome.best_text.encode() for path, outcome in improved}
    if any(redact(outcome.best_text) != outcome.best_text for _, outcome in improved):
        ctx.warn(PublishError("a trained skill contains a value that looks like a secret; it was not stored "
                              "for /skillopt apply"))
        return None
    scores = [f"{skill_name(o.summary)}: val {_pair(o.summary.val)}"
              + (f", test {_pair(o.summary.test)}" if o.summary.test else "") for _, o in improved]
    run = ctx.settings.run_id + (f" ({ctx.settings.run_url})" if ctx.settings.run_url else "")
    title = f"skillopt: apply trained {', '.join(skill_name(o.summary) for _, o in improved)}"[:72]
    message = apply_flow.suggestion_message(
        title, [f"Trained by /skillopt train on #{pr.number} at {pr.head_sha[:12]}, run {run or 'local'}.", *scores],
        files, run or "local")
    commit, problem = apply_flow.store(Git(ctx.settings.workspace), pr, files, message)
    if problem:
        ctx.warn(PublishError(f"storing the trained skill for /skillopt apply: git push failed: {problem}; "
                              f"{apply_flow.PUSH_HINT}", permission="contents: write"))
        return None
    return commit


def _pair(c: Any) -> str:
    return f"{fmt_score(c.current)} -> {fmt_score(c.trained)}"


def _deliver(ctx: Context, publisher: Publisher, pr: PullRequest, path: str, outcome: Any,
             commit: str | None) -> str:
    """Post the review of one improved skill; the sticky comment's line for it."""
    from skillopt_ci.train.pr_body import headline, score_table

    summary = outcome.summary
    patch = ctx.publish(lambda: publisher.file_patch(pr.number, path))
    placed, outside = suggest(outcome.baseline_text, outcome.best_text, patch)
    url = _post_review(ctx, publisher, pr, path, summary, placed, outside, commit)
    said = (f"[review]({url}) with {len(placed)} suggestion{'s' if len(placed) != 1 else ''}" if url else
            "the review could not be posted (see the workflow run)")
    return "\n".join([headline(summary).replace("## ", "### ", 1), "", score_table(summary), "",
                      f"Suggested in the {said}" + (f", {len(outside)} change(s) outside the diff in its body"
                                                    if outside and url else "") + "."])


def _post_review(ctx: Context, publisher: Publisher, pr: PullRequest, path: str, summary: Any,
                 placed: Sequence[Any], outside: Sequence[Change], commit: str | None) -> str | None:
    from skillopt_ci.train.suggestion_body import review_body, suggestion_comment, validation_gains

    gains, accepted = validation_gains(summary), list(summary.accepted_edits)
    comments = []
    for s in placed:
        behind = [accepted[i] for i in edits_behind(s.change, [a.edit for a in accepted])]
        comment: dict[str, Any] = {"path": path, "line": s.last, "side": "RIGHT",
                                   "body": suggestion_comment(s, behind, gains)}
        if s.first < s.last:
            comment.update(start_line=s.first, start_side="RIGHT")
        comments.append(comment)
    body = review_body(summary, path=path, placed=len(placed), outside=outside, commit=commit,
                       run_url=ctx.settings.run_url)
    try:
        return publisher.review(pr.number, pr.head_sha, body, comments)
    except PublishError as exc:
        if not comments:
            ctx.warn(exc)
            return None
    every = [s.change for s in placed] + list(outside)  # GitHub refused the lines: all in the body
    body = review_body(summary, path=path, placed=0, outside=sorted(every, key=lambda c: c.start),
                       commit=commit, run_url=ctx.settings.run_url)
    return ctx.publish(lambda: publisher.review(pr.number, pr.head_sha, body, []))


def sticky_body(pr: PullRequest, entries: Sequence[Any], lines: Sequence[str], commit: str | None,
                run_url: str | None) -> str:
    head = f"{marker('train', pr.head_sha)}\n"
    if not lines:
        names = ", ".join(code_span(e.name, 60) for e in entries)
        text = (f"## skillopt-ci train: no improvement\n\nTraining {names} from `{pr.head_sha[:7]}` found nothing "
                "that beats the head on validation and holds on test; nothing is suggested.\n")
    else:
        apply = (f"Comment `/skillopt apply` to commit the trained skill (`{commit[:7]}`, exactly the bytes that "
                 "were validated) to this branch, or accept the suggestions one by one." if commit else
                 "`/skillopt apply` is not available for this run: the trained skill could not be stored.")
        text = "## skillopt-ci train: ✅ improved\n\n" + "\n\n".join(lines) + f"\n\n{apply}\n"
    return head + text + (f"\n[Workflow run]({run_url})\n" if run_url else "")
