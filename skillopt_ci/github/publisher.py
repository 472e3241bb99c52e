"""Everything the Action says to GitHub, through PyGithub (imported here, lazily, and nowhere else).

- One sticky comment per pull request and kind (``gate``, ``eval``, ``train``), found by its
  hidden marker at the very start of a bot's comment, edited in place. The marker records the
  kind and the head commit the comment is about: ``<!-- skillopt-ci:gate head=<sha> -->``.
  Untrusted text never contains ``<!--`` (see :mod:`markdown`), so it can never carry a marker.
- **The newest push wins.** Before writing, :meth:`Publisher.upsert_comment` re-reads the pull
  request's head from the API. When it is still the head the comment is about, the newest comment
  of that kind is edited (or one is created) and every other comment of that kind is deleted, so
  there is never more than one. When the head has moved on, this run's result is outdated: it may
  only edit a comment of its kind written for its own head (its own "evaluating…" note, which then
  says it is outdated); it never creates one and never touches one for any other head — that is the
  newer push's, or an older one a newer run will replace. It is left alone and :class:`Sticky`
  says why. Comments from before markers recorded a head count as older than any head.
- A check run on the PR's head commit, with annotations sent 50 per request (GitHub's limit).
- Every call is retried per a :class:`RetryPolicy` (5xx, dropped connections, the secondary rate
  limit; see :mod:`skillopt_ci.github.retry`). A failure that remains becomes a
  :class:`PublishError` with one actionable sentence (which permission is missing, what was not
  found, when the rate limit resets) and ``permission`` set when one would fix it; the caller decides.
- When the sticky comment cannot be edited (a 403 on PATCH), the new text is posted as a new
  comment and the stale one is deleted if GitHub allows, so no comment stays at "evaluating…".
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from skillopt_ci.core.redact import redact_args
from skillopt_ci.github.retry import RetryPolicy, call_with_retry

T = TypeVar("T")
KINDS = ("gate", "eval", "train")
MARKER = "<!-- skillopt-ci:gate"  # how every gate comment starts (``marker("gate", sha)``, or an old one)
_MARKER_RE = re.compile(r"<!-- skillopt-ci:(gate|eval|train)(?: head=([0-9a-f]{7,64}))? -->")
COMMENT_LIMIT = 65_536
CHECK_NAME = "skillopt-ci gate"
CHECK_TEXT_LIMIT = 65_535
ANNOTATIONS_PER_REQUEST = 50


def marker(kind: str, head_sha: str) -> str:
    """The hidden first line of the sticky comment of ``kind`` about commit ``head_sha``."""
    if kind not in KINDS or not re.fullmatch(r"[0-9a-f]{7,64}", head_sha):
        raise ValueError(f"no sticky comment of kind {kind!r} for head {head_sha!r}")
    return f"<!-- skillopt-ci:{kind} head={head_sha} -->"


def read_marker(body: str) -> tuple[str, str | None] | None:
    """(kind, head or None for an old marker) of a body that starts with a marker, else None."""
    found = _MARKER_RE.match(body or "")
    return (found.group(1), found.group(2)) if found else None


@dataclass(frozen=True)
class Sticky:
    """What :meth:`Publisher.upsert_comment` did: ``url`` of the comment written (None when none
    was), and ``held``: why the comment was left alone (a newer push's), else None."""

    url: str | None
    held: str | None = None


class PublishError(Exception):
    """A GitHub API call failed; ``str()`` says what to do about it. ``permission`` names the
    workflow permission that would fix it (e.g. ``checks: write``) when that is the cause."""

    def __init__(self, message: str, permission: str | None = None):
        super().__init__(message)
        self.permission = permission


@dataclass(frozen=True)
class Annotation:
    path: str
    message: str
    title: str
    level: str = "failure"  # notice | warning | failure
    line: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "start_line": self.line, "end_line": self.line,
                "annotation_level": self.level, "message": self.message[:1000], "title": self.title[:255]}


def explain(exc: Exception, doing: str, forbidden: tuple[str, str] | None = None) -> PublishError:
    """Turn a PyGithub exception into one sentence naming the fix; ``forbidden`` is the caller's
    own (fix, permission) for a 403, when it knows better than the default."""
    from github import GithubException, RateLimitExceededException

    if isinstance(exc, RateLimitExceededException):
        return PublishError(f"{doing}: GitHub API rate limit exceeded; re-run the job later")
    if isinstance(exc, GithubException):
        message = exc.data.get("message", "") if isinstance(exc.data, dict) else str(exc.data or "")
        if exc.status == 401:
            return PublishError(f"{doing}: the token was refused (401); pass token: ${{{{ github.token }}}} to the action")
        if exc.status == 403 and forbidden:  # the caller's fix; a body that is no object says nothing here
            return PublishError(f"{doing}: 403 {message if isinstance(exc.data, dict) else ''}; {forbidden[0]}",
                                permission=forbidden[1])
        if exc.status == 403:
            need = ("checks: write" if "check" in doing else
                    "pull-requests: read" if doing.startswith(("reading", "listing")) else "pull-requests: write")
            return PublishError(f"{doing}: 403 {message}; give the workflow `permissions: {need}` "
                                "(fork pull requests never get write access)", permission=need)
        if exc.status == 404:
            return PublishError(f"{doing}: 404 {message}; check the repository and pull request number")
        return PublishError(f"{doing}: GitHub answered {exc.status} {message}")
    return PublishError(f"{doing}: {type(exc).__name__}: {exc}")


