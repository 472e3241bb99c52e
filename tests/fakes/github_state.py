"""State and JSON shapes of the fake GitHub REST API (no I/O; see ``github.py`` for the server).

:class:`RepoState` holds one repository: git objects (blobs, trees, commits with real git
SHA-1s), refs, pull requests, issue comments, labels and check runs. Operations take the decoded
JSON body of a request and return the JSON GitHub would answer, or raise :class:`ApiError` with
GitHub's status and message. Callers serialise access (one lock around every call).
"""

from __future__ import annotations

import base64
import copy
import difflib
import hashlib
import re
import time
import zlib
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

DOCS = "https://docs.github.com/rest"
BOT = "github-actions[bot]"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
MAX_COMMENT = 65536
MAX_CHECK_TEXT = 65535
MAX_ANNOTATIONS = 50
CHECK_STATUSES = ("queued", "in_progress", "completed", "waiting", "requested", "pending")
CHECK_CONCLUSIONS = (
    "action_required",
    "cancelled",
    "failure",
    "neutral",
    "success",
    "skipped",
    "stale",
    "timed_out",
)
_SHA = re.compile(r"^[0-9a-f]{40}$")


class ApiError(Exception):
    """A request GitHub would refuse: answered with ``status`` and GitHub's error JSON."""

    def __init__(
        self,
        status: int,
        message: str,
        errors: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{status} {message}")
        self.status, self.message, self.errors, self.headers = (
            status,
            message,
            errors,
            headers or {},
        )

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"message": self.message}
        if self.errors is not None:
            out["errors"] = self.errors
        out["documentation_url"] = DOCS
        out["status"] = str(self.status)
        return out


def not_found() -> ApiError:
    return ApiError(404, "Not Found")


def invalid(resource: str, field: str | None, code: str, message: str | None = None) -> ApiError:
    error: dict[str, Any] = {"resource": resource, "code": code}
    if field is not None:
        error["field"] = field
    if message is not None:
        error["message"] = message
    return ApiError(422, "Validation Failed", [error])


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _git_sha(kind: str, data: bytes) -> str:
    return hashlib.sha1(f"{kind} {len(data)}\0".encode() + data).hexdigest()


def _node_id(prefix: str, number: int) -> str:
    return prefix + "_" + base64.b64encode(f"{prefix}:{number}".encode()).decode().rstrip("=")


def _numeric(text: str) -> int:
    return zlib.crc32(text.encode()) % 90_000_000 + 10_000_000


def _require(body: Any, resource: str, *names: str) -> None:
    if not isinstance(body, dict):
        raise ApiError(400, "Problems parsing JSON")
    for name in names:
        if not isinstance(body.get(name), str):
            raise invalid(resource, name, "missing_field")


@dataclass
class Urls:
    """The bases every URL in a response is built from."""

    web: str = "http://127.0.0.1:0"
    api: str = "http://127.0.0.1:0/api/v3"


