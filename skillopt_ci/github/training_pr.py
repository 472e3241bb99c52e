"""Propose a trained skill as a pull request: one commit, one branch, one PR, updated in place.

The commit is built with the git data API on top of the default branch's head and changes exactly
one file, the skill of the run (its path is validated: whatever a model wrote, nothing else can
change). The branch ``skillopt/train/<skill>`` belongs to skillopt-ci: it is force-moved on every
run, so the PR always shows one commit on today's default branch. An open PR from that branch is
edited (title, body); otherwise one is created. Labels are created when missing. A completed check
run ``skillopt-ci train`` carries the scores, because pull requests opened with the Actions token
trigger no workflows. Nothing here merges or enables auto-merge.

Every step is retried per the publisher's :class:`RetryPolicy` (5xx, dropped connections, the
secondary rate limit). GitHub failures become :class:`PublishError` with the fix in one sentence
and the permission to add. A failure after the PR exists (labels, check run) is a
:class:`TrainingPRIncomplete`, which still carries the PR.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from skillopt_ci.core.redact import redact_args
from skillopt_ci.github.publisher import Publisher, PublishError, github_call

CHECK_NAME = "skillopt-ci train"
LABELS = {
    "skillopt": ("5319e7", "Skill changes proposed by skillopt-ci"),
    "automated": ("ededed", "Opened by automation"),
}
DEFAULT_LABEL = ("c5def5", "Added by skillopt-ci")
# what a 403 on a step means: (the fix in the error's sentence, the permission it names)
CONTENTS = ("give the workflow `permissions: contents: write`", "contents: write")
PULLS = ("give the workflow `permissions: pull-requests: write`", "pull-requests: write")
CREATE_PULL = ("allow GitHub Actions to create pull requests in the repository settings (Settings → "
               "Actions → General → Workflow permissions → \"Allow GitHub Actions to create and approve "
               "pull requests\"), and give the workflow `contents: write` and `pull-requests: write`",
               "pull-requests: write")
CHECKS = ("give the workflow `permissions: checks: write`", "checks: write")
_BRANCH_RE = re.compile(r"[A-Za-z0-9._/-]+")


@dataclass(frozen=True)
class TrainingPullRequest:
    """What :func:`propose_training_pr` did. When the default branch already holds the trained
    text nothing is proposed: ``number``, ``url`` and ``head_sha`` are None and ``created`` and
    ``updated`` are false (``proposed`` says which case it is)."""

    number: int | None
    url: str | None
    branch: str
    head_sha: str | None
    created: bool
    updated: bool

    @property
    def proposed(self) -> bool:
        return self.number is not None


class TrainingPRIncomplete(PublishError):
    """The pull request was opened or updated, but a later step (labels, check run) failed."""

    def __init__(self, message: str, pull_request: TrainingPullRequest, permission: str | None = None):
        super().__init__(message, permission)
        self.pull_request = pull_request


def check_skill_path(path: str) -> str:
    """``path`` if it is a plain relative POSIX path of a file inside the repository, else
    ``ValueError``: no leading ``/``, no ``.``/``..``/empty segments, no backslash or control
    character, nothing inside ``.git`` (or its NTFS/8.3 aliases), no git metadata files
    (``.gitmodules``, ``.gitattributes``) and nothing under ``.github/workflows``."""
    if not isinstance(path, str) or not path.strip():
        raise ValueError("skill path is empty")
    if any(ord(c) < 32 or c in "\\\x7f" for c in path):
        raise ValueError(f"skill path {path!r} has a backslash or a control character")
    if path.startswith("/") or re.match(r"[A-Za-z]:", path):
        raise ValueError(f"skill path {path!r} is absolute; give it relative to the repository root")
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"skill path {path!r} is not a plain relative path (no '..', '.', '//' or trailing '/')")
    for p in parts:
        if p.lower().rstrip(". ") in (".git", "git~1") or p.lower() in (".gitmodules", ".gitattributes"):
            raise ValueError(f"skill path {path!r} points into git's own files")
    if path.lower().startswith(".github/workflows/"):
        raise ValueError(f"skill path {path!r} is a workflow file; a skill must not change workflows")
    return path


def check_branch(branch: str, default_branch: str | None = None) -> str:
    """``branch`` if it is a plain branch name (not ``refs/...``) other than the default branch."""
    bad = (not _BRANCH_RE.fullmatch(branch or "") or branch.startswith(("/", "refs/", "-"))
           or branch.endswith(("/", ".", ".lock")) or ".." in branch or "//" in branch
           or any(p.startswith(".") for p in branch.split("/")))
    if bad:
        raise ValueError(f"branch {branch!r} is not a plain branch name like skillopt/train/<skill>")
    if default_branch is not None and branch == default_branch:
        raise ValueError(f"branch {branch!r} is the default branch; training proposes on its own branch")
    return branch


def git_blob_sha(data: bytes) -> str:
    """The SHA git gives a blob with ``data``: how a file's content is compared without reading it."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _status(exc: Exception) -> int | None:
    return getattr(exc, "status", None)


