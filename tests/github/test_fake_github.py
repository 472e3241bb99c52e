"""The fake GitHub REST API, driven by the real PyGithub (throttles off) and by raw HTTP."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import github
import pytest
import requests
from github import Auth, InputGitTreeElement

from fakes.github import FakeGitHub

SKILL = "skills/x/SKILL.md"


def client(fake: FakeGitHub, token: str = "ghs_test", **kwargs: Any) -> github.Github:
    return github.Github(
        auth=Auth.Token(token),
        base_url=fake.api_url,
        retry=None,
        seconds_between_requests=None,
        seconds_between_writes=None,
        **kwargs,
    )


@pytest.fixture
def fake(fake: FakeGitHub) -> FakeGitHub:
    """The shared fake GitHub with a skill and a README on main."""
    fake.seed_files("main", {SKILL: "# X\nold\n", "README.md": "readme\n"})
    return fake


@pytest.fixture
def repo(fake: FakeGitHub) -> Any:
    return client(fake).get_repo(fake.full_name)


def annotations(count: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "path": SKILL,
            "start_line": i + 1,
            "end_line": i + 1,
            "annotation_level": "warning",
            "message": f"note {i}",
        }
        for i in range(start, start + count)
    ]


def test_repository_and_pull_requests_from_forks(fake: FakeGitHub, repo: Any) -> None:
    main = fake.branch_sha("main")
    fake.add_pull(1, "a" * 40, main, head_ref="own-branch", labels=["skill"])
    fake.add_pull(2, "b" * 40, main, head_ref="patch", fork=True, user="mallory")
    fake.add_pull(3, "c" * 40, main, head_ref="gone", head_repo_deleted=True)

    assert (repo.full_name, repo.default_branch, repo.private) == ("octo/skills", "main", False)
    assert repo.owner.login == "octo"
    assert fake.api_url == fake.url + "/api/v3" and repo.url.startswith(fake.api_url)

    own = repo.get_pull(1)
    assert (own.number, own.state, own.head.sha, own.base.sha) == (1, "open", "a" * 40, main)
    assert own.head.repo.full_name == own.base.repo.full_name == "octo/skills"
    assert own.head.ref == "own-branch" and [label.name for label in own.labels] == ["skill"]
    assert own.html_url == f"{fake.url}/octo/skills/pull/1"
    assert isinstance(own.created_at.year, int)

    forked = repo.get_pull(2)
    assert forked.head.repo.full_name == "someone/skills" != forked.base.repo.full_name
    assert forked.head.repo.fork is True and forked.user.login == "mallory"
    assert forked.head.label == "someone:patch"

    deleted = repo.get_pull(3)
    assert deleted.head.repo is None and deleted.base.repo.full_name == "octo/skills"

    with pytest.raises(github.UnknownObjectException):
        repo.get_pull(99)

    issue = repo.get_issue(1)
    assert issue.pull_request is not None and issue.title == own.title


def test_listing_pulls_filters_like_github(fake: FakeGitHub, repo: Any) -> None:
    main = fake.branch_sha("main")
    fake.add_pull(1, "a" * 40, main, head_ref="one")
    fake.add_pull(2, "b" * 40, main, head_ref="two")
    fake.add_pull(3, "c" * 40, main, head_ref="one", fork=True)
    repo.get_pull(2).edit(state="closed")

    def numbers(**kwargs: Any) -> list[int]:
        return [p.number for p in repo.get_pulls(**kwargs)]

    assert numbers(state="open") == [3, 1]  # newest first
    assert numbers(state="closed") == [2]
    assert numbers(state="all", base="main") == [3, 2, 1]
    assert numbers(state="open", head="octo:one", base="main") == [1]
    assert numbers(state="open", head="someone:one") == [3]
    assert numbers(state="open", head="octo:two") == []
    # GitHub silently ignores a head filter without the "owner:" prefix.
    assert numbers(state="open", head="one") == [3, 1]
    assert numbers(state="open", base="develop") == []


def test_comments_paginate_edit_delete_and_refuse_long_bodies(fake: FakeGitHub, repo: Any) -> None:
    fake.add_pull(1, "a" * 40, fake.branch_sha("main"))
    pr = repo.get_pull(1)
    for i in range(35):
        pr.create_issue_comment(f"comment {i}")

    listed = list(pr.get_issue_comments())
    assert [c.body for c in listed] == [f"comment {i}" for i in range(35)]
    pages = [
        r for r in fake.requests if r.method == "GET" and r.path.endswith("/issues/1/comments")
    ]
    assert [r.query.get("page") for r in pages] == [None, "2"]
    assert pr.get_issue_comments().totalCount == 35

    first = listed[0]
    assert first.user.login == "github-actions[bot]" and first.user.type == "Bot"
    assert first.html_url == f"{fake.url}/octo/skills/pull/1#issuecomment-{first.id}"
    first.edit("edited <!-- marker -->")
    assert first.body == "edited <!-- marker -->"
    assert fake.comments_on(1)[0]["body"] == "edited <!-- marker -->"
    assert repo.get_issue(1).get_comments()[0].body == "edited <!-- marker -->"

    exact = pr.create_issue_comment("x" * 65536)
    assert len(exact.body) == 65536
    with pytest.raises(github.GithubException) as info:
        pr.create_issue_comment("x" * 65537)
    assert info.value.status == 422
    assert "Body is too long (maximum is 65536 characters)" in json.dumps(info.value.data)
    with pytest.raises(github.GithubException) as info:
        first.edit("y" * 65537)
    assert info.value.status == 422
    assert len(fake.comments_on(1)) == 36

    first.delete()
    assert len(fake.comments_on(1)) == 35
    with pytest.raises(github.UnknownObjectException):
        repo.get_issue(1).get_comment(first.id)


def test_labels(fake: FakeGitHub, repo: Any) -> None:
    fake.add_pull(1, "a" * 40, fake.branch_sha("main"))
    created = repo.create_label("skillopt:trained", "0e8a16", "Made by skillopt")
    assert (created.name, created.color, created.description) == (
        "skillopt:trained",
        "0e8a16",
        "Made by skillopt",
    )
    assert repo.get_label("skillopt:trained").color == "0e8a16"
    with pytest.raises(github.GithubException) as info:
        repo.create_label("skillopt:trained", "ffffff")
    assert info.value.status == 422
    with pytest.raises(github.UnknownObjectException):
        repo.get_label("nope")

    pr = repo.get_pull(1)
    pr.add_to_labels("skillopt:trained", "needs-review")
    assert fake.labels_on(1) == ["skillopt:trained", "needs-review"]
    assert [label.name for label in repo.get_issue(1).get_labels()] == fake.labels_on(1)
    assert fake.labels["needs-review"]["color"] == "ededed"  # created on first use, as GitHub does
    pr.remove_from_labels("needs-review")
    assert [label.name for label in pr.get_labels()] == ["skillopt:trained"]
    with pytest.raises(github.GithubException) as info:  # "Label does not exist": not Unknown…
        pr.remove_from_labels("needs-review")
    assert info.value.status == 404
    fake.add_label_to_pull(1, "seeded")
    assert "seeded" in [label.name for label in repo.get_pull(1).labels]


def test_check_runs_limit_and_append_annotations(fake: FakeGitHub, repo: Any) -> None:
    sha = fake.branch_sha("main")
    run = repo.create_check_run(
        "skillopt",
        head_sha=sha,
        status="in_progress",
        details_url=f"{fake.url}/details",
        external_id="run-1",
        output={"title": "Evaluating", "summary": "so far", "annotations": annotations(50)},
    )
    assert (run.status, run.conclusion, run.output.annotations_count) == ("in_progress", None, 50)

    run.edit(
        status="completed",
        conclusion="failure",
        output={
            "title": "Done",
            "summary": "2 regressions",
            "text": "details",
            "annotations": annotations(5, start=50),
        },
    )
    assert (run.status, run.conclusion, run.output.title) == ("completed", "failure", "Done")
    assert run.output.annotations_count == 55
    assert [a.message for a in run.get_annotations()] == [f"note {i}" for i in range(55)]
    stored = fake.check_runs_for(sha)
    assert len(stored) == 1 and len(stored[0]["output"]["annotations"]) == 55
    assert stored[0]["output"]["summary"] == "2 regressions"

    fetched = repo.get_check_run(run.id)
    assert fetched.conclusion == "failure" and fetched.head_sha == sha
    assert [r.id for r in repo.get_commit(sha).get_check_runs()] == [run.id]

    with pytest.raises(github.GithubException) as info:
        repo.create_check_run(
            "skillopt",
            head_sha=sha,
            output={"title": "t", "summary": "s", "annotations": annotations(51)},
        )
    assert info.value.status == 422
    with pytest.raises(github.GithubException) as info:
        run.edit(output={"title": "t", "summary": "s", "annotations": annotations(51)})
    assert info.value.status == 422
    with pytest.raises(github.GithubException) as info:
        repo.create_check_run(
            "skillopt", head_sha=sha, output={"title": "t", "summary": "s" * 65536}
        )
    assert info.value.status == 422
    with pytest.raises(github.GithubException) as info:
        repo.create_check_run("skillopt", head_sha="f" * 40)
    assert info.value.status == 422
    assert len(fake.check_runs_for(sha)) == 1
    assert len(fake.check_runs_for(sha)[0]["output"]["annotations"]) == 55


def test_git_data_flow_opens_and_updates_a_pull_request(fake: FakeGitHub, repo: Any) -> None:
    main = repo.get_branch("main").commit.sha
    assert main == fake.branch_sha("main") and repo.get_git_ref("heads/main").object.sha == main

    def commit_files(files: dict[str, str], parent: str, message: str) -> Any:
        base_tree = repo.get_git_commit(parent).tree
        elements = [
            InputGitTreeElement(path, "100644", "blob", sha=repo.create_git_blob(text, "utf-8").sha)
            for path, text in files.items()
        ]
        tree = repo.create_git_tree(elements, base_tree)
        return repo.create_git_commit(message, tree, [repo.get_git_commit(parent)])

    first = commit_files({SKILL: "# X\nnew\n"}, main, "Train skill x")
    assert first.parents[0].sha == main and first.message == "Train skill x"
    tree = repo.get_git_tree(first.tree.sha, recursive=True)
    assert {e.path for e in tree.tree if e.type == "blob"} == {SKILL, "README.md"}

    ref = repo.create_git_ref("refs/heads/skillopt/train-x", first.sha)
    assert ref.ref == "refs/heads/skillopt/train-x"
    with pytest.raises(github.GithubException) as info:
        repo.create_git_ref("refs/heads/skillopt/train-x", first.sha)
    assert info.value.status == 422 and info.value.message == "Reference already exists"

    pr = repo.create_pull(title="Train x", body="first", head="skillopt/train-x", base="main")
    assert (pr.number, pr.head.ref, pr.head.sha, pr.base.ref) == (
        1,
        "skillopt/train-x",
        first.sha,
        "main",
    )
    assert [f.filename for f in pr.get_files()] == [SKILL]
    with pytest.raises(github.GithubException) as info:
        repo.create_pull(title="Again", body="", head="skillopt/train-x", base="main")
    assert info.value.status == 422
    assert "A pull request already exists for octo:skillopt/train-x." in json.dumps(info.value.data)
    with pytest.raises(github.GithubException) as info:
        repo.create_pull(title="Missing", body="", head="no-such-branch", base="main")
    assert info.value.status == 422

    found = list(repo.get_pulls(state="open", head="octo:skillopt/train-x", base="main"))
    assert [p.number for p in found] == [1]

    # A retrained commit on main, not on top of the old branch: a fast-forward is refused.
    second = commit_files({SKILL: "# X\nnewer\n", "skills/x/extra.md": "extra\n"}, main, "Retrain")
    live = repo.get_git_ref("heads/skillopt/train-x")
    with pytest.raises(github.GithubException) as info:
        live.edit(second.sha)
    assert info.value.status == 422 and info.value.message == "Update is not a fast forward"
    live.edit(second.sha, force=True)
    assert fake.branch_sha("skillopt/train-x") == second.sha
    assert fake.file_at("skillopt/train-x", SKILL) == "# X\nnewer\n"
    assert fake.file_at(main, SKILL) == "# X\nold\n"
    assert fake.file_at(second.sha, "skills/x/extra.md") == "extra\n"

    pr = found[0]
    pr.edit(body="second")
    refreshed = repo.get_pull(1)
    assert refreshed.head.sha == second.sha and refreshed.body == "second"
    assert fake.pulls[1]["body"] == "second"
    content = repo.get_contents(SKILL, ref="skillopt/train-x")
    assert content.decoded_content == b"# X\nnewer\n"
    comparison = repo.compare("main", "skillopt/train-x")
    assert (comparison.ahead_by, comparison.behind_by) == (1, 0)
    assert {f.filename: f.status for f in comparison.files} == {
        SKILL: "modified",
        "skills/x/extra.md": "added",
    }

    live.delete()
    assert fake.branch_sha("skillopt/train-x") is None
    assert repo.get_pull(1).state == "closed"  # GitHub closes a PR whose head branch is deleted
    with pytest.raises(github.UnknownObjectException):
        repo.get_git_ref("heads/skillopt/train-x")
    assert [r.path for r in fake.requests[-1:]] == [
        "/repos/octo/skills/git/ref/heads/skillopt/train-x"
    ]


def test_legacy_ref_paths_and_seeding_helpers(fake: FakeGitHub) -> None:
    gh = client(fake)
    gh.FIX_REPO_GET_GIT_REF = False  # PyGithub's old behaviour: GET /git/refs/heads/main
    repo = gh.get_repo(fake.full_name)
    assert repo.get_git_ref("refs/heads/main").object.sha == fake.branch_sha("main")
    assert fake.requests[-1].path == "/repos/octo/skills/git/refs/heads/main"

    first = fake.seed_files("topic", {"a.md": "A", SKILL: None})
    assert fake.files_at("topic") == {"a.md": "A"}
    second = fake.seed_files("topic", {"b.md": "B"})
    assert fake.commit(second)["parents"] == [first]
    assert fake.files_at(second) == {"a.md": "A", "b.md": "B"}
    assert fake.file_at(first, "b.md") is None
    assert {r.ref for r in repo.get_git_matching_refs("heads/")} == {
        "refs/heads/main",
        "refs/heads/topic",
    }
    assert [(c.path, c.type) for c in repo.get_contents("")] == [
        ("README.md", "file"),
        ("skills", "dir"),
    ]
    assert sorted(c.path for c in repo.get_contents("", ref="topic")) == ["a.md", "b.md"]

    orphan = fake.add_commit(tree={"only.md": "1"}, message="orphan")
    fake.set_branch("orphan", orphan)
    assert repo.get_branch("orphan").commit.sha == orphan
    assert repo.compare("main", "orphan").status == "diverged"


def test_read_only_token_refuses_writes_but_reads(fake: FakeGitHub, repo: Any) -> None:
    fake.add_pull(1, "a" * 40, fake.branch_sha("main"))
    pr = repo.get_pull(1)
    fake.read_only = True
    for write in (
        lambda: pr.create_issue_comment("hi"),
        lambda: pr.add_to_labels("x"),
        lambda: repo.create_check_run("c", head_sha=fake.branch_sha("main")),
        lambda: repo.create_git_blob("x", "utf-8"),
    ):
        with pytest.raises(github.GithubException) as info:
            write()
        assert info.value.status == 403
        assert info.value.message == "Resource not accessible by integration"
    assert repo.get_pull(1).title == pr.title and list(pr.get_issue_comments()) == []
    assert fake.comments_on(1) == [] and fake.labels_on(1) == []
    assert fake.check_runs_for(fake.branch_sha("main")) == []
    assert [r.status for r in fake.writes()] == [403] * 4


def test_credentials(fake: FakeGitHub) -> None:
    with pytest.raises(github.BadCredentialsException):
        client(fake, token="ghs_wrong").get_repo(fake.full_name)
    bearer = fake.requests[-1]
    assert bearer.status == 401 and bearer.response["message"] == "Bad credentials"
    conn = http.client.HTTPConnection("127.0.0.1", int(fake.url.rsplit(":", 1)[1]))
    conn.request("GET", "/api/v3/repos/octo/skills", headers={"Authorization": "Bearer ghs_test"})
    response = conn.getresponse()
    assert response.status == 200 and json.loads(response.read())["full_name"] == "octo/skills"
    conn.request("GET", "/api/v3/repos/octo/skills")
    response = conn.getresponse()
    assert response.status == 401 and json.loads(response.read())["documentation_url"]
    conn.close()


def test_fault_injection(fake: FakeGitHub, repo: Any) -> None:
    fake.add_pull(1, "a" * 40, fake.branch_sha("main"))
    fake.fail_next("GET", r"/pulls/1$", 404)
    with pytest.raises(github.UnknownObjectException):
        repo.get_pull(1)
    assert repo.get_pull(1).number == 1  # each fault applies once

    fake.fail_next("GET", r"/pulls/1$", 403, headers={"X-RateLimit-Remaining": "0"})
    with pytest.raises(github.RateLimitExceededException) as info:
        repo.get_pull(1)
    assert info.value.headers["x-ratelimit-remaining"] == "0"

    fake.fail_next("*", r"/pulls/1$", 500)
    with pytest.raises(github.GithubException) as info:
        repo.get_pull(1)
    assert info.value.status == 500
    assert repo.get_pull(1).number == 1

    fake.fail_next("POST", r"/issues/1/comments$", 429, headers={"Retry-After": "7"})
    assert repo.get_pull(1).number == 1  # a GET does not consume a POST fault
    with pytest.raises(github.GithubException) as info:
        repo.get_pull(1).create_issue_comment("hi")
    assert info.value.status == 429 and info.value.headers["retry-after"] == "7"
    repo.get_pull(1).create_issue_comment("hi")
    assert [c["body"] for c in fake.comments_on(1)] == ["hi"]


def test_lasting_faults_and_dropped_connections(fake: FakeGitHub, repo: Any) -> None:
    fake.add_pull(1, "a" * 40, fake.branch_sha("main"))
    [comment] = [repo.get_pull(1).create_issue_comment("hi")]
    fake.fail_next("PATCH", r"/issues/comments/\d+$", 403, times=None)  # a permission the token lacks
    for _ in range(3):
        with pytest.raises(github.GithubException) as info:
            comment.edit("edited")
        assert info.value.status == 403
    fake.fail_next("POST", r"/issues/1/comments$", 500, times=2)
    for _ in range(2):
        with pytest.raises(github.GithubException):
            repo.get_pull(1).create_issue_comment("again")
    repo.get_pull(1).create_issue_comment("again")
    fake.fail_next("GET", r"/pulls/1$", 0)  # the connection closes without an answer
    with pytest.raises(requests.ConnectionError):
        repo.get_pull(1)
    assert repo.get_pull(1).number == 1
    assert [c["body"] for c in fake.comments_on(1)] == ["hi", "again"]
    assert [r.status for r in fake.requests if r.path.endswith("/pulls/1")][-2:] == [0, 200]


def test_rate_limit_headers_decrease_until_github_refuses() -> None:
    with FakeGitHub(rate_limit=3) as fake:
        gh = client(fake)
        gh.get_repo(fake.full_name)
        assert gh.rate_limiting == (2, 3)
        gh.get_repo(fake.full_name)
        gh.get_repo(fake.full_name)
        assert gh.rate_limiting == (0, 3)
        with pytest.raises(github.RateLimitExceededException):
            gh.get_repo(fake.full_name)


def test_raw_http_keep_alive_links_and_errors(fake: FakeGitHub) -> None:
    fake.add_pull(1, "a" * 40, fake.branch_sha("main"))
    for i in range(5):
        fake.add_comment(1, f"c{i}")
    conn = http.client.HTTPConnection("127.0.0.1", int(fake.url.rsplit(":", 1)[1]))
    auth = {"Authorization": "token ghs_test"}
    remaining = []
    for page in (1, 2, 3):
        conn.request(
            "GET",
            f"/api/v3/repos/octo/skills/issues/1/comments?per_page=2&page={page}",
            headers=auth,
        )
        response = conn.getresponse()
        body = response.read()
        assert response.status == 200 and len(body) == int(response.getheader("Content-Length"))
        assert [c["body"] for c in json.loads(body)] == [f"c{i}" for i in range(5)][
            2 * page - 2 : 2 * page
        ]
        remaining.append(int(response.getheader("X-RateLimit-Remaining")))
        assert response.getheader("X-RateLimit-Resource") == "core"
        links = response.getheader("Link")
        if page == 1:
            assert links == (
                f'<{fake.api_url}/repos/octo/skills/issues/1/comments?per_page=2&page=2>; rel="next", '
                f'<{fake.api_url}/repos/octo/skills/issues/1/comments?per_page=2&page=3>; rel="last"'
            )
        if page == 3:
            assert 'rel="next"' not in links and 'rel="prev"' in links and 'rel="first"' in links
    assert remaining == sorted(remaining, reverse=True) and len(set(remaining)) == 3
    conn.request("GET", "/api/v3/repos/octo/skills/no/such/route", headers=auth)
    response = conn.getresponse()
    assert response.status == 404 and json.loads(response.read())["message"] == "Not Found"
    conn.request("GET", "/api/v3/repos/octo/other", headers=auth)
    response = conn.getresponse()
    assert response.status == 404 and response.read()
    conn.close()


def test_every_url_in_every_response_uses_the_fake_base(fake: FakeGitHub, repo: Any) -> None:
    main = fake.branch_sha("main")
    fake.add_pull(1, "a" * 40, main, fork=True, labels=["x"])
    fake.add_pull(2, "b" * 40, main, head_ref="feature-2")
    pr = repo.get_pull(1)
    pr.create_issue_comment("hello").edit("hello again")
    list(pr.get_issue_comments())
    list(repo.get_pulls(state="all"))
    repo.get_issue(1)
    repo.get_pull(2).head.repo.full_name  # noqa: B018 - reading completes nested objects
    pr.head.repo.full_name  # noqa: B018
    repo.get_label("x")
    run = repo.create_check_run(
        "c", head_sha=main, output={"title": "t", "summary": "s", "annotations": annotations(2)}
    )
    list(run.get_annotations())
    list(repo.get_commit(main).get_check_runs())
    blob = repo.create_git_blob("text", "utf-8")
    repo.get_git_blob(blob.sha)
    tree = repo.create_git_tree(
        [InputGitTreeElement("a.md", "100644", "blob", sha=blob.sha)], repo.get_git_tree(main)
    )
    commit = repo.create_git_commit("m", tree, [repo.get_git_commit(main)])
    repo.create_git_ref("refs/heads/new", commit.sha).edit(commit.sha)
    repo.get_branch("new")
    repo.get_contents(SKILL)
    repo.get_contents("skills")
    repo.compare("main", "new")
    repo.create_pull(title="t", body="b", head="new", base="main")
    list(repo.get_pull(3).get_files())

    def walk(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
        if isinstance(value, dict):
            for k, v in value.items():
                yield from walk(v, k)
        elif isinstance(value, list):
            for item in value:
                yield from walk(item, key)
        elif isinstance(value, str) and (value.startswith("http") or key.endswith(("url", "href"))):
            yield key, value

    checked = 0
    for request in fake.requests:
        assert request.status < 400, request
        for key, value in walk(request.response):
            checked += 1
            assert value.startswith(fake.url + "/"), (request.path, key, value)
            if key in ("url", "issue_url", "comments_url", "annotations_url"):
                assert value.startswith(fake.api_url + "/"), (request.path, key, value)
    assert checked > 500


def test_records_requests(fake: FakeGitHub, repo: Any) -> None:
    fake.add_pull(1, "a" * 40, fake.branch_sha("main"))
    fake.clear_requests()
    pr = repo.get_pull(1)
    pr.create_issue_comment("recorded")
    pr.add_to_labels("l")
    assert [(r.method, r.path) for r in fake.requests] == [
        ("GET", "/repos/octo/skills/pulls/1"),
        ("POST", "/repos/octo/skills/issues/1/comments"),
        ("POST", "/repos/octo/skills/issues/1/labels"),
    ]
    assert [(r.method, r.body) for r in fake.writes()] == [
        ("POST", {"body": "recorded"}),
        ("POST", ["l"]),
    ]
    assert [r.status for r in fake.writes()] == [201, 200]
