"""Pull-request reviews in the fake GitHub: ``POST /pulls/{n}/reviews`` with line comments,
checked as GitHub checks them (each comment's path is a file of the pull request and its lines lie
in one hunk of that file's patch, new side), and the reviews and their comments for the tests."""

from __future__ import annotations

import re
from typing import Any

from fakes.github_state import ApiError, RepoState, now_iso

EVENTS = ("COMMENT", "APPROVE", "REQUEST_CHANGES")
_HUNK_RE = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")
NOT_IN_DIFF = "Pull request review thread line must be part of the diff"


def hunks(patch: str | None) -> list[tuple[int, int]]:
    found = []
    for line in (patch or "").splitlines():
        m = _HUNK_RE.match(line)
        if m and (count := int(m.group(2) if m.group(2) is not None else 1)):
            found.append((int(m.group(1)), int(m.group(1)) + count - 1))
    return found


def _check_comment(files: dict[str, dict[str, Any]], c: Any) -> None:
    if not isinstance(c, dict) or not isinstance(c.get("body"), str) or not c.get("path"):
        raise ApiError(422, "Unprocessable Entity", [{"message": "a review comment needs path and body"}])
    if c["path"] not in files:
        raise ApiError(422, "Unprocessable Entity", ["Path could not be resolved"])
    if "position" in c:
        raise ApiError(422, "Unprocessable Entity", ["this fake takes line and side, not position"])
    line, start = c.get("line"), c.get("start_line", c.get("line"))
    if not isinstance(line, int) or not isinstance(start, int) or start > line:
        raise ApiError(422, "Unprocessable Entity", ["Line could not be resolved"])
    if c.get("side", "RIGHT") != "RIGHT" or c.get("start_side", "RIGHT") != "RIGHT":
        raise ApiError(422, "Unprocessable Entity", ["this fake takes comments on the new side only"])
    if not any(lo <= start and line <= hi for lo, hi in hunks(files[c["path"]].get("patch"))):
        raise ApiError(422, "Unprocessable Entity", [NOT_IN_DIFF])


def create_review(st: RepoState, number: int, body: Any, actor: str) -> dict[str, Any]:
    pull = st.pull(number)
    if not isinstance(body, dict):
        raise ApiError(400, "Problems parsing JSON")
    event, comments = body.get("event"), body.get("comments") or []
    if event is not None and event not in EVENTS:
        raise ApiError(422, "Unprocessable Entity", [f"unknown event {event}"])
    if event in ("COMMENT", "REQUEST_CHANGES") and not (body.get("body") or comments):
        raise ApiError(422, "Unprocessable Entity", ["Review body is required"])
    commit = body.get("commit_id") or pull["head_sha"]
    if commit not in st.commits:
        raise ApiError(422, "Unprocessable Entity", ["Commit not found"])
    files = {f["filename"]: f for f in st.pull_files(pull)}
    for c in comments:
        _check_comment(files, c)
    rid = st.next_id("review", 80_000_000)
    review = {"id": rid, "pull": number, "user": actor, "body": body.get("body") or "", "commit_id": commit,
              "state": {"COMMENT": "COMMENTED", "APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED"}
              .get(event or "", "PENDING"), "submitted_at": now_iso(),
              "comments": [dict(c, id=st.next_id("review_comment", 90_000_000)) for c in comments]}
    st.reviews.append(review)
    return review_json(st, review)


def review_json(st: RepoState, review: dict[str, Any]) -> dict[str, Any]:
    html = f"{st.web}/pull/{review['pull']}#pullrequestreview-{review['id']}"
    return {"id": review["id"], "node_id": f"PRR_{review['id']}", "user": st.user_json(review["user"]),
            "body": review["body"], "state": review["state"], "commit_id": review["commit_id"],
            "html_url": html, "pull_request_url": f"{st.api}/pulls/{review['pull']}",
            "submitted_at": review["submitted_at"], "author_association": "NONE",
            "_links": {"html": {"href": html}, "pull_request": {"href": f"{st.api}/pulls/{review['pull']}"}}}
