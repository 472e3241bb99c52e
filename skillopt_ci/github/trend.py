"""The default branch's last score, shown beside each skill's score, so a reviewer sees the trend.

- The scheduled eval on the default branch (``schedule``, or ``workflow_dispatch`` on the default
  branch) writes ``scores.json`` into the folder ``SKILLOPT_SCORES_DIR``: for each configured
  skill its mean, 95 % interval, number of results, the commit and the UTC date. action.yml
  restores that folder with ``actions/cache/restore`` (the key has a run-unique suffix and the
  restore key is the common prefix, so the newest save is restored) and saves it again with
  ``actions/cache/save`` only when this module wrote it (the ``scores-saved`` step output).
- ``/skillopt eval`` on a pull request shows, beside each skill's score, the restored score
  ("default branch: 0.712 [0.65, 0.77] (abc1234, 2026-11-30)"). When the file or the skill is not
  there (no scheduled run yet, an expired cache, a new skill), the default branch's version of the
  skill is evaluated on the same suite (read with ``git show``, as the gate reads the base) and the
  line says it was recomputed. A skill the default branch does not have says so.
- The scheduled eval shows the previous scheduled score the same way, then replaces it.

A broken ``scores.json`` is ignored with a warning (it is a cache, never an input error).

File format (``version`` 1)::

    {"version": 1, "skills": {"<skill>": {"mean": 0.712, "low": 0.65, "high": 0.77, "n": 36,
                                         "commit": "<40 hex>", "date": "2026-11-30", "split": "val"}}}
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from skillopt_ci.core.baseline import worth_line
from skillopt_ci.core.errors import EXIT_OK
from skillopt_ci.core.names import run_dir_name
from skillopt_ci.core.records import EvalSummary
from skillopt_ci.core.skill import load_skill
from skillopt_ci.engine.baseline import measure_worth
from skillopt_ci.engine.evaluation import EvalSession, make_plan, threshold_verdict
from skillopt_ci.engine.rundir import write_json_atomic
from skillopt_ci.gate.git import Git
from skillopt_ci.gate.run import skill_at
from skillopt_ci.github.runner_files import command
from skillopt_ci.github.settings import shard_name
from skillopt_ci.inputs.config import Config, SkillEntry
from skillopt_ci.inputs.suite import load_suite
from skillopt_ci.render.markdown import escape_inline

SCORES_FILE = "scores.json"
VERSION = 1


@dataclass(frozen=True)
class LastScore:
    """One skill's score on the default branch."""

    mean: float | None
    low: float | None
    high: float | None
    n: int
    commit: str
    date: str
    split: str = ""
    recomputed: bool = False

    def line(self) -> str:
        """``0.712 [0.65, 0.77] (abc1234, 2026-11-30)``, plus ``recomputed`` when it is."""
        score = "—" if self.mean is None else f"{self.mean:.3f}"
        if self.low is not None and self.high is not None:
            score += f" [{self.low:.2f}, {self.high:.2f}]"
        where = f"{self.commit[:7]}, {self.date}" if self.commit else self.date
        return f"{score} ({where})" + (", recomputed: no stored score" if self.recomputed else "")

    def valid(self) -> bool:
        """What a table shows unescaped: numbers, a hex commit, an ISO date."""
        numbers = all(v is None or isinstance(v, (int, float)) for v in (self.mean, self.low, self.high))
        return (numbers and isinstance(self.n, int) and re.fullmatch(r"[0-9a-f]{0,40}", str(self.commit)) is not None
                and re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(self.date)) is not None)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("recomputed")
        return data


def today() -> str:
    return datetime.now(timezone.utc).date().isoformat()


def from_summary(summary: EvalSummary, commit: str, date: str | None = None, *, recomputed: bool = False) -> LastScore:
    low, high = summary.ci95 if summary.ci95 else (None, None)
    return LastScore(mean=summary.mean, low=low, high=high, n=summary.n_results, commit=commit,
                     date=date or today(), split=summary.split, recomputed=recomputed)


