"""Reviewer commands: a pull-request comment ``/skillopt eval [skill]``, ``/skillopt gate``,
``/skillopt train [skill]``, ``/skillopt apply`` or ``/skillopt help`` runs that mode on the pull
request's head.

The order of the checks is the contract (docs/security.md explains why):

1. Ignored quietly (exit 0, nothing posted): an ``issue_comment`` that is not on a pull request,
   not newly created, written by a bot, or whose first line does not start with ``/skillopt``.
2. ``/skillopt help`` is answered for anyone (a plain reply; nothing runs).
3. The commenter's permission is asked from the API (``/collaborators/{user}/permission``), never
   read from the comment's ``author_association``: admin or write (GitHub reports maintain as
   write) may run. Anyone else gets a short reply naming who may; nothing runs (exit 0).
4. The first line is parsed strictly: an unknown subcommand, an extra word, or a skill the
   configuration does not have gets a reply with the help text and exit 2.
5. The pull request comes from the API: its head commit, its base commit and branch, and whether
   the head repository is the base repository. A closed pull request is refused. A fork's head is
   never checked out (:mod:`skillopt_ci.gate.trust`): ``train`` is refused; otherwise every path
   the fork changed since its merge base with the base commit is classified against the base
   branch's configuration, a change to the configuration, a suite folder or a skill's
   ``scripts/`` (or a skill file that is not a regular text file under 1 MiB) refuses the command,
   and the base commit with the fork's skill documents in place is what runs.
6. Only then is anything checked out, in the workspace: ``git fetch origin refs/pull/N/head``; the
   fetched commit must be the head the API reported (else the pull request moved after the check:
   refused, comment again); then the head (this repository's branches) or the base commit with
   the fork's documents (a fork) is checked out, detached.
7. The mode runs and answers in the sticky comment (gate: as on ``pull_request``; eval: scores
   beside the default branch's last score, see :mod:`skillopt_ci.github.trend`; train: a review of
   the pull request with the trained edits as suggestions, see
   :mod:`skillopt_ci.github.suggest_flow`; apply: the stored trained skill committed to the branch
   and the gate on the new head, see :mod:`skillopt_ci.github.apply_flow`). ``train`` and
   ``apply`` are refused for forks.

Outputs: ``verdict`` is ``ignored`` or ``refused`` for 1–5, else the mode's verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from skillopt_ci.core.errors import (
    EXIT_FAILED,
    EXIT_INPUT,
    EXIT_OK,
    InputError,
    RuntimeFailure,
    SkilloptError,
)
from skillopt_ci.core.names import run_dir_name
from skillopt_ci.engine.evaluation import EvalSession
from skillopt_ci.gate.git import Git
from skillopt_ci.gate.trust import TrustedLayout, plan_untrusted, refusal_text, trusted_head
from skillopt_ci.github import apply_flow, trend
from skillopt_ci.github.context import (
    Context,
    _config,
    _trust_line,
    missing_key,
    skip,
)
from skillopt_ci.github.gate_flow import gate_flow
from skillopt_ci.github.publisher import Publisher, PublishError, marker
from skillopt_ci.github.runner_files import command
from skillopt_ci.github.settings import PullRequest
from skillopt_ci.github.sticky import post_sticky
from skillopt_ci.inputs.config import Config, load_config
from skillopt_ci.render.markdown import code_span, escape_inline
from skillopt_ci.sandbox import policy

PREFIX = "/skillopt"
SUBCOMMANDS = ("eval", "gate", "train", "apply", "help")
ALLOWED = ("admin", "write")  # the API's legacy permission: maintain is reported as write
HELP = (
    "**skillopt-ci commands** — the first line of a pull-request comment:\n\n"
    "- `/skillopt eval [skill]` — evaluate this pull request's skills (all configured, or one) "
    "and show each beside the default branch's last score\n"
    "- `/skillopt gate` — run the gate: every changed skill, base against head\n"
    "- `/skillopt train [skill]` — train from this pull request's skills; what improves is posted as a "
    "review whose suggestions you can accept line by line (not for pull requests from forks)\n"
    "- `/skillopt apply` — commit the last trained skill of this pull request to its branch, exactly "
    "as it was validated, and run the gate on the new head (not for pull requests from forks)\n"
    "- `/skillopt help` — this text\n\n"
    "Commands run for users with write, maintain or admin permission on the repository. On a pull "
    "request from a fork only the skill documents are used (text files of a configured skill, outside "
    "its `scripts/`), on the base branch's configuration, suites and scorers; a fork that changes the "
    "configuration, a suite folder or a skill's `scripts/` is refused.\n"
)


@dataclass(frozen=True)
class Request:
    """One parsed command: ``mode`` (eval, gate, train, help) and an optional skill name."""

    mode: str
    skill: str | None = None


class BadCommand(ValueError):
    """A comment that starts with /skillopt but is not a valid command; the message says why."""


def parse_command(body: str) -> Request | None:
    """The command on the first non-empty line of ``body``; None when it is not a command.
    Raises :class:`BadCommand` for an unknown subcommand or a wrong number of words."""
    first = next((line.strip() for line in (body or "").splitlines() if line.strip()), "")
    words = first.split()
    if not words or words[0] != PREFIX:
        return None
    if len(words) == 1:
        raise BadCommand(f"`{PREFIX}` needs a subcommand")
    mode, args = words[1], words[2:]
    if mode not in SUBCOMMANDS:
        raise BadCommand(f"unknown subcommand {code_span(mode, 40)}")
    takes = 1 if mode in ("eval", "train") else 0
    if len(args) > takes:
        raise BadCommand(f"`{PREFIX} {mode}` takes {'at most one skill' if takes else 'no arguments'}, "
                         f"got {code_span(' '.join(args), 80)}")
    return Request(mode, args[0] if args else None)


def _reply(ctx: Context, number: int, text: str) -> None:
    if ctx.settings.token:
        publisher = ctx.publisher_factory(ctx.settings)
        ctx.publish(lambda: publisher.reply(number, text))


def _ignore(ctx: Context, why: str) -> int:
    print(f"skillopt-ci: {why}; nothing to do", file=ctx.out, flush=True)
    ctx.outputs["verdict"] = "ignored"
    return EXIT_OK


def _refuse(ctx: Context, number: int, login: str, why: str) -> int:
    command("notice", why, stream=ctx.out, title="skillopt-ci refused a command")
    ctx.summary(f"## skillopt-ci: command refused\n\n{escape_inline(why, 2000)}\n")
    _reply(ctx, number, f"@{escape_inline(login, 60)} {why}")
    ctx.outputs["verdict"] = "refused"
    return EXIT_OK


def command_flow(ctx: Context) -> int:
    """An ``issue_comment`` event: steps 1–7 of the module docstring."""
    event = ctx.settings.event
    issue, comment = event.get("issue") or {}, event.get("comment") or {}
    user = comment.get("user") or {}
    login = str(user.get("login") or "")
    if not issue.get("pull_request"):
        return _ignore(ctx, "the comment is not on a pull request")
    if event.get("action", "created") != "created":
        return _ignore(ctx, f"the comment was {event.get('action')}, not created")
    if user.get("type") == "Bot" or login.endswith("[bot]"):
        return _ignore(ctx, "the comment is a bot's")
    number = int(issue["number"])
    try:
        request = parse_command(str(comment.get("body") or ""))
    except BadCommand as exc:
        request, problem = None, str(exc)
    else:
        if request is None:
            return _ignore(ctx, f"the comment is not a {PREFIX} command")
        problem = ""
    if request is not None and request.mode == "help":
        _reply(ctx, number, HELP)
        ctx.outputs["verdict"] = "help"
        return EXIT_OK
    if not ctx.settings.token:
        raise InputError("a /skillopt command needs a token to read the commenter's permission",
                         hint="pass token: ${{ github.token }} to the action")
    publisher = ctx.publisher_factory(ctx.settings)
    try:
        return _checked(ctx, publisher, number, login, request, problem)
    except PublishError as exc:  # without the API's answers nothing may run
        raise RuntimeFailure(f"{exc}; nothing was run") from None


def _checked(ctx: Context, publisher: Publisher, number: int, login: str, request: Request | None,
             problem: str) -> int:
    permission = publisher.permission(login)
    if permission not in ALLOWED:
        return _refuse(ctx, number, login, f"`{PREFIX}` commands run only for users with write, maintain or admin "
                       f"permission on {escape_inline(ctx.settings.repository, 140)} (yours: {permission}). "
                       "Nothing was run.")
    if request is None:
        return _usage(ctx, number, problem)
    return _run_request(ctx, publisher, number, login, request)


def _usage(ctx: Context, number: int, problem: str) -> int:
    command("error", problem, stream=ctx.out, title="skillopt-ci: not a valid command")
    ctx.summary(f"## skillopt-ci: not a valid command\n\n{escape_inline(problem, 500)}\n\n{HELP}")
    _reply(ctx, number, f"{problem}. Nothing was run.\n\n{HELP}")
    ctx.outputs["verdict"] = "error"
    return EXIT_INPUT


def _run_request(ctx: Context, publisher: Publisher, number: int, login: str, request: Request) -> int:
    pull = publisher.pull_request(number)
    pr = _pull_record(pull)
    if pull.state != "open":
        return _refuse(ctx, number, login, f"#{number} is {pull.state}; commands run on open pull requests only.")
    git = Git(ctx.settings.workspace)
    if pr.fork:
        if request.mode in ("train", "apply"):
            return _refuse(ctx, number, login, TRAIN_FORK if request.mode == "train" else apply_flow.APPLY_FORK)
        refusal = _check_out_documents(ctx, git, pr)
        if refusal:
            return _refuse(ctx, number, login, refusal)
    else:
        checkout_head(git, number, pr.head_sha)
    config = _config(ctx)  # the head's for this repository's branches; the base's for a fork
    if request.skill is not None and config.skill(request.skill) is None:
        names = ", ".join(code_span(e.name, 60) for e in config.skills)
        return _usage(ctx, number, f"no configured skill named {code_span(request.skill, 60)} (configured: {names})")
    ctx.settings = replace(ctx.settings, event={"pull_request": _event_pull(pr, pull.base.repo.full_name)},
                           skills=(request.skill,) if request.skill else ctx.settings.skills)
    command("notice", f"{PREFIX} {request.mode} by {login} on #{number} at {pr.head_sha[:7]}", stream=ctx.out,
            title="skillopt-ci command")
    if request.mode == "gate":
        return gate_flow(ctx)  # it answers a failure in the sticky comment itself
    try:
        if request.mode == "apply":
            return _apply(ctx, git, pr, login)
        if request.mode == "train":
            from skillopt_ci.github.suggest_flow import train_on_pull

            return train_on_pull(ctx, publisher, pr)
        return eval_command(ctx, publisher, config, pr)
    except SkilloptError as exc:  # no comment may stay at "evaluating…"
        if request.mode == "apply":  # the gate answers for itself; say what became of the command
            applied = ctx.outputs.get("applied-commit")
            done = f"`{applied[:7]}` was pushed to the branch, but " if applied else "nothing was pushed: "
            _reply(ctx, number, f"@{escape_inline(login, 60)} `/skillopt apply`: {done}"
                   f"{escape_inline(str(exc), 1000)}")
            raise
        if ctx.settings.comment:
            body = f"{marker(request.mode, pr.head_sha)}\n## skillopt-ci {request.mode}: 💥 could not run\n\n{escape_inline(str(exc), 2000)}\n"
            post_sticky(ctx, publisher, number, body)
        raise


TRAIN_FORK = ("training is not run for pull requests from forks: it would train on the fork's changes with this "
              "repository's secrets and push a branch. Nothing was run.")


def _check_out_documents(ctx: Context, git: Git, pr: PullRequest) -> str | None:
    """A fork's head, as the trust model allows it (:mod:`skillopt_ci.gate.trust`): fetch its
    objects (never check them out), classify every path it changed against the base branch's
    configuration and suites, and check out the base commit with the fork's skill documents (and
    the task files of suites that accept them) in place.
    Returns why the command is refused, or None when that data is on disk."""
    fetch_pull_head(git, pr.number, pr.head_sha)
    base = trusted_base(git, pr)
    layout = TrustedLayout.of(load_config(ctx.settings.workspace / ctx.settings.config,
                                          display=ctx.settings.config), ctx.settings.config, git.top_level(),
                              read=lambda path: git.show(base, path))  # fork_tasks: the base's suite.yaml
    plan = plan_untrusted(git, layout, git.merge_base(base, pr.head_sha), pr.head_sha)
    if plan.refused:
        return ("this pull request comes from a fork and changes files that select or are code, which only this "
                "repository's own branches may change:\n\n" + refusal_text(plan.refused) + "\n\nFrom a fork only "
                "skill documents, and the task files of suites whose suite.yaml on the base branch sets "
                "`fork_tasks: true`, are evaluated (with the base branch's configuration, suites and scorers). "
                "Nothing was run; a maintainer can push the branch to this repository to evaluate it.")
    evaluated = trusted_head(git, base, plan, pr.head_sha)
    git.checkout_detached(evaluated)
    ctx.evaluated_head = evaluated
    policy.mark_untrusted(f"pull request #{pr.number} comes from a fork")  # no command runs unisolated
    used = [f"the {what} ({', '.join(code_span(p, 120) for p in paths)})"
            for what, paths in (("skill documents", plan.documents), ("task files", plan.tasks)) if paths]
    ctx.trust_note = (f"From this fork only {' and '.join(used) or 'the skill documents (none)'} were used, "
                      f"on the base branch's configuration, suites and scorers at `{base[:7]}`"
                      + (f"; {len(plan.ignored)} other changed file(s) were not used." if plan.ignored else "."))
    ctx.summary(f"### Pull request from a fork\n\n{ctx.trust_note}\n")
    return None


def trusted_base(git: Git, pr: PullRequest) -> str:
    """The pull request's base commit, checked to be on the base repository's branch (fetched
    from ``origin``, which is the base repository): the tree a fork is evaluated on."""
    if not pr.base_ref or pr.base_ref.startswith("-") or ".." in pr.base_ref:
        raise RuntimeFailure(f"pull request #{pr.number} has no usable base branch ({pr.base_ref!r}); nothing was run")
    git.fetch("origin", f"+refs/heads/{pr.base_ref}:refs/remotes/origin/{pr.base_ref}")
    branch = git.resolve(f"refs/remotes/origin/{pr.base_ref}")
    if not git.is_ancestor(pr.base_sha, branch):
        raise RuntimeFailure(f"the base commit {pr.base_sha[:7]} of #{pr.number} is not on origin's "
                             f"{pr.base_ref}; nothing was run", hint="comment the command again")
    return pr.base_sha


def _pull_record(pull: Any) -> PullRequest:
    head_repo = pull.head.repo.full_name if pull.head.repo is not None else None
    return PullRequest(number=pull.number, head_sha=pull.head.sha, base_sha=pull.base.sha, head_ref=pull.head.ref,
                       base_ref=pull.base.ref, labels=tuple(label.name for label in pull.labels),
                       fork=head_repo != pull.base.repo.full_name, head_repo=head_repo)


def _event_pull(pr: PullRequest, base_repo: str) -> dict[str, Any]:
    """The pull request as a ``pull_request`` event would carry it."""
    return {"number": pr.number, "labels": [{"name": name} for name in pr.labels],
            "head": {"sha": pr.head_sha, "ref": pr.head_ref,
                     "repo": {"full_name": pr.head_repo} if pr.head_repo else None},
            "base": {"sha": pr.base_sha, "ref": pr.base_ref, "repo": {"full_name": base_repo}}}


def fetch_pull_head(git: Git, number: int, head_sha: str) -> None:
    """Fetch ``refs/pull/N/head`` from origin (objects only); it must be ``head_sha``, the head the
    checks saw, else the pull request moved meanwhile and nothing runs."""
    git.fetch("origin", f"+refs/pull/{number}/head:refs/remotes/origin/pull/{number}/head")
    fetched = git.resolve(f"refs/remotes/origin/pull/{number}/head")
    if fetched != head_sha:
        raise RuntimeFailure(f"pull request #{number} moved to {fetched[:7]} while the command was checked "
                             f"(checked {head_sha[:7]}); nothing was run", hint="comment the command again")


def checkout_head(git: Git, number: int, head_sha: str) -> None:
    """A pull request from this repository: its head, fetched and checked out detached."""
    fetch_pull_head(git, number, head_sha)
    git.checkout_detached(head_sha)


def eval_command(ctx: Context, publisher: Publisher, config: Config, pr: PullRequest) -> int:
    """``/skillopt eval``: the head's skills beside the default branch's last score."""
    from skillopt_ci.github.context import selected_skills

    s = ctx.settings
    entries = selected_skills(config, s.skills)
    reason = missing_key(config, ("target", "judge"))
    if reason:
        return skip(ctx, "No model key", f"{reason}. Nothing was evaluated.")
    names = ", ".join(code_span(e.name, 60) for e in entries)
    if s.comment:
        post_sticky(ctx, publisher, pr.number, f"{marker('eval', pr.head_sha)}\n## skillopt-ci eval: ⏳ evaluating…\n\n"
                    f"Evaluating {names} at `{pr.head_sha[:7]}`.\n")
    stored = trend.stored_scores(ctx)
    default_ref = s.sha or pr.base_sha
    with EvalSession(config, **ctx.session_options) as session:
        summaries, failed, worth = trend.evaluate_entries(ctx, config, session, entries, f"pr{pr.number}")
        notes = trend.notes_of(worth, failed)
        rows = []
        for entry, summary in zip(entries, summaries, strict=True):
            last = stored.get(entry.name)
            if last is None:
                out = config.runs_dir / run_dir_name("default-branch", entry.name, default_ref[:12])
                ctx.run_dirs.append(out)
                last = trend.recompute(config, session, entry, Git(s.workspace), default_ref, out)
            rows.append((entry.name, summary, last, "not on the default branch"))
    mark = "❌" if failed else "✅"
    body = (f"## skillopt-ci eval: {mark} {len(summaries)} skill(s) at `{pr.head_sha[:7]}`\n\n"
            f"{trend.trend_table(rows)}\n{notes}\n" + (f"\n[Workflow run]({s.run_url})\n" if s.run_url else "")
            + _trust_line(ctx))
    ctx.summary(body)
    if s.comment:
        url = post_sticky(ctx, publisher, pr.number, f"{marker('eval', pr.head_sha)}\n{body}")
        if url:
            ctx.outputs["comment-url"] = url
    ctx.outputs["verdict"] = "failed" if failed else "passed"
    return EXIT_FAILED if failed and s.fail else EXIT_OK


def _apply(ctx: Context, git: Git, pr: PullRequest, login: str) -> int:
    """``/skillopt apply``: the stored trained skill onto the branch, then the gate on the new head."""
    stored = apply_flow.read_stored(git, pr.number)
    if stored is None:
        return _refuse(ctx, pr.number, login, f"no trained skill is waiting for #{pr.number}: comment "
                       "`/skillopt train` first (a trained skill is kept until it is applied). Nothing was changed.")
    why = apply_flow.stale_or_altered(git, _config(ctx), stored, pr) or apply_flow.apply_stored(git, stored, pr)
    if why:
        return _refuse(ctx, pr.number, login, why)
    git.checkout_detached(stored.commit)
    ctx.trust_note = apply_flow.applied_note(stored, login, ctx.settings.run_url)
    base_repo = ctx.settings.event["pull_request"]["base"]["repo"]["full_name"]
    ctx.settings = replace(ctx.settings, event={"pull_request": _event_pull(replace(pr, head_sha=stored.commit),
                                                                             base_repo)})
    ctx.outputs["applied-commit"] = stored.commit
    command("notice", f"applied {stored.commit[:7]} to {pr.head_ref}; running the gate on it", stream=ctx.out,
            title="skillopt-ci apply")
    return gate_flow(ctx)