class TrainingProposer:
    """The steps of :func:`propose_training_pr` over one PyGithub repository."""

    def __init__(self, repo: Any):
        self.repo = repo
        self.default = repo.default_branch
        self.owner = repo.owner.login

    def head_of(self, branch: str) -> tuple[Any, str] | None:
        """(ref, sha) of ``branch``, None if it does not exist (eager or lazy ``get_git_ref``)."""
        from github import UnknownObjectException

        try:
            ref = self.repo.get_git_ref(f"heads/{branch}")
            return ref, ref.object.sha
        except UnknownObjectException:
            return None

    def file_blob(self, path: str, ref: str) -> str | None:
        """The blob SHA of ``path`` at ``ref``; None when there is no such file."""
        from github import UnknownObjectException

        try:
            content = self.repo.get_contents(path, ref=ref)
        except UnknownObjectException:
            return None
        if isinstance(content, list) or content.type != "file":
            raise ValueError(f"{path} is not a regular file on {self.default}")
        return str(content.sha)

    def commit(self, base: Any, path: str, text: str, message: str, current: tuple[Any, str] | None) -> str:
        """The one-file commit on ``base``; reuses the branch head when it is that very commit."""
        from github import InputGitTreeElement

        blob = self.repo.create_git_blob(text, "utf-8")
        tree = self.repo.create_git_tree([InputGitTreeElement(path, "100644", "blob", sha=blob.sha)], base.tree)
        if current is not None:
            head = self.repo.get_git_commit(current[1])
            if head.tree.sha == tree.sha and [p.sha for p in head.parents] == [base.sha]:
                return head.sha
        return self.repo.create_git_commit(message, tree, [base]).sha

    def move_branch(self, branch: str, sha: str, current: tuple[Any, str] | None) -> None:
        from github import GithubException

        if current is not None:
            if current[1] != sha:
                current[0].edit(sha, force=True)
            return
        try:
            self.repo.create_git_ref(f"refs/heads/{branch}", sha)
        except GithubException as exc:  # created meanwhile (a concurrent run): move it instead
            again = self.head_of(branch) if _status(exc) == 422 else None
            if again is None:
                raise
            again[0].edit(sha, force=True)

    def open_pull(self, branch: str) -> Any | None:
        pulls = list(self.repo.get_pulls(state="open", head=f"{self.owner}:{branch}", base=self.default))
        return pulls[0] if pulls else None

    def ensure_labels(self, names: Sequence[str]) -> None:
        from github import GithubException

        existing = {label.name.lower() for label in self.repo.get_labels()}
        for name in names:
            if name.lower() in existing:
                continue
            color, description = LABELS.get(name, DEFAULT_LABEL)
            try:
                self.repo.create_label(name, color, description)
            except GithubException as exc:
                if _status(exc) != 422:  # 422: created meanwhile, which is what we wanted
                    raise