def read_scores(folder: Path | None) -> tuple[dict[str, LastScore], str | None]:
    """The stored scores, and a warning when the file exists but cannot be used."""
    if folder is None or not (folder / SCORES_FILE).is_file():
        return {}, None
    path = folder / SCORES_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") != VERSION:
            return {}, f"{path}: version {data.get('version')!r} is not {VERSION}; ignored"
        scores = {str(name): LastScore(**{k: v for k, v in row.items() if k in LastScore.__dataclass_fields__})
                  for name, row in data["skills"].items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        return {}, f"{path}: cannot be read ({type(exc).__name__}: {exc}); ignored"
    bad = sorted(name for name, score in scores.items() if not score.valid())
    if bad:
        return {}, f"{path}: the entry of {bad[0]} is not a score (numbers, a hex commit, a date); ignored"
    return scores, None


def write_scores(folder: Path, scores: dict[str, LastScore]) -> Path:
    """Merge ``scores`` into the folder's file (skills not evaluated this time keep theirs)."""
    stored, _ = read_scores(folder)
    stored.update(scores)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / SCORES_FILE
    write_json_atomic(path, {"version": VERSION, "skills": {k: v.to_json() for k, v in sorted(stored.items())}})
    return path


def is_default_branch_run(event_name: str, ref: str, event: dict[str, Any] | Any) -> bool:
    """A scheduled run (always on the default branch), or a manual one started on it."""
    if event_name == "schedule":
        return True
    default = ((event or {}).get("repository") or {}).get("default_branch")
    return event_name == "workflow_dispatch" and bool(default) and ref == f"refs/heads/{default}"


def recompute(config: Config, session: EvalSession, entry: SkillEntry, git: Git, ref: str, out: Path) -> LastScore | None:
    """Evaluate the skill as it is at ``ref`` (the default branch) on the checked-out suite;
    None when the default branch has no such skill."""
    top = git.top_level().resolve()
    rel = entry.path.resolve().relative_to(top).as_posix()
    with tempfile.TemporaryDirectory(prefix="skillopt-trend-") as scratch:
        skill = skill_at(git, top, ref, rel, f"{ref[:12]}:{rel}", Path(scratch) / "base")
        if skill is None:
            return None
        suite = load_suite(entry.suite, display=entry.name)
        plan = make_plan(skill, suite, config.gate.split, config.gate.repeats)
        outcome = session.evaluate(plan, out, label=f"default branch {entry.name}")
    return from_summary(outcome.summary, git.resolve(ref), recomputed=True)


def trend_table(rows: Sequence[tuple[str, EvalSummary, LastScore | None, str]]) -> str:
    """A markdown table: skill, this run's score, the default branch's. ``rows`` are
    (name, summary, last score or None, what to say when None)."""
    lines = ["| skill | score (95% CI) | default branch |", "|---|---|---|"]
    for name, summary, last, missing in rows:
        score = "—" if summary.mean is None else f"{summary.mean:.3f}"
        if summary.ci95:
            score += f" [{summary.ci95[0]:.2f}, {summary.ci95[1]:.2f}]"
        shown = last.line() if last is not None else missing  # numbers, a hex commit, a date: no escaping
        lines.append(f"| {escape_inline(name, 100)} | {score} (n={summary.n_results}) | {shown} |")
    return "\n".join(lines) + "\n"


def stored_scores(ctx: Any) -> dict[str, LastScore]:
    """The stored scores (``ctx``: the Action's Context); a file that cannot be used is a warning
    in the log and counts as none."""
    stored, warning = read_scores(ctx.settings.scores_dir)
    if warning:
        command("warning", warning, stream=ctx.out, title="skillopt-ci: the default branch's last scores")
    return stored


def scheduled_section(ctx: Any, pairs: Sequence[tuple[str, EvalSummary]]) -> str:
    """The scheduled eval's trend table (each (skill, summary) beside the previous stored score).
    On the default branch the new scores are stored and ``scores-saved`` is set so action.yml
    saves the folder."""
    settings = ctx.settings
    stored = stored_scores(ctx)
    rows = [(n, s, stored.get(n), "no earlier score") for n, s in pairs]
    if settings.scores_dir is not None and is_default_branch_run(settings.event_name, settings.ref, settings.event):
        date = today()
        write_scores(settings.scores_dir, {n: from_summary(s, settings.sha, date) for n, s in pairs
                                           if s.complete and s.mean is not None})
        ctx.outputs["scores-saved"] = "true"
    return "\n### Beside the default branch's last score\n\n" + trend_table(rows)


def evaluate_entries(ctx: Any, config: Config, session: EvalSession, entries: list[Any],
                     kind: str) -> tuple[list[Any], list[str], list[str]]:
    """Evaluate each skill as checked out (``ctx``: the Action's Context; its input shard, if any,
    picks the slice): (summaries in order, failed threshold lines, what each skill adds with input
    baseline none)."""
    s = ctx.settings
    summaries, failed, worth_lines = [], [], []
    for entry in entries:
        skill = load_skill(entry.path, display=entry.name)
        suite = load_suite(entry.suite, display=entry.name)
        plan = make_plan(skill, suite, config.gate.split, config.gate.repeats, s.shard)
        out = config.runs_dir / run_dir_name(kind, entry.name, skill.hash[:12], shard_name(s.shard))
        ctx.run_dirs.append(out)
        outcome = session.evaluate(plan, out)
        if s.baseline:
            worth = measure_worth(session, plan, outcome)
            worth_lines.append(f"{escape_inline(entry.name, 100)}: {worth_line(worth)}")  # our numbers
        summaries.append(outcome.summary)
        code, line = threshold_verdict(outcome.summary, config.gate.min_score)
        if code != EXIT_OK:
            failed.append(f"{entry.name}: {line}")
    return summaries, failed, worth_lines


def notes_of(worth_lines: list[str], failed: list[str]) -> str:
    """The notes under an eval's table: what each skill adds (input baseline none), the failures."""
    return "".join(f"\n- {line}" for line in [*worth_lines, *(escape_inline(f, 300) for f in failed)])
