"""The benchmark results table of ``skillopt-ci bench run``: records and their renderings.

Rows are imported benchmark suites, columns are environments (or one column, "as imported", when
each suite runs in its own environment). A cell is one ordinary eval: its score is the summary's
mean over tasks with the summary's 95 % CI (a t-interval over per-task means, core/stats.py, the
same numbers ``eval`` prints), n the tasks scored (of the tasks run), the cost and the errored
rollouts. A cell that did not run says why. Pure functions of records: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tabulate import tabulate

from skillopt_ci.core.records import EvalSummary
from skillopt_ci.render.eval_report import fmt_ci, fmt_cost, fmt_score
from skillopt_ci.render.markdown import code_span, escape_inline

SCHEMA_VERSION = 1
OWN = "as imported"  # the column of a run without --env: each suite in its own environment

# Cell states
RAN, NOT_RUN, FAILED = "ran", "not run", "failed"


@dataclass(frozen=True)
class BenchCell:
    """One benchmark × environment. ``state`` is :data:`RAN` (``summary`` set), :data:`NOT_RUN`
    (the combination cannot run, or its set-up is missing; ``reason`` says why) or :data:`FAILED`
    (it started and a runtime failure stopped it; ``reason``)."""

    column: str
    environment: str  # the environment type it ran (or would have run) in
    state: str
    summary: EvalSummary | None = None
    run_dir: str | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        s = self.summary
        data: dict[str, Any] = {"environment": self.environment, "state": self.state, "reason": self.reason,
                                "run_dir": self.run_dir}
        if s is not None:
            data.update(score=s.mean, ci95=list(s.ci95) if s.ci95 else None, n_tasks=s.n_tasks,
                        n_scored=s.n_tasks_scored, n_results=s.n_results, errors=s.n_errors,
                        pass_rate=s.pass_rate, cost_usd=s.cost_usd, cache_hits=s.cache_hits,
                        complete=s.complete, stopped=s.stopped)
        return data


@dataclass(frozen=True)
class BenchRow:
    benchmark: str  # registry name, e.g. "searchqa"
    title: str  # e.g. "SearchQA", with the variant or suite name when needed to tell rows apart
    suite: str  # the suite directory as shown to the user
    own_environment: str
    cells: tuple[BenchCell, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"benchmark": self.benchmark, "title": self.title, "suite": self.suite,
                "own_environment": self.own_environment,
                "cells": {c.column: c.to_dict() for c in self.cells}}


@dataclass(frozen=True)
class BenchTable:
    skill: dict[str, Any]  # name, hash
    model: dict[str, Any]  # provider, model
    split: str
    columns: tuple[str, ...]
    rows: tuple[BenchRow, ...]
    shard: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def cells(self) -> list[BenchCell]:
        return [c for row in self.rows for c in row.cells]

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "kind": "bench", "skill": self.skill, "model": self.model,
                "split": self.split, "shard": self.shard, "columns": list(self.columns),
                "rows": [r.to_dict() for r in self.rows], "notes": list(self.notes)}


def cell_text(cell: BenchCell, limit: int | None = None) -> str:
    """``0.600 [0.120, 1.000] · n 5 · $0.0012 · 0 errors``; a cell that did not run says why
    (cut to ``limit`` characters, see :func:`long_reasons`)."""
    if cell.state != RAN or cell.summary is None:
        reason = cell.reason or "no reason recorded"
        if limit is not None and len(reason) > limit:
            reason = reason[:limit - 1].rstrip() + "…"
        return f"{cell.state}: {reason}"
    s = cell.summary
    n = str(s.n_tasks) if s.n_tasks_scored == s.n_tasks else f"{s.n_tasks_scored}/{s.n_tasks}"
    parts = [fmt_score(s.mean) + fmt_ci(s.ci95), f"n {n}", fmt_cost(s.cost_usd),
             f"{s.n_errors} error{'' if s.n_errors == 1 else 's'}"]
    if not s.complete:
        parts.append(f"incomplete ({s.stopped or 'stopped early'})")
    return " · ".join(parts)


def long_reasons(table: BenchTable, limit: int) -> list[str]:
    """The reasons cut in the terminal table, in full, once each: ``Fake QA · codex: ...``."""
    where: dict[str, list[str]] = {}
    for row in table.rows:
        for cell in row.cells:
            if cell.state != RAN and cell.reason and len(cell.reason) > limit:
                where.setdefault(f"{cell.state}: {cell.reason}", []).append(f"{row.title} · {cell.environment}")
    return [f"{', '.join(places)}: {reason}" for reason, places in where.items()]


def _rows(table: BenchTable, escape: bool, limit: int | None = None) -> list[dict[str, str]]:
    text = (lambda t: escape_inline(t, 400)) if escape else (lambda t: t)
    own = table.columns == (OWN,)
    out = []
    for row in table.rows:
        line = {"benchmark": text(row.title)}
        if own:
            line["environment"] = text(row.own_environment)
        by_column = {c.column: c for c in row.cells}
        for column in table.columns:
            cell = by_column.get(column)
            line[column] = text(cell_text(cell, limit)) if cell else "—"
        out.append(line)
    return out


def bench_text(table: BenchTable, limit: int = 90) -> str:
    """The table as the terminal shows it; reasons longer than ``limit`` are cut in their cell
    and given in full below the table."""
    text = tabulate(_rows(table, escape=False, limit=limit), headers="keys", tablefmt="simple", disable_numparse=True)
    notes = [*table.notes, *long_reasons(table, limit)]
    return text + ("\n\n" + "\n".join(notes) if notes else "")


def heading(table: BenchTable) -> str:
    shard = f" (shard {table.shard})" if table.shard else ""
    return (f"skill {table.skill['name']} ({table.skill['hash'][:12]}) · model {table.model['provider']}/"
            f"{table.model['model']} · split {table.split}{shard}")


def bench_markdown(table: BenchTable) -> str:
    """``bench.md``: the heading, the table, what a cell holds, and the run directory of each cell."""
    lines = [f"# skillopt-ci bench run: {escape_inline(table.skill['name'])}", "",
             f"Skill {code_span(table.skill['name'])} `{table.skill['hash'][:12]}` · model "
             f"{code_span(table.model['provider'])} / {code_span(table.model['model'])} · split "
             f"{code_span(table.split)}" + (f" (shard {code_span(table.shard)})" if table.shard else ""), "",
             tabulate(_rows(table, escape=True), headers="keys", tablefmt="github", disable_numparse=True), "",
             "Each cell: mean score [95 % CI over tasks] · n tasks scored · cost · errored rollouts "
             "(missing data, left out of the score)."]
    lines += ["", *[f"- {escape_inline(n, 400)}" for n in table.notes]] if table.notes else []
    runs = [(row, c) for row in table.rows for c in row.cells if c.run_dir]
    if runs:
        lines += ["", "Run directories:", ""]
        lines += [f"- {escape_inline(row.title)} · {escape_inline(c.column)}: {code_span(c.run_dir or '')}"
                  for row, c in runs]
    return "\n".join(lines) + "\n"


def column_labels(envs: Sequence[str]) -> tuple[str, ...]:
    return tuple(envs) if envs else (OWN,)