def github_call(retry: RetryPolicy, doing: str, fn: Callable[..., T], *args: Any,
                forbidden: tuple[str, str] | None = None, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, retried per ``retry``; a failure that remains becomes a
    :class:`PublishError` (:func:`explain`; ``forbidden`` is its fix for a 403)."""
    from github import GithubException

    try:
        return call_with_retry(retry, fn, *args, **kwargs)
    except GithubException as exc:
        raise explain(exc, doing, forbidden) from None
    except OSError as exc:
        raise PublishError(f"{doing}: cannot reach GitHub ({type(exc).__name__})") from None


class Publisher:
    """A repository on GitHub (or GitHub Enterprise: ``api_url`` is ``GITHUB_API_URL``)."""

    def __init__(self, token: str, api_url: str, repository: str, *, throttle: bool = True,
                 retry: RetryPolicy | None = None):
        from github import Auth, Github

        kwargs: dict[str, Any] = {}
        if not throttle:  # local fakes: PyGithub's default pauses would only slow the tests
            kwargs = {"retry": None, "seconds_between_requests": None, "seconds_between_writes": None}
        self._gh = Github(auth=Auth.Token(token), base_url=api_url, timeout=30, **kwargs)
        self._repository = repository
        self._repo: Any = None
        self.retry = retry or RetryPolicy()

    def _call(self, doing: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return github_call(self.retry, doing, fn, *args, **kwargs)

    @property
    def repo(self) -> Any:
        if self._repo is None:
            self._repo = self._call("reading the repository", self._gh.get_repo, self._repository)
        return self._repo

    def labels(self, number: int) -> list[str]:
        issue = self._call("reading the pull request", self.repo.get_issue, number)
        return [label.name for label in self._call("reading labels", lambda: list(issue.get_labels()))]

    @redact_args
    def upsert_comment(self, number: int, body: str, *, create: bool = True) -> Sticky:
        """Write the sticky comment ``body``, which starts with :func:`marker` (its kind and head),
        under the rule of the module docstring; ``create`` false only edits an existing one."""
        kind, ours = read_marker(body) or ("", None)
        if ours is None:
            raise ValueError("a sticky comment's body starts with marker(kind, head_sha)")
        current = self._call("reading the pull request", self.repo.get_pull, number).head.sha
        issue = self._call("reading the pull request", self.repo.get_issue, number)
        comments = self._call("listing comments", lambda: list(issue.get_comments()))
        marked = [(c, read_marker(c.body or "")) for c in comments if getattr(c.user, "type", "") == "Bot"]
        mine = [(c, m[1]) for c, m in marked if m is not None and m[0] == kind]
        if current != ours:
            return self._outdated(body, ours, current, [c for c, head in mine if head == ours])
        if not mine and not create:
            return Sticky(None)
        if not mine:
            return Sticky(self._call("commenting on the pull request", issue.create_comment, body).html_url)
        target = mine[-1][0]  # the newest: the one concurrent runs for this head also choose
        for stale, _ in mine[:-1]:
            with contextlib.suppress(PublishError):  # a duplicate left behind only repeats the older text
                self._call("deleting a duplicate comment", stale.delete)
        try:
            self._call("editing the comment", target.edit, body)
            return Sticky(target.html_url)
        except PublishError as exc:
            return Sticky(self._replace_comment(issue, target, body, exc))

    def _outdated(self, body: str, ours: str, current: str, own: list[Any]) -> Sticky:
        """The pull request moved to ``current`` after ``ours``: only this head's own comment is
        updated (so it never stays at "evaluating…"), marked outdated; anything else is held."""
        if not own:
            return Sticky(None, held=f"the pull request's head is now {current[:7]}, so this result for "
                                     f"{ours[:7]} was not posted: the comment is left to the newer push's run")
        first, _, rest = body.partition("\n")
        note = (f"> ⚠️ Outdated: this is the result for `{ours[:7]}`; the pull request has moved to "
                f"`{current[:7]}` since, and that push's run updates its own comment.\n\n")
        text = f"{first}\n{note}{rest}" if len(body) + len(note) + 1 <= COMMENT_LIMIT else body
        self._call("editing the comment", own[-1].edit, text)
        return Sticky(own[-1].html_url, held=f"the pull request's head is now {current[:7]}; only this run's own "
                                             f"comment for {ours[:7]} was updated, marked outdated")

    def _replace_comment(self, issue: Any, stale: Any, body: str, why: PublishError) -> str:
        """Post ``body`` as a new comment because ``stale`` could not be edited, then delete
        ``stale`` if GitHub lets us. Raises :class:`PublishError` (naming the edit failure too)
        only when the new comment cannot be posted either; the URL is the new comment's."""
        try:
            comment = self._call("commenting on the pull request", issue.create_comment, body)
        except PublishError as exc:
            raise PublishError(f"{why}; then {exc}", permission=exc.permission or why.permission) from None
        with contextlib.suppress(PublishError):  # if it stays, the new comment below it has the result
            self._call("deleting the outdated comment", stale.delete)
        return comment.html_url

    @redact_args
    def check_run(self, head_sha: str, *, conclusion: str, title: str, summary: str,
                  annotations: list[Annotation], details_url: str | None = None) -> str:
        """A completed check run on ``head_sha``; returns its URL."""
        first, rest = annotations[:ANNOTATIONS_PER_REQUEST], annotations[ANNOTATIONS_PER_REQUEST:]
        output = {"title": title[:255], "summary": summary[:CHECK_TEXT_LIMIT],
                  "annotations": [a.to_dict() for a in first]}
        kwargs: dict[str, Any] = {"name": CHECK_NAME, "head_sha": head_sha, "status": "completed",
                                  "conclusion": conclusion, "output": output}
        if details_url:
            kwargs["details_url"] = details_url
        run = self._call("creating the check run", self.repo.create_check_run, **kwargs)
        while rest:
            chunk, rest = rest[:ANNOTATIONS_PER_REQUEST], rest[ANNOTATIONS_PER_REQUEST:]
            self._call("adding check annotations", run.edit,
                       output={"title": title[:255], "summary": summary[:CHECK_TEXT_LIMIT],
                               "annotations": [a.to_dict() for a in chunk]})
        return run.html_url

    # ---- reviewer commands (issue_comment) ------------------------------------------------
    def permission(self, login: str) -> str:
        """``login``'s permission on the repository as GitHub states it: admin, write, read or
        none (maintain counts as write, triage as read). A user GitHub does not know is none."""
        from github import UnknownObjectException

        repo = self.repo

        def ask() -> str:
            try:
                return str(repo.get_collaborator_permission(login))
            except UnknownObjectException:  # not retried either way: a 404
                return "none"

        return self._call("reading the commenter's permission", ask)

    def pull_request(self, number: int) -> Any:
        """The pull request ``number`` as the API has it now (head, base, their repositories)."""
        return self._call("reading the pull request", self.repo.get_pull, number)

    @redact_args
    def reply(self, number: int, body: str) -> str:
        """A plain (non-sticky) comment on the pull request; returns its URL."""
        issue = self._call("reading the pull request", self.repo.get_issue, number)
        return self._call("commenting on the pull request", issue.create_comment, body).html_url

    # ---- trained edits as a review (/skillopt train on a pull request) ---------------------
    def file_patch(self, number: int, path: str) -> str | None:
        """The unified patch GitHub shows for ``path`` in the pull request (the lines a review
        comment may sit on), or None when the file is not in its diff or has no patch."""
        pull = self.pull_request(number)
        files = self._call("listing the pull request's files", lambda: list(pull.get_files()))
        return next((f.patch for f in files if f.filename == path), None)

    @redact_args
    def review(self, number: int, head_sha: str, body: str, comments: list[dict[str, Any]]) -> str:
        """A review on ``head_sha`` that only comments (it neither approves nor requests changes),
        with line ``comments`` (path, line, side, optional start_line, body); its URL."""
        pull = self.pull_request(number)
        commit = self._call("reading the head commit", self.repo.get_commit, head_sha)
        return self._call("posting the review", pull.create_review, commit=commit, body=body, event="COMMENT",
                          comments=comments).html_url

    def prune_branches(self, prefix: str, number_of: Callable[[str], int | None]) -> list[str]:
        """Delete the branches under ``prefix`` that belong to a pull request that is closed
        (``number_of`` reads its number from the branch name); the branches deleted."""
        refs = self._call("listing branches", lambda: list(self.repo.get_git_matching_refs(f"heads/{prefix}")))
        deleted = []
        for ref in refs:
            branch = ref.ref.removeprefix("refs/heads/")
            number = number_of(branch)
            if number is not None and self.pull_request(number).state == "closed":
                self._call("deleting a branch", ref.delete, forbidden=(
                    "give the workflow `permissions: contents: write`", "contents: write"))
                deleted.append(branch)
        return deleted