@redact_args
def propose_training_pr(publisher: Publisher, *, skill_path: str, trained_text: str, title: str, body: str,
                        branch: str, labels: Sequence[str] = ("skillopt", "automated"), check_summary: str,
                        check_title: str, details_url: str | None = None,
                        commit_message: str | None = None) -> TrainingPullRequest:
    """Open or update the pull request proposing ``trained_text`` as ``skill_path``.

    ``ValueError`` (before any write) for an unsafe path or branch name or an empty text;
    :class:`PublishError` when GitHub refuses; :class:`TrainingPRIncomplete` when the PR exists
    but labels or the check run failed. Nothing is written when the default branch already holds
    ``trained_text`` (see :class:`TrainingPullRequest`)."""
    check_skill_path(skill_path)
    check_branch(branch)
    if not trained_text.strip():
        raise ValueError("the trained skill is empty; refusing to propose deleting its content")
    gh = TrainingProposer(publisher.repo)
    check_branch(branch, gh.default)
    repo = gh.repo
    call = partial(github_call, publisher.retry)

    ref = call(f"reading the default branch {gh.default}", repo.get_git_ref, f"heads/{gh.default}")
    base = call("reading the default branch's head commit", lambda: repo.get_git_commit(ref.object.sha))
    blob = call(f"reading {skill_path} on {gh.default}", gh.file_blob, skill_path, base.sha)
    if blob == git_blob_sha(trained_text.encode("utf-8")):
        return TrainingPullRequest(None, None, branch, None, created=False, updated=False)

    current = call(f"reading the branch {branch}", gh.head_of, branch)
    message = commit_message or f"{title}\n\nProposed by skillopt-ci; only {skill_path} changes."
    sha = call(f"committing {skill_path}", gh.commit, base, skill_path, trained_text, message, current,
                forbidden=CONTENTS)
    call(f"pushing the branch {branch}", gh.move_branch, branch, sha, current,
          forbidden=(f"{CONTENTS[0]} (and make sure no branch protection rule covers {branch})", CONTENTS[1]))

    pr = call("looking for the open training pull request", gh.open_pull, branch)
    created = pr is None
    if pr is None:
        pr, created = call("opening the pull request", _create_pull, gh, branch, title, body,
                            forbidden=CREATE_PULL)
    else:
        call(f"updating pull request #{pr.number}", pr.edit, title=title, body=body, forbidden=PULLS)
    result = TrainingPullRequest(pr.number, pr.html_url, branch, sha, created=created, updated=not created)

    problems = _label_and_check(call, gh, pr, sha, labels, check_title, check_summary, details_url)
    if problems:
        done = "opened" if created else "updated"
        needed = ", ".join(dict.fromkeys(p.permission for p in problems if p.permission)) or None
        raise TrainingPRIncomplete(f"pull request #{pr.number} was {done} ({pr.html_url}), but "
                                   + "; ".join(map(str, problems)), result, needed)
    return result


def _label_and_check(call: Callable[..., Any], gh: TrainingProposer, pr: Any, sha: str, labels: Sequence[str],
                     check_title: str, check_summary: str, details_url: str | None) -> list[PublishError]:
    """Label the pull request and add the passing check run to its commit; what failed, if anything
    (the pull request itself already exists, so these are reported, not raised)."""
    problems: list[PublishError] = []
    if labels:
        try:
            call("creating labels", gh.ensure_labels, list(labels), forbidden=PULLS)
            call(f"labelling pull request #{pr.number}", pr.add_to_labels, *labels, forbidden=PULLS)
        except PublishError as exc:
            problems.append(exc)
    output = {"title": check_title[:255], "summary": check_summary[:65_535]}
    extra = {"details_url": details_url} if details_url else {}
    try:
        call("creating the check run", gh.repo.create_check_run, name=CHECK_NAME, head_sha=sha, status="completed",
             conclusion="success", output=output, forbidden=CHECKS, **extra)
    except PublishError as exc:
        problems.append(exc)
    return problems


def _create_pull(gh: TrainingProposer, branch: str, title: str, body: str) -> tuple[Any, bool]:
    """(pull request, created): a 422 because one was opened meanwhile edits that one."""
    from github import GithubException

    try:
        return gh.repo.create_pull(base=gh.default, head=branch, title=title, body=body), True
    except GithubException as exc:
        found = gh.open_pull(branch) if _status(exc) == 422 else None
        if found is None:
            raise
    found.edit(title=title, body=body)
    return found, False
