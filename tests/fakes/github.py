"""A stateful fake GitHub REST API: real HTTP on 127.0.0.1, shaped for the real PyGithub.

It serves one repository under a GitHub Enterprise style prefix (``/api/v3``) and builds every
URL in its answers from its own address, so PyGithub can follow them. State (git objects, refs,
pull requests, comments, labels, check runs) lives in :mod:`fakes.github_state`;
this module adds the server, routing, pagination, authentication, rate-limit headers, fault
injection and request recording, plus plain Python methods for tests to seed and inspect state::

    with FakeGitHub() as fake:
        fake.seed_files("main", {"skills/x/SKILL.md": "# X"})
        gh = github.Github(auth=github.Auth.Token(fake.token), base_url=fake.api_url,
                           retry=None, seconds_between_requests=None, seconds_between_writes=None)
"""

from __future__ import annotations

import copy
import hashlib
import http
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

from fakes import github_reviews as reviews
from fakes.github_state import BOT, ApiError, RepoState, Urls, invalid, not_found
from skillopt_ci.httpserve import LoopbackHandler, LoopbackService

__all__ = ["FakeGitHub", "RecordedRequest"]

PREFIX = "/api/v3"
WRITES = ("POST", "PATCH", "PUT", "DELETE")


@dataclass(frozen=True)
class RecordedRequest:
    """One request the fake answered. ``path`` is percent-decoded and without ``/api/v3``;
    ``query`` keeps the last value of each parameter; ``body`` is the decoded JSON (or None);
    ``response`` the JSON answered (None for 204)."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    status: int = 0
    response: Any = None


@dataclass
class _Fault:
    method: str
    pattern: re.Pattern[str]
    status: int  # 0: close the connection without an answer
    message: str
    headers: dict[str, str]
    times: int | None = 1  # None: every matching request


class _Dropped(Exception):
    """Close the connection without answering (a fault with status 0)."""


@dataclass
class _Page:
    """A list answer, cut into pages with ``per_page``/``page`` and a ``Link`` header."""

    items: list[Any]
    key: str | None = None  # wrap as {"total_count": n, key: page}


Handler = Callable[..., Any]


class _Handler(LoopbackHandler):
    server_version = "FakeGitHub/1.0"
    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = LoopbackHandler.receive

    def respond(self, method: str, raw: bytes, headers: dict[str, str]) -> None:
        try:
            owner = cast("FakeGitHub", self.server.service)
            status, out_headers, body = owner._handle(method, self.path, headers, raw)
            if status == 0:  # an injected dropped connection
                self.close_connection = True
                return
        except Exception as exc:  # a bug in the fake: answer 500 rather than hang the client
            status, out_headers = 500, {"Content-Type": "application/json"}
            body = json.dumps({"message": f"FakeGitHub bug: {type(exc).__name__}: {exc}"}).encode()
        self.send_bytes(status, out_headers, body)


class FakeGitHub(LoopbackService):
    """A fake of the GitHub REST API for ``owner/repo`` on an ephemeral port of 127.0.0.1.

    Requests must authenticate with ``token`` (``Authorization: token …`` or ``Bearer …``).
    ``read_only = True`` refuses every write with 403, as a fork PR's token does. Each request
    uses one unit of ``rate_limit`` (per fake); when none is left, GitHub's 403 is answered.
    Writes act as ``actor`` (``github-actions[bot]``). All methods are thread-safe. :meth:`stop`
    keeps the state; :attr:`url` (``http://127.0.0.1:PORT``) is the "web" base of ``html_url``.
    """

    handler_class = _Handler

    def __init__(
        self,
        owner: str = "octo",
        repo: str = "skills",
        *,
        token: str = "ghs_test",
        default_branch: str = "main",
        rate_limit: int = 1000,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.token = token
        self.read_only = False
        self.actor = BOT
        self.rate_limit = rate_limit
        self._used = 0
        self._reset_at = int(time.time()) + 3600
        self._lock = threading.RLock()
        self._state = RepoState(owner, repo, default_branch)
        self._faults: list[_Fault] = []
        self._requests: list[RecordedRequest] = []
        self._routes = self._build_routes()
        super().__init__(host=host, port=port)

    # ---- lifecycle ----------------------------------------------------------------------
    def _bound(self, url: str) -> None:
        self._state.urls = Urls(web=url, api=url + PREFIX)

    @property
    def api_url(self) -> str:
        """``url + "/api/v3"``: what ``GITHUB_API_URL`` looks like on GitHub Enterprise."""
        return self.url + PREFIX

    @property
    def full_name(self) -> str:
        return self._state.full_name

    @property
    def owner(self) -> str:
        return self._state.owner

    @property
    def repo(self) -> str:
        return self._state.name

    @property
    def default_branch(self) -> str:
        return self._state.default_branch

    # ---- recording and faults -----------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of every request answered (including refused ones), in arrival order."""
        with self._lock:
            return list(self._requests)

    def writes(self) -> list[RecordedRequest]:
        """The recorded POST/PATCH/PUT/DELETE requests."""
        return [r for r in self.requests if r.method in WRITES]

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    @property
    def rate_limit_remaining(self) -> int:
        with self._lock:
            return max(self.rate_limit - self._used, 0)

    def fail_next(
        self,
        method: str,
        path_regex: str,
        status: int,
        message: str | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        times: int | None = 1,
    ) -> None:
        """Answer the next ``method`` request (``"*"`` for any) whose path (decoded, without
        ``/api/v3``) matches ``path_regex`` (``re.search``) with ``status`` and GitHub's error
        JSON. Each call applies ``times`` times (None: to every matching request from now on,
        e.g. a permission the token lacks); several queue up in order. ``status`` 0 closes the
        connection without an answer (a dropped connection). ``headers`` override ours,
        e.g. ``{"X-RateLimit-Remaining": "0"}`` or ``{"Retry-After": "1"}``."""
        extra = dict(headers or {})
        lowered = {k.lower(): str(v) for k, v in extra.items()}
        if message is None:
            message = _default_message(status, lowered)
        with self._lock:
            self._faults.append(
                _Fault(
                    method.upper(),
                    re.compile(path_regex),
                    status,
                    message,
                    {k: str(v) for k, v in extra.items()},
                    times,
                )
            )

    # ---- seeding ------------------------------------------------------------------------
    def add_commit(
        self,
        sha: str | None = None,
        *,
        tree: Mapping[str, str] | str | None = None,
        parents: Iterable[str] = (),
        message: str = "commit",
    ) -> str:
        """Store a commit and return its SHA (computed as git does unless ``sha`` is given).
        ``tree`` is ``{path: text}``, a tree SHA, or None for the empty tree."""
        with self._lock:
            state = self._state
            if isinstance(tree, str):
                if tree not in state.trees:
                    raise ValueError(f"unknown tree {tree}")
                tree_sha = tree
            else:
                tree_sha = state.tree_of_files(dict(tree or {}))
            return state.put_commit(tree_sha, list(parents), message, sha=sha)

    def seed_files(
        self, branch: str, files: Mapping[str, str | bytes | None], message: str = "Seed files"
    ) -> str:
        """Commit ``{path: text}`` on top of ``branch`` (created if missing; None deletes a
        path) and move the branch; returns the new commit SHA."""
        with self._lock:
            state = self._state
            parent = state.refs.get(f"refs/heads/{branch}")
            base = state.commits[parent]["tree"] if parent else None
            tree = state.tree_of_files(dict(files), base)
            sha = state.put_commit(tree, [parent] if parent else [], message)
            state.set_ref(f"refs/heads/{branch}", sha)
            return sha

    def set_branch(self, name: str, sha: str) -> None:
        """Point branch ``name`` at ``sha`` (an unknown SHA becomes an empty commit)."""
        with self._lock:
            self._state.ensure_commit(sha)
            self._state.set_ref(f"refs/heads/{name}", sha)

    def delete_branch(self, name: str) -> None:
        with self._lock:
            self._state.delete_ref(f"heads/{name}")

    def add_pull(
        self,
        number: int,
        head_sha: str,
        base_sha: str,
        head_ref: str = "feature",
        base_ref: str = "main",
        labels: Iterable[str] = (),
        fork: bool | str = False,
        head_repo_deleted: bool = False,
        user: str = "alice",
        *,
        title: str | None = None,
        body: str | None = "",
        draft: bool = False,
        state: str = "open",
    ) -> dict[str, Any]:
        """Seed an open pull request. ``fork`` (True, or the fork owner's login) makes
        ``head.repo.full_name`` ``someone/<repo>``; ``head_repo_deleted`` makes ``head.repo``
        null. Unknown SHAs become empty commits; missing same-repo branches are created."""
        with self._lock:
            st = self._state
            if number in st.pulls:
                raise ValueError(f"pull request #{number} already exists")
            forked = bool(fork) or head_repo_deleted
            head_owner = fork if isinstance(fork, str) else ("someone" if forked else st.owner)
            st.ensure_commit(base_sha)
            st.ensure_commit(head_sha, parent=base_sha)
            if not forked:
                st.refs.setdefault(f"refs/heads/{head_ref}", head_sha)
            elif not head_repo_deleted:
                st.forks.add(head_owner)
            st.refs.setdefault(f"refs/heads/{base_ref}", base_sha)
            pull = st.new_pull(
                number,
                title=title or f"Pull request {number}",
                body=body,
                head_ref=head_ref,
                head_sha=head_sha,
                base_ref=base_ref,
                base_sha=base_sha,
                user=user,
                head_owner=head_owner,
                head_repo="deleted" if head_repo_deleted else "fork" if forked else "own",
                draft=draft,
            )
            pull["state"] = state
            if state == "closed":
                pull["closed_at"] = pull["updated_at"]
            st.add_labels(number, list(labels))
            return copy.deepcopy(pull)

    def set_pull_files(self, number: int, files: list[dict[str, Any]] | None) -> None:
        """Fix what ``/pulls/{n}/files`` answers (GitHub's File JSON: filename, status,
        additions, …); None goes back to diffing the head against the base."""
        with self._lock:
            self._state.pull(number)["files"] = copy.deepcopy(files)

    def set_permission(self, login: str, role: str) -> None:
        """The role of ``login`` on the repository (admin, maintain, write, triage, read, none),
        answered by ``/collaborators/{login}/permission``; users never set read."""
        with self._lock:
            self._state.roles[login.lower()] = role

    def add_label(self, name: str, color: str = "ededed", description: str | None = None) -> None:
        """Create a repository label (does nothing if it exists)."""
        with self._lock:
            self._state.repo_label(name, color, description)

    def add_label_to_pull(self, number: int, name: str) -> None:
        with self._lock:
            self._state.add_labels(number, [name])

    def add_comment(self, number: int, body: str, user: str = BOT) -> dict[str, Any]:
        """Seed an issue comment on PR ``number`` written by ``user``; returns its JSON."""
        with self._lock:
            return self._state.add_comment(number, {"body": body}, user)

    # ---- inspection ---------------------------------------------------------------------
    def file_at(self, ref_or_sha: str, path: str) -> str | None:
        """Text of ``path`` in the tree of a branch, tag or commit; None if absent."""
        with self._lock:
            return self._state.file_text(ref_or_sha, path)

    def files_at(self, ref_or_sha: str) -> dict[str, str]:
        with self._lock:
            sha = self._state.resolve(ref_or_sha)
            if sha is None:
                return {}
            flat = self._state.flatten(self._state.commits[sha]["tree"])
            return {
                p: self._state.blobs[e[2]].decode(errors="replace")
                for p, e in flat.items()
                if e[1] == "blob"
            }

    def branch_sha(self, name: str) -> str | None:
        with self._lock:
            return self._state.refs.get(f"refs/heads/{name}")

    @property
    def branches(self) -> dict[str, str]:
        with self._lock:
            return {
                k[len("refs/heads/") :]: v
                for k, v in self._state.refs.items()
                if k.startswith("refs/heads/")
            }

    def commit(self, sha: str) -> dict[str, Any] | None:
        """``{"sha", "tree", "parents", "message", "author", "committer"}`` or None."""
        with self._lock:
            return copy.deepcopy(self._state.commits.get(sha))

    @property
    def pulls(self) -> dict[int, dict[str, Any]]:
        """Copies of the pull request state: number, title, body, state, draft, user,
        head_ref, head_sha, head_owner, head_repo ("own"/"fork"/"deleted"), base_ref,
        base_sha, labels (names), …"""
        with self._lock:
            return copy.deepcopy(self._state.pulls)

    def reviews_on(self, number: int) -> list[dict[str, Any]]:
        """The reviews posted on pull request ``number`` (with their line ``comments``), oldest first."""
        with self._lock:
            return copy.deepcopy([r for r in self._state.reviews if r["pull"] == number])

    def comments_on(self, number: int) -> list[dict[str, Any]]:
        """The issue comments of PR ``number`` as GitHub's JSON, oldest first."""
        with self._lock:
            st = self._state
            return [st.comment_json(c) for c in st.comments.values() if c["issue"] == number]

    def check_runs_for(self, sha: str) -> list[dict[str, Any]]:
        """Copies of the check runs on ``sha``, oldest first: id, name, head_sha, status,
        conclusion, details_url, external_id, started_at, completed_at, actions and output
        {title, summary, text, annotations (every one sent, in order)}."""
        with self._lock:
            return [
                copy.deepcopy(r) for r in self._state.check_runs.values() if r["head_sha"] == sha
            ]

    def labels_on(self, number: int) -> list[str]:
        with self._lock:
            return list(self._state.pull(number)["labels"])

    @property
    def labels(self) -> dict[str, dict[str, Any]]:
        """Repository labels: name -> {"color", "description"}."""
        with self._lock:
            return {
                v["name"]: {"color": v["color"], "description": v["description"]}
                for v in self._state.labels.values()
            }

    # ---- request handling ---------------------------------------------------------------
    def _handle(
        self, method: str, target: str, headers: Mapping[str, str], raw: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        split = urlsplit(target)
        raw_path = split.path
        rel = raw_path[len(PREFIX) :] if raw_path.startswith(PREFIX + "/") else None
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        body: Any = None
        problem: ApiError | None = None
        if raw:
            try:
                body = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                body, problem = raw.decode(errors="replace"), ApiError(400, "Problems parsing JSON")
        path = unquote(rel if rel is not None else raw_path)
        with self._lock:
            extra: dict[str, str] = {}
            try:
                data = self._answer(method, rel, path, query, headers, body, problem, extra)
                status, payload = data if isinstance(data, tuple) else (200, data)
                if isinstance(payload, _Page):
                    payload = self._paginate(payload, raw_path, query, extra)
            except ApiError as exc:
                status, payload = exc.status, exc.body()
                extra.update(exc.headers)
            except _Dropped:
                self._requests.append(RecordedRequest(method, path, query, body, 0, None))
                return 0, {}, b""
            if status == 204:
                payload = None
            self._requests.append(RecordedRequest(method, path, query, body, status, payload))
            out_headers = self._rate_headers()
        for key, value in extra.items():
            for existing in [k for k in out_headers if k.lower() == key.lower()]:
                del out_headers[existing]
            out_headers[key] = value
        encoded = b"" if status == 204 else json.dumps(payload).encode()  # payload is not shared
        if encoded:
            out_headers.setdefault("ETag", f'W/"{hashlib.sha1(encoded).hexdigest()}"')
        return status, out_headers, encoded

    def _answer(
        self,
        method: str,
        rel: str | None,
        path: str,
        query: dict[str, str],
        headers: Mapping[str, str],
        body: Any,
        problem: ApiError | None,
        extra: dict[str, str],
    ) -> Any:
        auth = headers.get("authorization", "")
        scheme, _, credential = auth.partition(" ")
        if not auth:
            raise ApiError(401, "Requires authentication")
        if scheme.lower() not in ("token", "bearer") or credential.strip() != self.token:
            raise ApiError(401, "Bad credentials")
        if rel is not None and rel != "/rate_limit":
            self._used += 1
        if self._used > self.rate_limit:
            raise ApiError(
                403,
                "API rate limit exceeded for installation ID 1.",
                headers={"X-RateLimit-Remaining": "0"},
            )
        for fault in self._faults:
            if fault.method in ("*", method) and fault.pattern.search(path):
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                if fault.status == 0:
                    raise _Dropped()
                extra.update(fault.headers)
                raise ApiError(fault.status, fault.message)
        if problem is not None:
            raise problem
        if self.read_only and method in WRITES:
            raise ApiError(403, "Resource not accessible by integration")
        if rel is None:
            raise not_found()
        for verb, pattern, handler in self._routes:
            match = pattern.match(rel)
            if match and verb == method:
                return handler(*(unquote(g) for g in match.groups()), query=query, body=body)
        raise not_found()

    def _paginate(
        self, page: _Page, raw_path: str, query: dict[str, str], extra: dict[str, str]
    ) -> Any:
        try:
            per_page = min(max(int(query.get("per_page", 30)), 1), 100)
            number = max(int(query.get("page", 1)), 1)
        except ValueError:
            per_page, number = 30, 1
        last = max((len(page.items) + per_page - 1) // per_page, 1)
        chunk = page.items[(number - 1) * per_page : number * per_page]
        base = self._state.urls.web + raw_path

        def link(n: int, rel: str) -> str:
            return f'<{base}?{urlencode({**query, "page": n})}>; rel="{rel}"'

        links = []
        if number > 1:
            links.append(link(min(number - 1, last), "prev"))
        if number < last:
            links += [link(number + 1, "next"), link(last, "last")]
        if number > 1:
            links.append(link(1, "first"))
        if links:
            extra["Link"] = ", ".join(links)
        return {"total_count": len(page.items), page.key: chunk} if page.key else chunk

    def _rate_headers(self) -> dict[str, str]:
        remaining = max(self.rate_limit - self._used, 0)
        return {
            "Content-Type": "application/json; charset=utf-8",
            "X-GitHub-Media-Type": "github.v3; format=json",
            "X-GitHub-Api-Version-Selected": "2022-11-28",
            "X-GitHub-Request-Id": uuid.uuid4().hex[:20].upper(),
            "X-RateLimit-Limit": str(self.rate_limit),
            "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Reset": str(self._reset_at),
            "X-RateLimit-Used": str(min(self._used, self.rate_limit)),
            "X-RateLimit-Resource": "core",
        }

    # ---- routes -------------------------------------------------------------------------
    def _build_routes(self) -> list[tuple[str, re.Pattern[str], Handler]]:
        st = self._state
        repo = f"(?i:{re.escape(f'/repos/{st.owner}/{st.name}')})"
        n, seg, rest = r"(\d+)", r"([^/]+)", r"(.+)"
        table: list[tuple[str, str, Handler]] = [
            ("GET", "/rate_limit", self._rate_limit_json),
            ("GET", "/user", self._forbidden),
            ("GET", f"/users/{seg}", lambda login, **_: st.user_json(login)),
            ("GET", f"/repos/{seg}/{seg}", self._other_repo),
            ("GET", "", lambda **_: st.repo_json()),
            (
                "GET",
                "/pulls",
                lambda query, **_: _Page([st.pull_json(p) for p in st.list_pulls(query)]),
            ),
            ("POST", "/pulls", lambda body, **_: (201, st.create_pull(body, self.actor))),
            ("GET", f"/pulls/{n}", lambda num, **_: st.pull_json(st.pull(int(num)))),
            ("PATCH", f"/pulls/{n}", lambda num, body, **_: st.edit_pull(int(num), body)),
            ("GET", f"/pulls/{n}/files", lambda num, **_: _Page(st.pull_files(st.pull(int(num))))),
            ("GET", f"/pulls/{n}/commits", self._pull_commits),
            (
                "POST",
                f"/pulls/{n}/reviews",
                lambda num, body, **_: (200, reviews.create_review(st, int(num), body, self.actor)),
            ),
            (
                "GET",
                f"/collaborators/{seg}/permission",
                lambda login, **_: st.permission_json(unquote(login)),
            ),
            ("GET", f"/issues/{n}", lambda num, **_: st.issue_json(st.pull(int(num)))),
            ("PATCH", f"/issues/{n}", self._edit_issue),
            ("GET", f"/issues/{n}/comments", self._list_comments),
            (
                "POST",
                f"/issues/{n}/comments",
                lambda num, body, **_: (201, st.add_comment(int(num), body, self.actor)),
            ),
            (
                "GET",
                f"/issues/comments/{n}",
                lambda cid, **_: st.comment_json(st.comment(int(cid))),
            ),
            (
                "PATCH",
                f"/issues/comments/{n}",
                lambda cid, body, **_: st.edit_comment(int(cid), body),
            ),
            ("DELETE", f"/issues/comments/{n}", self._delete_comment),
            (
                "GET",
                f"/issues/{n}/labels",
                lambda num, **_: _Page(
                    [st.label_json(st.labels[x.lower()]) for x in st.pull(int(num))["labels"]]
                ),
            ),
            (
                "POST",
                f"/issues/{n}/labels",
                lambda num, body, **_: st.add_labels(int(num), _names(body)),
            ),
            ("PUT", f"/issues/{n}/labels", self._set_labels),
            ("DELETE", f"/issues/{n}/labels", self._clear_labels),
            (
                "DELETE",
                f"/issues/{n}/labels/{seg}",
                lambda num, name, **_: st.remove_label(int(num), name),
            ),
            ("GET", "/labels", lambda **_: _Page([st.label_json(x) for x in st.labels.values()])),
            ("POST", "/labels", lambda body, **_: (201, st.create_label(body))),
            (
                "GET",
                f"/labels/{seg}",
                lambda name, **_: st.label_json(st.repo_label(name, create=False)),
            ),
            ("PATCH", f"/labels/{seg}", self._edit_label),
            ("DELETE", f"/labels/{seg}", self._delete_label),
            ("POST", "/check-runs", lambda body, **_: (201, st.write_check_run(body))),
            ("GET", f"/check-runs/{n}", lambda rid, **_: st.check_run_json(st.check_run(int(rid)))),
            (
                "PATCH",
                f"/check-runs/{n}",
                lambda rid, body, **_: st.write_check_run(body, int(rid)),
            ),
            ("GET", f"/check-runs/{n}/annotations", self._annotations),
            (
                "GET",
                f"/commits/{rest}/check-runs",
                lambda ref, query, **_: _Page(st.check_runs_on(ref, query), "check_runs"),
            ),
            ("GET", f"/commits/{rest}", self._rest_commit),
            ("GET", f"/git/ref/{rest}", lambda ref, **_: self._single_ref(ref)),
            ("GET", "/git/refs", lambda **_: _Page([st.ref_json(r) for r in sorted(st.refs)])),
            ("GET", f"/git/refs/{rest}", self._legacy_ref),
            (
                "GET",
                r"/git/matching-refs/(.*)",
                lambda ref, **_: _Page(
                    [st.ref_json(r) for r in sorted(st.refs) if r.startswith(f"refs/{ref}")]
                ),
            ),
            ("POST", "/git/refs", lambda body, **_: (201, st.create_ref(body))),
            # Not GitHub's API: what a push to the repository's git remote does (helpers/review_pr.py).
            ("POST", "/_fake/push", lambda body, **_: (204, self._pushed(body))),
            ("PATCH", f"/git/refs/{rest}", lambda ref, body, **_: st.update_ref(ref, body)),
            ("DELETE", f"/git/refs/{rest}", lambda ref, **_: (204, st.delete_ref(ref))),
            ("POST", "/git/blobs", lambda body, **_: (201, st.create_blob(body))),
            ("GET", f"/git/blobs/{seg}", lambda sha, **_: st.blob_json(sha)),
            ("POST", "/git/trees", lambda body, **_: (201, st.create_tree(body))),
            ("GET", f"/git/trees/{rest}", self._tree),
            ("POST", "/git/commits", lambda body, **_: (201, st.create_commit(body))),
            ("GET", f"/git/commits/{seg}", self._git_commit),
            ("GET", "/branches", lambda **_: _Page([st.branch_json(b) for b in self.branches])),
            ("GET", f"/branches/{rest}", self._branch),
            ("GET", "/contents", self._contents),
            ("GET", r"/contents/(.*)", self._contents),
            (
                "GET",
                r"/compare/(.+?)\.\.\.(.+)",
                lambda base, head, **_: st.compare_json(base, head),
            ),
        ]
        top = {"/rate_limit", "/user"}
        routes = []
        for verb, pattern, handler in table:
            full = (
                pattern
                if pattern in top or pattern.startswith(("/users/", "/repos/"))
                else repo + pattern
            )
            routes.append((verb, re.compile(f"^{full}$"), handler))
        # The repository's own routes must win over the generic /repos/{o}/{r}.
        return sorted(routes, key=lambda r: r[1].pattern.startswith("^/repos/"))

    def _pushed(self, body: Any) -> None:
        st = self._state
        if set(body["sha"]) == {"0"}:
            if body["ref"] in st.refs:
                st.delete_ref(body["ref"].removeprefix("refs/"))
            return
        st.ensure_commit(body["sha"], parent=body["parent"])
        st.set_ref(body["ref"], body["sha"])

    def _rate_limit_json(self, **_: Any) -> dict[str, Any]:
        core = {
            "limit": self.rate_limit,
            "remaining": max(self.rate_limit - self._used, 0),
            "reset": self._reset_at,
            "used": self._used,
            "resource": "core",
        }
        return {"resources": {"core": core}, "rate": core}

    @staticmethod
    def _forbidden(**_: Any) -> Any:
        raise ApiError(403, "Resource not accessible by integration")

    def _other_repo(self, owner: str, name: str, **_: Any) -> Any:
        st = self._state
        if name.lower() == st.name.lower() and owner.lower() == st.owner.lower():
            return st.repo_json()
        if name.lower() == st.name.lower() and owner in st.forks:
            return st.repo_json(owner)
        raise not_found()

    def _pull_commits(self, num: str, **_: Any) -> Any:
        st = self._state
        pull = st.pull(int(num))
        return _Page(
            [
                st.rest_commit_json(s, files=False)
                for s in st.commits_between(pull["base_sha"], pull["head_sha"])
            ]
        )

    def _edit_issue(self, num: str, body: Any, **_: Any) -> Any:
        self._state.edit_pull(int(num), body)
        return self._state.issue_json(self._state.pull(int(num)))

    def _list_comments(self, num: str, query: dict[str, str], **_: Any) -> Any:
        st = self._state
        st.pull(int(num))
        since = query.get("since", "")
        return _Page(
            [
                st.comment_json(c)
                for c in st.comments.values()
                if c["issue"] == int(num) and c["updated_at"] >= since
            ]
        )

    def _delete_comment(self, cid: str, **_: Any) -> Any:
        self._state.comment(int(cid))
        del self._state.comments[int(cid)]
        return 204, None

    def _set_labels(self, num: str, body: Any, **_: Any) -> Any:
        names = _names(body)
        self._state.pull(int(num))["labels"] = []
        return self._state.add_labels(int(num), names)

    def _clear_labels(self, num: str, **_: Any) -> Any:
        self._state.pull(int(num))["labels"] = []
        return 204, None

    def _edit_label(self, name: str, body: Any, **_: Any) -> Any:
        st = self._state
        label = st.repo_label(name, create=False)
        if not isinstance(body, dict):
            raise ApiError(400, "Problems parsing JSON")
        new = body.get("new_name") or body.get("name") or label["name"]
        if new.lower() != name.lower() and new.lower() in st.labels:
            raise invalid("Label", "name", "already_exists")
        del st.labels[name.lower()]
        for pull in st.pulls.values():
            pull["labels"] = [new if x.lower() == name.lower() else x for x in pull["labels"]]
        label["name"] = new
        label["color"] = str(body.get("color", label["color"])).lstrip("#")
        label["description"] = body.get("description", label["description"])
        st.labels[new.lower()] = label
        return st.label_json(label)

    def _delete_label(self, name: str, **_: Any) -> Any:
        st = self._state
        st.repo_label(name, create=False)
        del st.labels[name.lower()]
        for pull in st.pulls.values():
            pull["labels"] = [x for x in pull["labels"] if x.lower() != name.lower()]
        return 204, None

    def _annotations(self, rid: str, **_: Any) -> Any:
        run = self._state.check_run(int(rid))
        return _Page([self._state.annotation_json(run, a) for a in run["output"]["annotations"]])

    def _rest_commit(self, ref: str, **_: Any) -> Any:
        sha = self._state.resolve(ref)
        if sha is None:
            raise ApiError(422, f"No commit found for SHA: {ref}")
        return self._state.rest_commit_json(sha)

    def _single_ref(self, ref: str) -> Any:
        if f"refs/{ref}" not in self._state.refs:
            raise not_found()
        return self._state.ref_json(f"refs/{ref}")

    def _legacy_ref(self, ref: str, **_: Any) -> Any:
        """``/git/refs/{ref}``: the ref itself, else the list of refs it prefixes, else 404."""
        st = self._state
        if f"refs/{ref}" in st.refs:
            return st.ref_json(f"refs/{ref}")
        found = [st.ref_json(r) for r in sorted(st.refs) if r.startswith(f"refs/{ref}")]
        if not found:
            raise not_found()
        return found

    def _tree(self, sha: str, query: dict[str, str], **_: Any) -> Any:
        st = self._state
        if sha not in st.trees:
            commit = st.resolve(sha)
            if commit is None:
                raise not_found()
            sha = st.commits[commit]["tree"]
        recursive = query.get("recursive", "") not in ("", "0", "false")
        return st.tree_json(sha, recursive)

    def _git_commit(self, sha: str, **_: Any) -> Any:
        if sha not in self._state.commits:
            raise not_found()
        return self._state.commit_json(sha)

    def _branch(self, branch: str, **_: Any) -> Any:
        if f"refs/heads/{branch}" not in self._state.refs:
            raise ApiError(404, "Branch not found")
        return self._state.branch_json(branch)

    def _contents(self, path: str = "", *, query: dict[str, str], **_: Any) -> Any:
        st = self._state
        ref = query.get("ref") or st.default_branch
        commit = st.resolve(ref)
        if commit is None:
            raise ApiError(404, f"No commit found for the ref {ref}")
        path = path.strip("/")
        flat = st.flatten(st.commits[commit]["tree"])
        if path in flat:
            return st.content_json(commit, path, flat, with_content=True)
        prefix = f"{path}/" if path else ""
        children = sorted({p[len(prefix) :].split("/", 1)[0] for p in flat if p.startswith(prefix)})
        if not children:
            raise not_found()
        return [st.content_json(commit, prefix + c, flat, with_content=False) for c in children]


def _names(body: Any) -> list[Any]:
    names = body.get("labels") if isinstance(body, dict) else body
    if not isinstance(names, list):
        raise invalid("Label", "labels", "invalid")
    return names


def _default_message(status: int, headers: dict[str, str]) -> str:
    if status == 403 and headers.get("x-ratelimit-remaining") == "0":
        return "API rate limit exceeded for installation ID 1."
    if status == 429 or (status == 403 and "retry-after" in headers):
        return "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
    known = {
        401: "Bad credentials",
        403: "Resource not accessible by integration",
        404: "Not Found",
        422: "Validation Failed",
        500: "Server Error",
        502: "Server Error",
    }
    if status in known:
        return known[status]
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Error"
