"""The Action's settings: one frozen record built from the runner's environment and event payload.

``action.yml`` maps every input into an ``SKILLOPT_*`` environment variable (composite actions do
not export ``INPUT_*``); event data is read from ``GITHUB_EVENT_PATH``, never interpolated into a
shell. A bad value names the variable and lists what is allowed.

GitHub calls are retried (see :mod:`skillopt_ci.github.retry`): ``SKILLOPT_GITHUB_ATTEMPTS``
(default 3, 1 turns retrying off) and ``SKILLOPT_GITHUB_BACKOFF`` (seconds before the first retry,
doubled each time; default 2) tune it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.shard import Shard, parse_shard
from skillopt_ci.github.retry import RetryPolicy

MODES = ("auto", "gate", "eval", "train")
TRUE = ("true", "yes", "1", "on")
FALSE = ("false", "no", "0", "off", "")


@dataclass(frozen=True)
class PullRequest:
    number: int
    head_sha: str
    base_sha: str
    head_ref: str
    base_ref: str
    labels: tuple[str, ...]
    fork: bool
    head_repo: str | None


@dataclass(frozen=True)
class ActionSettings:
    event_name: str
    repository: str
    api_url: str
    server_url: str
    run_id: str
    workspace: Path
    output_file: Path | None
    summary_file: Path | None
    token: str = field(repr=False)
    config: str = "skillopt.yml"
    mode: str = "auto"
    skills: tuple[str, ...] = ()
    comment: bool = True
    fail: bool = True
    baseline: bool = False  # input baseline: none — also show each skill's score with no skill
    batch: bool = False  # input batch: the scheduled eval goes through the providers' batch APIs
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    shard: Shard | None = None  # input shard: evaluate this slice, publish nothing (github/sharded.py)
    shards_path: Path | None = None  # input shards-path: merge the shard jobs' run directories there
    shards: int | None = None  # input shards: how many shard jobs the merge expects
    event: Mapping[str, Any] = field(default_factory=dict, repr=False)
    # GITHUB_SHA / GITHUB_REF, and where the default branch's last scores are kept between runs
    # (action.yml restores and saves the folder with actions/cache; see github/trend.py).
    sha: str = ""
    ref: str = ""
    scores_dir: Path | None = None

    @property
    def run_url(self) -> str | None:
        if not self.run_id:
            return None
        return f"{self.server_url}/{self.repository}/actions/runs/{self.run_id}"

    @property
    def resolved_mode(self) -> str:
        if self.mode != "auto":
            return self.mode
        return "gate" if self.event_name in ("pull_request", "pull_request_target") else "eval"

    def gate_pull_request(self) -> PullRequest:
        """The pull request a gate runs on; bad input when the event has none."""
        pr = self.pull_request()
        if pr is None:
            raise InputError(f"mode gate needs a pull_request event, got {self.event_name!r}",
                             hint="use mode: auto or eval for schedule and workflow_dispatch")
        return pr

    def pull_request(self) -> PullRequest | None:
        pr = self.event.get("pull_request")
        if not isinstance(pr, Mapping):
            return None
        head_repo = (pr.get("head") or {}).get("repo")
        base_repo = (pr.get("base") or {}).get("repo") or {}
        head_name = head_repo.get("full_name") if isinstance(head_repo, Mapping) else None
        base_name = base_repo.get("full_name") or self.repository
        return PullRequest(
            number=int(pr["number"]),
            head_sha=str(pr["head"]["sha"]),
            base_sha=str(pr["base"]["sha"]),
            head_ref=str(pr["head"].get("ref", "")),
            base_ref=str(pr["base"].get("ref", "")),
            labels=tuple(str(label.get("name")) for label in pr.get("labels") or [] if isinstance(label, Mapping)),
            fork=head_name != base_name,
            head_repo=head_name,
        )


def shard_name(shard: Shard | None) -> str:
    """The part of a run directory's name that tells a shard job's runs apart (empty when unsharded)."""
    return f"shard{shard.index}of{shard.count}" if shard else ""


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in TRUE:
        return True
    if raw in FALSE:
        return False
    raise InputError(f"{name}={raw!r} is not a boolean", hint="use true or false")


def _number(env: Mapping[str, str], name: str, default: float, *, minimum: float, integer: bool) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        value = None
    if value is None or value < minimum or value != value or value == float("inf"):
        kind = "a whole number" if integer else "a number of seconds"
        raise InputError(f"{name}={raw!r} is not {kind} of at least {minimum:g}", hint=f"unset it for the default {default:g}")
    return value


def settings_from_env(env: Mapping[str, str]) -> ActionSettings:
    """Read the runner's environment. Raises :class:`InputError` naming the variable."""
    def need(name: str) -> str:
        value = env.get(name, "").strip()
        if not value:
            raise InputError(f"{name} is not set", hint="skillopt-ci action runs inside GitHub Actions")
        return value

    event_name = need("GITHUB_EVENT_NAME")
    event: Mapping[str, Any] = {}
    event_path = env.get("GITHUB_EVENT_PATH", "").strip()
    if event_path:
        try:
            event = json.loads(Path(event_path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError(f"cannot read the event payload: {exc}", where=event_path) from None
    mode = env.get("SKILLOPT_MODE", "").strip().lower() or "auto"
    if mode not in MODES:
        raise InputError(f"SKILLOPT_MODE (input mode) is {mode!r}", hint=f"use one of: {', '.join(MODES)}")
    skills = tuple(s for s in env.get("SKILLOPT_SKILLS", "").replace(",", " ").split() if s)
    baseline = env.get("SKILLOPT_BASELINE", "").strip().lower()
    if baseline not in ("", "none"):
        raise InputError(f"SKILLOPT_BASELINE (input baseline) is {baseline!r}",
                         hint='use "none" (also evaluate with no skill), or leave it empty')
    return ActionSettings(
        event_name=event_name,
        repository=need("GITHUB_REPOSITORY"),
        api_url=env.get("GITHUB_API_URL", "").strip() or "https://api.github.com",
        server_url=env.get("GITHUB_SERVER_URL", "").strip() or "https://github.com",
        run_id=env.get("GITHUB_RUN_ID", "").strip(),
        workspace=Path(env.get("GITHUB_WORKSPACE", "").strip() or "."),
        output_file=Path(env["GITHUB_OUTPUT"]) if env.get("GITHUB_OUTPUT") else None,
        summary_file=Path(env["GITHUB_STEP_SUMMARY"]) if env.get("GITHUB_STEP_SUMMARY") else None,
        token=env.get("SKILLOPT_TOKEN", "").strip() or env.get("GITHUB_TOKEN", "").strip(),
        config=env.get("SKILLOPT_CONFIG", "").strip() or "skillopt.yml",
        mode=mode,
        skills=skills,
        comment=_flag(env, "SKILLOPT_COMMENT", True),
        fail=_flag(env, "SKILLOPT_FAIL", True),
        baseline=baseline == "none",
        batch=_flag(env, "SKILLOPT_BATCH", False),
        retry=RetryPolicy(attempts=int(_number(env, "SKILLOPT_GITHUB_ATTEMPTS", 3, minimum=1, integer=True)),
                          backoff=_number(env, "SKILLOPT_GITHUB_BACKOFF", 2.0, minimum=0, integer=False)),
        event=event,
        **_sharding(env, baseline == "none"),
        sha=env.get("GITHUB_SHA", "").strip(),
        ref=env.get("GITHUB_REF", "").strip(),
        scores_dir=Path(env["SKILLOPT_SCORES_DIR"]) if env.get("SKILLOPT_SCORES_DIR", "").strip() else None,
    )


def _sharding(env: Mapping[str, str], baseline: bool) -> dict[str, Any]:
    """The inputs of a sharded run (see github/sharded.py): a shard job, or the merge job."""
    raw = env.get("SKILLOPT_SHARD", "").strip()
    try:
        shard = parse_shard(raw) if raw else None
    except InputError:
        raise InputError(f"SKILLOPT_SHARD (input shard) is {raw!r}", hint="use i/n with 1 <= i <= n, e.g. 2/4") from None
    where = env.get("SKILLOPT_SHARDS_PATH", "").strip()
    count = env.get("SKILLOPT_SHARDS", "").strip()
    if count and not (count.isdigit() and int(count) >= 1):
        raise InputError(f"SKILLOPT_SHARDS (input shards) is {count!r}", hint="use the number of shard jobs, e.g. 4")
    shards = int(count) if count else None
    if shard and where:
        raise InputError("the inputs shard and shards-path are both set",
                         hint="a shard job sets shard; the merge job sets shards-path")
    if baseline and (shard or where):
        raise InputError("baseline: none is not available in a sharded run", hint="leave the input baseline empty")
    return {"shard": shard, "shards_path": Path(where) if where else None, "shards": shards}