@dataclass
class RepoState:
    """Everything one fake repository holds. All methods assume the caller holds the lock."""

    owner: str
    name: str
    default_branch: str = "main"
    urls: Urls = field(default_factory=Urls)
    repo_id: int = 123456789
    blobs: dict[str, bytes] = field(default_factory=dict)
    trees: dict[str, list[tuple[str, str, str, str]]] = field(default_factory=dict)
    commits: dict[str, dict[str, Any]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    labels: dict[str, dict[str, Any]] = field(default_factory=dict)
    check_runs: dict[int, dict[str, Any]] = field(default_factory=dict)
    forks: set[str] = field(default_factory=set)
    reviews: list[dict[str, Any]] = field(default_factory=list)  # fakes/github_reviews.py
    roles: dict[str, str] = field(default_factory=dict)  # login → admin | maintain | write | triage | read | none
    _ids: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.trees[EMPTY_TREE] = []

    # ---- naming -------------------------------------------------------------------------
    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def api(self) -> str:
        return f"{self.urls.api}/repos/{self.full_name}"

    @property
    def web(self) -> str:
        return f"{self.urls.web}/{self.full_name}"

    def next_id(self, kind: str, start: int) -> int:
        self._ids[kind] = self._ids.get(kind, start) + 1
        return self._ids[kind]

    # ---- git objects --------------------------------------------------------------------
    def put_blob(self, data: bytes) -> str:
        sha = _git_sha("blob", data)
        self.blobs[sha] = data
        return sha

    def build_tree(self, flat: dict[str, tuple[str, str, str]]) -> str:
        """Store the tree (and subtrees) for ``path -> (mode, type, sha)``; return its SHA."""
        here: dict[str, tuple[str, str, str]] = {}
        subdirs: dict[str, dict[str, tuple[str, str, str]]] = {}
        for path, entry in flat.items():
            head, sep, rest = path.partition("/")
            if sep:
                subdirs.setdefault(head, {})[rest] = entry
            else:
                here[head] = entry
        for name, sub in subdirs.items():
            here[name] = ("040000", "tree", self.build_tree(sub))
        entries = sorted(
            ((n, *e) for n, e in here.items()), key=lambda e: e[0] + ("/" if e[2] == "tree" else "")
        )
        raw = b"".join(
            f"{m.lstrip('0')} {n}\0".encode() + bytes.fromhex(s) for n, m, _, s in entries
        )
        sha = _git_sha("tree", raw)
        self.trees[sha] = entries
        return sha

    def flatten(self, tree_sha: str, prefix: str = "") -> dict[str, tuple[str, str, str]]:
        """``path -> (mode, type, sha)`` of every non-tree entry under ``tree_sha``."""
        out: dict[str, tuple[str, str, str]] = {}
        for name, mode, kind, sha in self.trees[tree_sha]:
            if kind == "tree":
                out.update(self.flatten(sha, f"{prefix}{name}/"))
            else:
                out[prefix + name] = (mode, kind, sha)
        return out

    def tree_of_files(self, files: dict[str, str | bytes | None], base: str | None = None) -> str:
        flat = self.flatten(base) if base else {}
        for path, content in files.items():
            if content is None:
                flat.pop(path, None)
            else:
                data = content.encode() if isinstance(content, str) else content
                flat[path.strip("/")] = ("100644", "blob", self.put_blob(data))
        return self.build_tree(flat)

    def put_commit(
        self,
        tree: str,
        parents: list[str],
        message: str,
        author: dict[str, Any] | None = None,
        committer: dict[str, Any] | None = None,
        sha: str | None = None,
    ) -> str:
        stamp = int(time.time())
        author = {
            "name": "Fake GitHub",
            "email": "fake@example.invalid",
            "date": now_iso(),
            **(author or {}),
        }
        committer = {**author, **(committer or {})}
        if sha is None:
            lines = [
                f"tree {tree}",
                *(f"parent {p}" for p in parents),
                f"author {author['name']} <{author['email']}> {stamp} +0000",
                f"committer {committer['name']} <{committer['email']}> {stamp} +0000",
                "",
                message,
            ]
            sha = _git_sha("commit", "\n".join(lines).encode())
        self.commits[sha] = {
            "sha": sha,
            "tree": tree,
            "parents": list(parents),
            "message": message,
            "author": author,
            "committer": committer,
        }
        return sha

    def resolve(self, ref: str) -> str | None:
        """Commit SHA named by a SHA (or unique prefix), branch, tag, ``heads/x`` or ``refs/...``."""
        if ref in self.commits:
            return ref
        for name in (ref, f"refs/{ref}", f"refs/heads/{ref}", f"refs/tags/{ref}"):
            if name in self.refs:
                return self.refs[name]
        if re.fullmatch(r"[0-9a-f]{4,39}", ref):
            found = [s for s in self.commits if s.startswith(ref)]
            if len(found) == 1:
                return found[0]
        return None

    def ancestors(self, sha: str) -> set[str]:
        seen, todo = set(), [sha]
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            todo.extend(self.commits.get(current, {}).get("parents", ()))
        return seen

    def file_text(self, ref: str, path: str) -> str | None:
        sha = self.resolve(ref)
        if sha is None:
            return None
        entry = self.flatten(self.commits[sha]["tree"]).get(path.strip("/"))
        if entry is None or entry[1] != "blob":
            return None
        return self.blobs[entry[2]].decode("utf-8", errors="replace")

    def set_ref(self, name: str, sha: str) -> None:
        """Point ``refs/...`` at ``sha``; open PRs from that branch follow (as on a push)."""
        self.refs[name] = sha
        if name.startswith("refs/heads/"):
            branch = name[len("refs/heads/") :]
            for pull in self.pulls.values():
                if (
                    pull["state"] == "open"
                    and pull["head_repo"] == "own"
                    and pull["head_ref"] == branch
                    and pull["head_sha"] != sha
                ):
                    pull["head_sha"], pull["updated_at"] = sha, now_iso()

    def ensure_commit(self, sha: str, parent: str | None = None) -> None:
        if sha not in self.commits:
            parents = [parent] if parent and parent in self.commits and parent != sha else []
            self.put_commit(EMPTY_TREE, parents, "seeded commit", sha=sha)

    # ---- diffs --------------------------------------------------------------------------
    def diff_files(self, base_sha: str, head_sha: str) -> list[dict[str, Any]]:
        """GitHub's file list between two commits (GitHub diffs head against the merge base)."""
        old = self.flatten(self.commits[base_sha]["tree"]) if base_sha in self.commits else {}
        new = self.flatten(self.commits[head_sha]["tree"]) if head_sha in self.commits else {}
        out = []
        for path in sorted(set(old) | set(new)):
            a, b = old.get(path), new.get(path)
            if a == b:
                continue
            before = self.blobs.get(a[2], b"").decode(errors="replace").splitlines() if a else []
            after = self.blobs.get(b[2], b"").decode(errors="replace").splitlines() if b else []
            patch = [line for line in difflib.unified_diff(before, after, lineterm="", n=3)][2:]
            adds = sum(1 for line in patch if line.startswith("+"))
            dels = sum(1 for line in patch if line.startswith("-"))
            sha = (b or a)[2]  # type: ignore[index]
            ref = head_sha if b else base_sha
            out.append(
                {
                    "sha": sha,
                    "filename": path,
                    "status": "added" if a is None else "removed" if b is None else "modified",
                    "additions": adds,
                    "deletions": dels,
                    "changes": adds + dels,
                    "blob_url": f"{self.web}/blob/{ref}/{quote(path)}",
                    "raw_url": f"{self.web}/raw/{ref}/{quote(path)}",
                    "contents_url": f"{self.api}/contents/{quote(path)}?ref={ref}",
                    "patch": "\n".join(patch),
                }
            )
        return out

    def merge_base(self, base: str, head: str) -> str | None:
        base_set = self.ancestors(base)
        todo, seen = [head], set()
        while todo:
            current = todo.pop(0)
            if current in base_set:
                return current
            if current in seen:
                continue
            seen.add(current)
            todo.extend(self.commits.get(current, {}).get("parents", ()))
        return None

    def commits_between(self, base: str, head: str) -> list[str]:
        """Commits reachable from ``head`` but not from ``base``, oldest first."""
        exclude = self.ancestors(base)
        ordered, todo, seen = [], [head], set()
        while todo:
            current = todo.pop(0)
            if current in exclude or current in seen or current not in self.commits:
                continue
            seen.add(current)
            ordered.append(current)
            todo.extend(self.commits[current]["parents"])
        return ordered[::-1]

    # ---- JSON shapes --------------------------------------------------------------------
    def permission_json(self, login: str) -> dict[str, Any]:
        """``/collaborators/{user}/permission``: GitHub's legacy ``permission`` folds maintain into
        write and triage into read; ``role_name`` keeps the role. Unknown users read (a public repo)."""
        role = self.roles.get(login.lower(), "read")
        legacy = {"maintain": "write", "triage": "read"}.get(role, role)
        return {"permission": legacy, "role_name": role, "user": self.user_json(login)}

    def user_json(self, login: str) -> dict[str, Any]:
        bot = login.endswith("[bot]")
        uid = 41898282 if login == BOT else _numeric(login)
        return {
            "login": login,
            "id": uid,
            "node_id": _node_id("U", uid),
            "avatar_url": f"{self.urls.web}/avatars/u/{uid}",
            "gravatar_id": "",
            "url": f"{self.urls.api}/users/{quote(login)}",
            "html_url": f"{self.urls.web}/apps/{login[:-5]}" if bot else f"{self.urls.web}/{login}",
            "type": "Bot" if bot else "User",
            "site_admin": False,
        }

    def repo_json(self, owner: str | None = None) -> dict[str, Any]:
        owner = owner or self.owner
        full, fork = f"{owner}/{self.name}", owner != self.owner
        api, web = f"{self.urls.api}/repos/{full}", f"{self.urls.web}/{full}"
        rid = self.repo_id if not fork else _numeric(full)
        open_count = sum(1 for p in self.pulls.values() if p["state"] == "open") if not fork else 0
        stamp = "2024-01-01T00:00:00Z"
        return {
            "id": rid,
            "node_id": _node_id("R", rid),
            "name": self.name,
            "full_name": full,
            "private": False,
            "visibility": "public",
            "owner": self.user_json(owner),
            "html_url": web,
            "description": "A fake repository",
            "fork": fork,
            "url": api,
            "clone_url": f"{web}.git",
            "svn_url": web,
            "homepage": None,
            "pulls_url": f"{api}/pulls{{/number}}",
            "issues_url": f"{api}/issues{{/number}}",
            "labels_url": f"{api}/labels{{/name}}",
            "git_refs_url": f"{api}/git/refs{{/sha}}",
            "git_commits_url": f"{api}/git/commits{{/sha}}",
            "trees_url": f"{api}/git/trees{{/sha}}",
            "blobs_url": f"{api}/git/blobs{{/sha}}",
            "branches_url": f"{api}/branches{{/branch}}",
            "contents_url": f"{api}/contents/{{+path}}",
            "compare_url": f"{api}/compare/{{base}}...{{head}}",
            "commits_url": f"{api}/commits{{/sha}}",
            "statuses_url": f"{api}/statuses/{{sha}}",
            "issue_comment_url": f"{api}/issues/comments{{/number}}",
            "created_at": stamp,
            "updated_at": stamp,
            "pushed_at": stamp,
            "default_branch": self.default_branch,
            "archived": False,
            "disabled": False,
            "has_issues": True,
            "has_projects": False,
            "has_wiki": False,
            "has_pages": False,
            "has_downloads": True,
            "has_discussions": False,
            "is_template": False,
            "allow_forking": True,
            "web_commit_signoff_required": False,
            "open_issues_count": open_count,
            "open_issues": open_count,
            "forks_count": 0,
            "forks": 0,
            "stargazers_count": 0,
            "watchers_count": 0,
            "watchers": 0,
            "size": 1,
            "language": "Markdown",
            "topics": [],
            "permissions": {
                "admin": False,
                "maintain": False,
                "push": True,
                "triage": True,
                "pull": True,
            },
        }

    def label_json(self, label: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": label["id"],
            "node_id": _node_id("LA", label["id"]),
            "url": f"{self.api}/labels/{quote(label['name'], safe='')}",
            "name": label["name"],
            "color": label["color"],
            "description": label["description"],
            "default": False,
        }

    def commit_json(self, sha: str) -> dict[str, Any]:
        """A git commit (``/git/commits/{sha}``)."""
        commit = self.commits[sha]
        return {
            "sha": sha,
            "node_id": _node_id("C", int(sha[:8], 16)) if _SHA.match(sha) else "C_x",
            "url": f"{self.api}/git/commits/{sha}",
            "html_url": f"{self.web}/commit/{sha}",
            "author": dict(commit["author"]),
            "committer": dict(commit["committer"]),
            "message": commit["message"],
            "tree": {"sha": commit["tree"], "url": f"{self.api}/git/trees/{commit['tree']}"},
            "parents": [
                {
                    "sha": p,
                    "url": f"{self.api}/git/commits/{p}",
                    "html_url": f"{self.web}/commit/{p}",
                }
                for p in commit["parents"]
            ],
            "verification": {
                "verified": False,
                "reason": "unsigned",
                "signature": None,
                "payload": None,
                "verified_at": None,
            },
        }

    def rest_commit_json(self, sha: str, files: bool = True) -> dict[str, Any]:
        """A repository commit (``/commits/{sha}``): wraps the git commit."""
        commit = self.commits[sha]
        git = self.commit_json(sha)
        git["comment_count"] = 0
        out = {
            "sha": sha,
            "node_id": git["node_id"],
            "commit": git,
            "url": f"{self.api}/commits/{sha}",
            "html_url": f"{self.web}/commit/{sha}",
            "comments_url": f"{self.api}/commits/{sha}/comments",
            "author": None,
            "committer": None,
            "parents": [
                {"sha": p, "url": f"{self.api}/commits/{p}", "html_url": f"{self.web}/commit/{p}"}
                for p in commit["parents"]
            ],
        }
        if files:
            parent = commit["parents"][0] if commit["parents"] else ""
            changed = self.diff_files(parent, sha)
            adds = sum(f["additions"] for f in changed)
            dels = sum(f["deletions"] for f in changed)
            out["stats"] = {"total": adds + dels, "additions": adds, "deletions": dels}
            out["files"] = changed
        return out

    def tree_json(self, sha: str, recursive: bool) -> dict[str, Any]:
        entries: list[dict[str, Any]] = []

        def walk(tree_sha: str, prefix: str) -> None:
            for name, mode, kind, obj in self.trees[tree_sha]:
                entry = {
                    "path": prefix + name,
                    "mode": mode,
                    "type": kind,
                    "sha": obj,
                    "url": f"{self.api}/git/{kind}s/{obj}",
                }
                if kind == "blob":
                    entry["size"] = len(self.blobs.get(obj, b""))
                entries.append(entry)
                if recursive and kind == "tree":
                    walk(obj, f"{prefix}{name}/")

        walk(sha, "")
        return {
            "sha": sha,
            "url": f"{self.api}/git/trees/{sha}",
            "tree": entries,
            "truncated": False,
        }

    def ref_json(self, name: str) -> dict[str, Any]:
        sha = self.refs[name]
        return {
            "ref": name,
            "node_id": _node_id("REF", _numeric(name)),
            "url": f"{self.api}/git/{quote(name)}",
            "object": {"sha": sha, "type": "commit", "url": f"{self.api}/git/commits/{sha}"},
        }

    def branch_json(self, branch: str) -> dict[str, Any]:
        sha = self.refs[f"refs/heads/{branch}"]
        return {
            "name": branch,
            "commit": self.rest_commit_json(sha, files=False),
            "protected": False,
            "protection_url": f"{self.api}/branches/{quote(branch)}/protection",
            "_links": {
                "self": f"{self.api}/branches/{quote(branch)}",
                "html": f"{self.web}/tree/{quote(branch)}",
            },
        }

    def part_json(self, pull: dict[str, Any], side: str) -> dict[str, Any]:
        ref, sha = pull[f"{side}_ref"], pull[f"{side}_sha"]
        owner = pull["head_owner"] if side == "head" else self.owner
        repo: dict[str, Any] | None = self.repo_json(owner)
        if side == "head" and pull["head_repo"] == "deleted":
            repo = None
        return {
            "label": f"{owner}:{ref}",
            "ref": ref,
            "sha": sha,
            "user": self.user_json(owner),
            "repo": repo,
        }

    def pull_json(self, pull: dict[str, Any]) -> dict[str, Any]:
        number = pull["number"]
        api, issue = f"{self.api}/pulls/{number}", f"{self.api}/issues/{number}"
        html = f"{self.web}/pull/{number}"
        files = self.pull_files(pull)
        return {
            "url": api,
            "id": pull["id"],
            "node_id": _node_id("PR", pull["id"]),
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "issue_url": issue,
            "commits_url": f"{api}/commits",
            "review_comments_url": f"{api}/comments",
            "review_comment_url": f"{self.api}/pulls/comments{{/number}}",
            "comments_url": f"{issue}/comments",
            "statuses_url": f"{self.api}/statuses/{pull['head_sha']}",
            "number": number,
            "state": pull["state"],
            "locked": False,
            "title": pull["title"],
            "user": self.user_json(pull["user"]),
            "body": pull["body"],
            "labels": [self.label_json(self.labels[n.lower()]) for n in pull["labels"]],
            "milestone": None,
            "active_lock_reason": None,
            "created_at": pull["created_at"],
            "updated_at": pull["updated_at"],
            "closed_at": pull["closed_at"],
            "merged_at": None,
            "merge_commit_sha": None,
            "assignee": None,
            "assignees": [],
            "requested_reviewers": [],
            "requested_teams": [],
            "head": self.part_json(pull, "head"),
            "base": self.part_json(pull, "base"),
            "_links": {
                "self": {"href": api},
                "html": {"href": html},
                "issue": {"href": issue},
                "comments": {"href": f"{issue}/comments"},
                "commits": {"href": f"{api}/commits"},
                "statuses": {"href": f"{self.api}/statuses/{pull['head_sha']}"},
            },
            "author_association": "CONTRIBUTOR" if pull["head_repo"] != "own" else "MEMBER",
            "auto_merge": None,
            "draft": pull["draft"],
            "merged": False,
            "mergeable": None,
            "rebaseable": None,
            "mergeable_state": "unknown",
            "merged_by": None,
            "comments": sum(1 for c in self.comments.values() if c["issue"] == number),
            "review_comments": 0,
            "maintainer_can_modify": pull["maintainer_can_modify"],
            "commits": max(1, len(self.commits_between(pull["base_sha"], pull["head_sha"]))),
            "additions": sum(f["additions"] for f in files),
            "deletions": sum(f["deletions"] for f in files),
            "changed_files": len(files),
        }

    def issue_json(self, pull: dict[str, Any]) -> dict[str, Any]:
        pr = self.pull_json(pull)
        number, issue = pull["number"], pr["issue_url"]
        return {
            "url": issue,
            "repository_url": self.api,
            "labels_url": f"{issue}/labels{{/name}}",
            "comments_url": f"{issue}/comments",
            "events_url": f"{issue}/events",
            "html_url": pr["html_url"],
            "id": pull["id"] + 1_000_000,
            "node_id": _node_id("I", pull["id"]),
            "number": number,
            "title": pr["title"],
            "user": pr["user"],
            "labels": pr["labels"],
            "state": pr["state"],
            "state_reason": None,
            "locked": False,
            "assignee": None,
            "assignees": [],
            "milestone": None,
            "comments": pr["comments"],
            "created_at": pr["created_at"],
            "updated_at": pr["updated_at"],
            "closed_at": pr["closed_at"],
            "author_association": pr["author_association"],
            "active_lock_reason": None,
            "draft": pr["draft"],
            "body": pr["body"],
            "pull_request": {
                "url": pr["url"],
                "html_url": pr["html_url"],
                "diff_url": pr["diff_url"],
                "patch_url": pr["patch_url"],
                "merged_at": None,
            },
            "timeline_url": f"{issue}/timeline",
        }

    def comment_json(self, comment: dict[str, Any]) -> dict[str, Any]:
        cid, number = comment["id"], comment["issue"]
        return {
            "id": cid,
            "node_id": _node_id("IC", cid),
            "url": f"{self.api}/issues/comments/{cid}",
            "html_url": f"{self.web}/pull/{number}#issuecomment-{cid}",
            "issue_url": f"{self.api}/issues/{number}",
            "body": comment["body"],
            "user": self.user_json(comment["user"]),
            "created_at": comment["created_at"],
            "updated_at": comment["updated_at"],
            "author_association": "NONE",
            "performed_via_github_app": None,
        }

    def check_run_json(self, run: dict[str, Any]) -> dict[str, Any]:
        rid, output = run["id"], run["output"]
        url = f"{self.api}/check-runs/{rid}"
        pulls = [
            {
                "url": f"{self.api}/pulls/{p['number']}",
                "id": p["id"],
                "number": p["number"],
                "head": {
                    "ref": p["head_ref"],
                    "sha": p["head_sha"],
                    "repo": {"id": self.repo_id, "url": self.api, "name": self.name},
                },
                "base": {
                    "ref": p["base_ref"],
                    "sha": p["base_sha"],
                    "repo": {"id": self.repo_id, "url": self.api, "name": self.name},
                },
            }
            for p in self.pulls.values()
            if p["head_sha"] == run["head_sha"] and p["head_repo"] == "own" and p["state"] == "open"
        ]
        return {
            "id": rid,
            "node_id": _node_id("CR", rid),
            "head_sha": run["head_sha"],
            "external_id": run["external_id"],
            "url": url,
            "html_url": f"{self.web}/runs/{rid}",
            "details_url": run["details_url"],
            "status": run["status"],
            "conclusion": run["conclusion"],
            "started_at": run["started_at"],
            "completed_at": run["completed_at"],
            "name": run["name"],
            "output": {
                "title": output["title"],
                "summary": output["summary"],
                "text": output["text"],
                "annotations_count": len(output["annotations"]),
                "annotations_url": f"{url}/annotations",
            },
            "check_suite": {"id": 7_000_000 + rid},
            "app": {
                "id": 15368,
                "slug": "github-actions",
                "node_id": "MDM6QXBwMTUzNjg=",
                "name": "GitHub Actions",
                "owner": self.user_json("github"),
                "html_url": f"{self.urls.web}/apps/github-actions",
            },
            "pull_requests": pulls,
        }

    def annotation_json(self, run: dict[str, Any], annotation: dict[str, Any]) -> dict[str, Any]:
        path = annotation["path"]
        return {
            "path": path,
            "blob_href": f"{self.web}/blob/{run['head_sha']}/{quote(path)}",
            "start_line": annotation["start_line"],
            "end_line": annotation["end_line"],
            "start_column": annotation.get("start_column"),
            "end_column": annotation.get("end_column"),
            "annotation_level": annotation["annotation_level"],
            "title": annotation.get("title"),
            "message": annotation["message"],
            "raw_details": annotation.get("raw_details"),
        }

    def content_json(
        self, commit: str, path: str, flat: dict[str, tuple[str, str, str]], with_content: bool
    ) -> dict[str, Any]:
        entry = flat.get(path)
        kind, sha, size = "dir", "", 0
        if entry is not None:
            kind, sha = ("file" if entry[1] == "blob" else "submodule"), entry[2]
            size = len(self.blobs.get(sha, b""))
        else:
            sha = self.build_tree(
                {p[len(path) + 1 :]: e for p, e in flat.items() if p.startswith(path + "/")}
            )
        api = f"{self.api}/contents/{quote(path)}?ref={commit}"
        git = f"{self.api}/git/{'trees' if kind == 'dir' else 'blobs'}/{sha}"
        html = f"{self.web}/{'tree' if kind == 'dir' else 'blob'}/{commit}/{quote(path)}"
        out: dict[str, Any] = {
            "type": kind,
            "size": size,
            "name": path.rsplit("/", 1)[-1],
            "path": path,
            "sha": sha,
            "url": api,
            "git_url": git,
            "html_url": html,
            "download_url": f"{self.web}/raw/{commit}/{quote(path)}" if kind == "file" else None,
            "_links": {"self": api, "git": git, "html": html},
        }
        if with_content and kind == "file":
            encoded = base64.b64encode(self.blobs[sha]).decode()
            out["encoding"] = "base64"
            out["content"] = (
                "\n".join(encoded[i : i + 60] for i in range(0, len(encoded), 60)) + "\n"
            )
        return out

    # ---- pulls --------------------------------------------------------------------------
    def pull(self, number: int) -> dict[str, Any]:
        if number not in self.pulls:
            raise not_found()
        return self.pulls[number]

    def pull_files(self, pull: dict[str, Any]) -> list[dict[str, Any]]:
        if pull["files"] is not None:
            return copy.deepcopy(pull["files"])
        base = self.merge_base(pull["base_sha"], pull["head_sha"]) or pull["base_sha"]
        return self.diff_files(base, pull["head_sha"])

    def new_pull(
        self,
        number: int | None,
        *,
        title: str,
        body: str | None,
        head_ref: str,
        head_sha: str,
        base_ref: str,
        base_sha: str,
        user: str,
        head_owner: str,
        head_repo: str,
        draft: bool = False,
        maintainer_can_modify: bool = True,
    ) -> dict[str, Any]:
        if number is None:
            number = max(self.pulls, default=0) + 1
        stamp = now_iso()
        pull = {
            "number": number,
            "id": self.next_id("pull", 3_000_000),
            "title": title,
            "body": body,
            "state": "open",
            "draft": draft,
            "user": user,
            "head_ref": head_ref,
            "head_sha": head_sha,
            "head_owner": head_owner,
            "head_repo": head_repo,
            "base_ref": base_ref,
            "base_sha": base_sha,
            "labels": [],
            "maintainer_can_modify": maintainer_can_modify,
            "created_at": stamp,
            "updated_at": stamp,
            "closed_at": None,
            "files": None,
        }
        self.pulls[number] = pull
        return pull

    def list_pulls(self, query: dict[str, str]) -> list[dict[str, Any]]:
        state = query.get("state", "open")
        if state not in ("open", "closed", "all"):
            raise invalid("PullRequest", "state", "invalid")
        head, base = query.get("head"), query.get("base")
        found = []
        for pull in self.pulls.values():
            if state != "all" and pull["state"] != state:
                continue
            if base and pull["base_ref"] != base:
                continue
            # GitHub silently ignores a head filter that lacks the "owner:" prefix.
            if head and ":" in head:
                owner, _, branch = head.partition(":")
                if (pull["head_owner"].lower(), pull["head_ref"]) != (owner.lower(), branch):
                    continue
            found.append(pull)
        key = query.get("sort", "created")
        field_name = {"updated": "updated_at"}.get(key, "number")
        descending = (
            query.get("direction", "desc" if key in ("created", "updated") else "asc") == "desc"
        )
        return sorted(found, key=lambda p: (p[field_name], p["number"]), reverse=descending)

    def create_pull(self, body: Any, actor: str) -> dict[str, Any]:
        _require(body, "PullRequest", "head", "base")
        if not isinstance(body.get("title"), str) or not body["title"].strip():
            raise invalid("PullRequest", "title", "missing_field")
        head = body["head"]
        owner, _, branch = head.rpartition(":")
        if owner and owner.lower() != self.owner.lower():
            raise invalid("PullRequest", "head", "invalid")
        head_sha = self.refs.get(f"refs/heads/{branch}")
        if head_sha is None:
            raise invalid("PullRequest", "head", "invalid")
        base_sha = self.refs.get(f"refs/heads/{body['base']}")
        if base_sha is None:
            raise invalid("PullRequest", "base", "invalid")
        for pull in self.pulls.values():
            if (
                pull["state"] == "open"
                and pull["head_repo"] == "own"
                and pull["head_ref"] == branch
                and pull["base_ref"] == body["base"]
            ):
                raise invalid(
                    "PullRequest",
                    None,
                    "custom",
                    f"A pull request already exists for {self.owner}:{branch}.",
                )
        if head_sha in self.ancestors(base_sha):
            raise invalid(
                "PullRequest", None, "custom", f"No commits between {body['base']} and {branch}"
            )
        pull = self.new_pull(
            None,
            title=body["title"],
            body=body.get("body"),
            head_ref=branch,
            head_sha=head_sha,
            base_ref=body["base"],
            base_sha=base_sha,
            user=actor,
            head_owner=self.owner,
            head_repo="own",
            draft=bool(body.get("draft", False)),
            maintainer_can_modify=bool(body.get("maintainer_can_modify", True)),
        )
        return self.pull_json(pull)

    def edit_pull(self, number: int, body: Any) -> dict[str, Any]:
        pull = self.pull(number)
        if not isinstance(body, dict):
            raise ApiError(400, "Problems parsing JSON")
        for key in ("title", "body"):
            if key in body:
                pull[key] = body[key]
        if "state" in body:
            if body["state"] not in ("open", "closed"):
                raise invalid("PullRequest", "state", "invalid")
            pull["state"] = body["state"]
            pull["closed_at"] = now_iso() if body["state"] == "closed" else None
        if "base" in body:
            if f"refs/heads/{body['base']}" not in self.refs:
                raise invalid("PullRequest", "base", "invalid")
            pull["base_ref"], pull["base_sha"] = (
                body["base"],
                self.refs[f"refs/heads/{body['base']}"],
            )
        if "maintainer_can_modify" in body:
            pull["maintainer_can_modify"] = bool(body["maintainer_can_modify"])
        if "labels" in body and isinstance(body["labels"], list):
            pull["labels"] = []
            self.add_labels(number, body["labels"])
        pull["updated_at"] = now_iso()
        return self.pull_json(pull)

    # ---- comments -----------------------------------------------------------------------
    def add_comment(self, number: int, body: Any, actor: str) -> dict[str, Any]:
        self.pull(number)
        _require(body, "IssueComment", "body")
        self._check_comment(body["body"])
        stamp = now_iso()
        comment = {
            "id": self.next_id("comment", 1_000_000),
            "issue": number,
            "body": body["body"],
            "user": actor,
            "created_at": stamp,
            "updated_at": stamp,
        }
        self.comments[comment["id"]] = comment
        return self.comment_json(comment)

    def edit_comment(self, cid: int, body: Any) -> dict[str, Any]:
        comment = self.comment(cid)
        _require(body, "IssueComment", "body")
        self._check_comment(body["body"])
        comment["body"], comment["updated_at"] = body["body"], now_iso()
        return self.comment_json(comment)

    def comment(self, cid: int) -> dict[str, Any]:
        if cid not in self.comments:
            raise not_found()
        return self.comments[cid]

    @staticmethod
    def _check_comment(text: str) -> None:
        if len(text) > MAX_COMMENT:
            raise invalid(
                "IssueComment",
                "data",
                "unprocessable",
                f"Body is too long (maximum is {MAX_COMMENT} characters)",
            )

    # ---- labels -------------------------------------------------------------------------
    def repo_label(
        self, name: str, color: str = "ededed", description: str | None = None, create: bool = True
    ) -> dict[str, Any]:
        label = self.labels.get(name.lower())
        if label is None:
            if not create:
                raise not_found()
            label = {
                "id": self.next_id("label", 2_000_000),
                "name": name,
                "color": color.lstrip("#"),
                "description": description,
            }
            self.labels[name.lower()] = label
        return label

    def create_label(self, body: Any) -> dict[str, Any]:
        _require(body, "Label", "name")
        if body["name"].lower() in self.labels:
            raise invalid("Label", "name", "already_exists")
        color = str(body.get("color") or "ededed").lstrip("#")
        if not re.fullmatch(r"[0-9a-fA-F]{6}", color):
            raise invalid("Label", "color", "invalid")
        return self.label_json(self.repo_label(body["name"], color, body.get("description")))

    def add_labels(self, number: int, names: list[Any]) -> list[dict[str, Any]]:
        pull = self.pull(number)
        for name in names:
            name = name.get("name") if isinstance(name, dict) else name
            if not isinstance(name, str) or not name:
                raise invalid("Label", "name", "invalid")
            label = self.repo_label(name)
            if label["name"].lower() not in (n.lower() for n in pull["labels"]):
                pull["labels"].append(label["name"])
        pull["updated_at"] = now_iso()
        return [self.label_json(self.labels[n.lower()]) for n in pull["labels"]]

    def remove_label(self, number: int, name: str) -> list[dict[str, Any]]:
        pull = self.pull(number)
        kept = [n for n in pull["labels"] if n.lower() != name.lower()]
        if len(kept) == len(pull["labels"]):
            raise ApiError(404, "Label does not exist")
        pull["labels"] = kept
        return [self.label_json(self.labels[n.lower()]) for n in kept]

    # ---- check runs ---------------------------------------------------------------------
    def check_run(self, rid: int) -> dict[str, Any]:
        if rid not in self.check_runs:
            raise not_found()
        return self.check_runs[rid]

    def write_check_run(self, body: Any, rid: int | None = None) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise ApiError(400, "Problems parsing JSON")
        if rid is None:
            _require(body, "CheckRun", "name", "head_sha")
            if self.resolve(body["head_sha"]) != body["head_sha"]:
                raise ApiError(422, f"No commit found for SHA: {body['head_sha']}")
            run: dict[str, Any] = {
                "id": self.next_id("check_run", 5_000_000),
                "name": body["name"],
                "head_sha": body["head_sha"],
                "status": "queued",
                "conclusion": None,
                "details_url": None,
                "external_id": "",
                "started_at": now_iso(),
                "completed_at": None,
                "actions": [],
                "output": {"title": None, "summary": None, "text": None, "annotations": []},
            }
        else:
            run = copy.deepcopy(self.check_run(rid))
        status, conclusion = body.get("status"), body.get("conclusion")
        if status is not None and status not in CHECK_STATUSES:
            raise _check_error(f"For 'properties/status', \"{status}\" is not a possible value.")
        if conclusion is not None and conclusion not in CHECK_CONCLUSIONS:
            raise _check_error(
                f"For 'properties/conclusion', \"{conclusion}\" is not a possible value."
            )
        if status == "completed" and conclusion is None and run["conclusion"] is None:
            raise _check_error("Conclusion is required when status is completed.")
        for key in ("name", "details_url", "external_id", "started_at", "actions"):
            if key in body:
                run[key] = body[key]
        if status is not None:
            run["status"] = status
        if conclusion is not None:
            run["conclusion"], run["status"] = conclusion, "completed"
            run["completed_at"] = body.get("completed_at") or now_iso()
        if "output" in body:
            _apply_output(run["output"], body["output"])
        self.check_runs[run["id"]] = run
        return self.check_run_json(run)

    def check_runs_on(self, ref: str, query: dict[str, str]) -> list[dict[str, Any]]:
        sha = self.resolve(ref)
        if sha is None:
            raise ApiError(422, f"No commit found for SHA: {ref}")
        runs = [r for r in self.check_runs.values() if r["head_sha"] == sha]
        if "check_name" in query:
            runs = [r for r in runs if r["name"] == query["check_name"]]
        if "status" in query:
            runs = [r for r in runs if r["status"] == query["status"]]
        runs.sort(key=lambda r: r["id"], reverse=True)
        if query.get("filter", "latest") == "latest":
            latest: dict[str, dict[str, Any]] = {}
            for run in runs:
                latest.setdefault(run["name"], run)
            runs = list(latest.values())
        return [self.check_run_json(r) for r in runs]

    # ---- git data -----------------------------------------------------------------------
    def create_blob(self, body: Any) -> dict[str, Any]:
        _require(body, "Blob", "content")
        encoding = body.get("encoding", "utf-8")
        if encoding in ("utf-8", "utf8"):
            data = body["content"].encode()
        elif encoding == "base64":
            try:
                data = base64.b64decode(body["content"], validate=False)
            except ValueError as exc:
                raise invalid("Blob", "content", "invalid", str(exc)) from None
        else:
            raise invalid("Blob", "encoding", "invalid", f"encoding {encoding!r} is not supported")
        sha = self.put_blob(data)
        return {"sha": sha, "url": f"{self.api}/git/blobs/{sha}"}

    def blob_json(self, sha: str) -> dict[str, Any]:
        if sha not in self.blobs:
            raise not_found()
        data = self.blobs[sha]
        return {
            "sha": sha,
            "node_id": _node_id("B", int(sha[:8], 16)),
            "size": len(data),
            "url": f"{self.api}/git/blobs/{sha}",
            "encoding": "base64",
            "content": base64.b64encode(data).decode() + "\n",
        }

    def create_tree(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict) or not isinstance(body.get("tree"), list):
            raise invalid("Tree", "tree", "missing_field")
        base = body.get("base_tree")
        if base is not None and base not in self.trees:
            raise ApiError(
                422,
                "Invalid tree info",
                [{"resource": "Tree", "field": "base_tree", "code": "invalid"}],
            )
        flat = self.flatten(base) if base else {}
        for entry in body["tree"]:
            path = str(entry.get("path", "")).strip("/")
            mode, kind = entry.get("mode"), entry.get("type", "blob")
            if not path or mode not in ("100644", "100755", "040000", "160000", "120000"):
                raise ApiError(422, "Invalid tree info")
            if "content" in entry and entry["content"] is not None:
                sha = self.put_blob(str(entry["content"]).encode())
            elif entry.get("sha") is None:
                flat.pop(path, None)
                for key in [k for k in flat if k.startswith(path + "/")]:
                    del flat[key]
                continue
            else:
                sha = entry["sha"]
            if kind == "tree":
                if sha not in self.trees:
                    raise ApiError(422, "Invalid tree info")
                for key in [k for k in flat if k.startswith(path + "/")]:
                    del flat[key]
                flat.update({f"{path}/{p}": e for p, e in self.flatten(sha).items()})
            else:
                if kind == "blob" and sha not in self.blobs:
                    raise ApiError(422, "Invalid tree info")
                flat[path] = (mode, kind, sha)
        return self.tree_json(self.build_tree(flat), recursive=False)

    def create_commit(self, body: Any) -> dict[str, Any]:
        _require(body, "Commit", "message", "tree")
        if body["tree"] not in self.trees:
            raise ApiError(422, "Tree SHA does not exist")
        parents = body.get("parents") or []
        for parent in parents:
            if parent not in self.commits:
                raise ApiError(422, "Parent SHA does not exist or is not a commit object")
        sha = self.put_commit(
            body["tree"],
            list(parents),
            body["message"],
            _person(body.get("author")),
            _person(body.get("committer")),
        )
        return self.commit_json(sha)

    def create_ref(self, body: Any) -> dict[str, Any]:
        _require(body, "Reference", "ref", "sha")
        name = body["ref"]
        if not name.startswith("refs/") or name.count("/") < 2:
            raise ApiError(
                422, "Reference name must start with 'refs/' and have at least two slashes."
            )
        if name in self.refs:
            raise ApiError(422, "Reference already exists")
        if body["sha"] not in self.commits:
            raise ApiError(422, "Object does not exist")
        self.set_ref(name, body["sha"])
        return self.ref_json(name)

    def update_ref(self, ref: str, body: Any) -> dict[str, Any]:
        _require(body, "Reference", "sha")
        name = f"refs/{ref}"
        if name not in self.refs:
            raise ApiError(422, "Reference does not exist")
        sha = body["sha"]
        if sha not in self.commits:
            raise ApiError(422, "Object does not exist")
        if not body.get("force") and self.refs[name] not in self.ancestors(sha):
            raise ApiError(422, "Update is not a fast forward")
        self.set_ref(name, sha)
        return self.ref_json(name)

    def delete_ref(self, ref: str) -> None:
        name = f"refs/{ref}"
        if name not in self.refs:
            raise ApiError(422, "Reference does not exist")
        del self.refs[name]
        branch = name[len("refs/heads/") :] if name.startswith("refs/heads/") else None
        for pull in self.pulls.values():
            if (
                pull["state"] == "open"
                and pull["head_repo"] == "own"
                and pull["head_ref"] == branch
            ):
                pull["state"], pull["closed_at"] = "closed", now_iso()

    def compare_json(self, base_ref: str, head_ref: str) -> dict[str, Any]:
        base, head = self.resolve(base_ref), self.resolve(head_ref)
        if base is None or head is None:
            raise not_found()
        merge_base = self.merge_base(base, head) or base
        ahead = self.commits_between(base, head)
        behind = self.commits_between(head, base)
        status = (
            "identical"
            if not ahead and not behind
            else "ahead"
            if not behind
            else "behind"
            if not ahead
            else "diverged"
        )
        spec = f"{quote(base_ref)}...{quote(head_ref)}"
        return {
            "url": f"{self.api}/compare/{spec}",
            "html_url": f"{self.web}/compare/{spec}",
            "permalink_url": f"{self.web}/compare/{base}...{head}",
            "diff_url": f"{self.web}/compare/{spec}.diff",
            "patch_url": f"{self.web}/compare/{spec}.patch",
            "base_commit": self.rest_commit_json(base, files=False),
            "merge_base_commit": self.rest_commit_json(merge_base, files=False),
            "status": status,
            "ahead_by": len(ahead),
            "behind_by": len(behind),
            "total_commits": len(ahead),
            "commits": [self.rest_commit_json(s, files=False) for s in ahead],
            "files": self.diff_files(merge_base, head),
        }


def _check_error(detail: str) -> ApiError:
    return ApiError(422, f"Invalid request.\n\n{detail}")


def _apply_output(output: dict[str, Any], given: Any) -> None:
    if (
        not isinstance(given, dict)
        or not isinstance(given.get("title"), str)
        or not isinstance(given.get("summary"), str)
    ):
        raise _check_error('"title", "summary" weren\'t supplied. (output)')
    for key in ("summary", "text"):
        value = given.get(key)
        if isinstance(value, str) and len(value) > MAX_CHECK_TEXT:
            raise _check_error(
                f"For 'properties/{key}', the value is too long "
                f"(maximum is {MAX_CHECK_TEXT} characters)."
            )
    annotations = given.get("annotations") or []
    if len(annotations) > MAX_ANNOTATIONS:
        raise _check_error(
            f"For 'properties/annotations', the array has {len(annotations)} "
            f"items (maximum is {MAX_ANNOTATIONS})."
        )
    for item in annotations:
        missing = [
            k
            for k in ("path", "start_line", "end_line", "annotation_level", "message")
            if not isinstance(item, dict) or item.get(k) is None
        ]
        if missing:
            raise _check_error(f'"{missing[0]}" wasn\'t supplied. (annotations)')
        if item["annotation_level"] not in ("notice", "warning", "failure"):
            raise _check_error(
                f"For 'properties/annotation_level', "
                f'"{item["annotation_level"]}" is not a possible value.'
            )
    output["title"], output["summary"] = given["title"], given["summary"]
    if "text" in given:
        output["text"] = given["text"]
    output["annotations"].extend(copy.deepcopy(annotations))


def _person(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    return {k: v for k, v in value.items() if k in ("name", "email", "date")}
