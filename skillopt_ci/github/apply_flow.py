"""The trained skill of a pull request, stored by ``/skillopt train`` and committed by
``/skillopt apply``.

Training on a pull request (github/suggest_flow.py) builds one commit on the head it trained from:
the head's tree with each improved skill file replaced by the exact bytes that were validated, a
message naming the run and the scores, and one trailer per file (``Skillopt-Skill: <sha256>
<path>``). It is pushed to ``skillopt/suggest/pr-<N>``, a branch that belongs to skillopt-ci.

``/skillopt apply`` (a user with write permission, a pull request from this repository) takes that
commit onto the pull request's branch as a fast-forward, after checking that it is what training
stored: its parent is the pull request's head now (else the head moved since training and the
suggestion is stale), it changes only the files its trailers name, each a configured skill, and
each file's bytes have the recorded SHA-256. ``git push`` without force is the last check: if the
branch moved in between, git refuses. The gate then runs on the new head in the same job (a push
with the Actions token starts no workflow), and its comment and check run say that the applied
skill is the trained one.

A suggestion branch of a pull request closed without ``apply`` is deleted by the next nightly
training run (github/train_flow.py).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from skillopt_ci.core.errors import RuntimeFailure
from skillopt_ci.gate.git import Git
from skillopt_ci.github.settings import PullRequest
from skillopt_ci.inputs.config import Config
from skillopt_ci.render.markdown import code_span, escape_inline

BRANCH_PREFIX = "skillopt/suggest/pr-"
SKILL_TRAILER = "Skillopt-Skill"
RUN_TRAILER = "Skillopt-Run"
_SKILL_RE = re.compile(rf"^{SKILL_TRAILER}: ([0-9a-f]{{64}}) (.+)$", re.M)
_RUN_RE = re.compile(rf"^{RUN_TRAILER}: (.+)$", re.M)
PUSH_HINT = ("the job needs `permissions: contents: write` and actions/checkout's default "
             "`persist-credentials: true`")
APPLY_FORK = ("`/skillopt apply` does not push to a fork's branch: the fork's owner can take the suggestions "
              "in the review with GitHub's \"Commit suggestion\". Nothing was changed.")


def suggestion_branch(number: int) -> str:
    return f"{BRANCH_PREFIX}{number}"


def branch_number(branch: str) -> int | None:
    """The pull request a suggestion branch belongs to, or None for another branch."""
    tail = branch.removeprefix(BRANCH_PREFIX)
    return int(tail) if branch.startswith(BRANCH_PREFIX) and tail.isdigit() else None


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Stored:
    """The trained skill of a pull request as training stored it: its commit, the head it was
    trained on, ``{path: sha256}`` of the files it replaces, and the run that trained it."""

    commit: str
    parent: str
    files: dict[str, str]
    run: str


def suggestion_message(title: str, lines: list[str], files: dict[str, bytes], run: str) -> str:
    """The commit message: a title, the scores, and the trailers :func:`read_stored` checks."""
    trailers = [f"{SKILL_TRAILER}: {sha256(data)} {path}" for path, data in sorted(files.items())]
    return "\n".join([title, "", *lines, "", *trailers, f"{RUN_TRAILER}: {run}", ""])


def store(git: Git, pr: PullRequest, files: dict[str, bytes], message: str) -> tuple[str, str | None]:
    """Commit ``files`` on the pull request's head and push it to its suggestion branch (forced:
    the branch is ours and holds the last training only). (the commit, why the push failed or None)."""
    commit = git.commit_with(pr.head_sha, {path: git.write_blob(data) for path, data in files.items()}, message)
    problem = git.push("origin", f"+{commit}:refs/heads/{suggestion_branch(pr.number)}")
    return commit, problem


def read_stored(git: Git, number: int) -> Stored | None:
    """The suggestion branch of pull request ``number`` as origin has it, or None when there is none."""
    branch = suggestion_branch(number)
    try:
        git.fetch("origin", f"+refs/heads/{branch}:refs/remotes/origin/{branch}")
    except RuntimeFailure:
        return None
    commit = git.resolve(f"refs/remotes/origin/{branch}")
    parents, message = git.parents(commit), git.message(commit)
    run = _RUN_RE.search(message)
    return Stored(commit=commit, parent=parents[0] if len(parents) == 1 else "",
                  files={path: digest for digest, path in _SKILL_RE.findall(message)},
                  run=run.group(1).strip() if run else "")


def stale_or_altered(git: Git, config: Config, stored: Stored, pr: PullRequest) -> str | None:
    """Why ``stored`` may not be applied to ``pr`` now, or None when it may."""
    if stored.parent != pr.head_sha:
        return (f"this pull request moved since training: the trained skill was built on "
                f"`{stored.parent[:7] or '?'}` and the head is now `{pr.head_sha[:7]}`. Comment `/skillopt train` "
                "again to train on the new head. Nothing was changed.")
    top = git.top_level().resolve()
    skills = {e.path.resolve().relative_to(top).as_posix() for e in config.skills
              if e.path.resolve().is_relative_to(top)}
    changed = {c.path for c in git.changed_files(stored.parent, stored.commit)}
    wrong = sorted(changed ^ set(stored.files)) or sorted(set(stored.files) - skills)
    wrong += [p for p in sorted(stored.files) if p not in wrong and sha256(git.blob(stored.commit, p) or b"") !=
              stored.files[p]]
    if not stored.files or wrong:
        named = ", ".join(code_span(p, 200) for p in wrong[:5]) or "no skill file"
        return (f"the suggestion branch `{suggestion_branch(pr.number)}` does not hold what training stored "
                f"({named}). Comment `/skillopt train` again. Nothing was changed.")
    return None


def apply_stored(git: Git, stored: Stored, pr: PullRequest) -> str | None:
    """Fast-forward the pull request's branch to the stored commit; why not, or None when it was.
    The suggestion branch is deleted afterwards (best effort: it is only a leftover)."""
    problem = git.push("origin", f"{stored.commit}:refs/heads/{pr.head_ref}")
    if problem:
        moved = "fetch first" in problem or "non-fast-forward" in problem
        return (f"the branch {code_span(pr.head_ref, 100)} moved while applying; comment `/skillopt train` again"
                if moved else f"could not push to {code_span(pr.head_ref, 100)}: {escape_inline(problem, 300)} "
                f"({PUSH_HINT})") + ". Nothing was changed."
    git.push("origin", f":refs/heads/{suggestion_branch(pr.number)}")
    return None


def applied_note(stored: Stored, login: str, run_url: str | None) -> str:
    """The sentence the gate's comment and check run carry after ``/skillopt apply``."""
    files = ", ".join(f"{code_span(p, 200)} (SHA-256 `{d[:12]}`)" for p, d in sorted(stored.files.items()))
    run = escape_inline(stored.run, 200)
    return (f"Applied with `/skillopt apply` by @{escape_inline(login, 60)}: commit `{stored.commit[:7]}` holds "
            f"{files}, byte for byte the trained skill validated in run {run}"
            + (f" ([workflow run]({run_url}))" if run_url and run_url not in stored.run else "") + ".")
