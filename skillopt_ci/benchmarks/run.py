"""``skillopt-ci bench run``: one skill on several imported benchmarks, one results table.

Contract:
- Suites are found by their ``suite.yaml`` ``benchmark: {name: ...}`` metadata in the folders
  directly under ``suites_dir`` (what ``bench import`` writes). An unknown benchmark name, a
  requested benchmark with no imported suite, or no imported suite at all is an
  :class:`InputError` (exit 2) naming the ``bench import`` command to run. Every found suite and
  the skill are loaded before anything runs (a broken suite is exit 2, nothing spent).
- Each benchmark × environment is one ordinary eval (:class:`EvalSession`, so the response cache,
  resume, budgets and shards behave as in ``eval``), in a deterministic run directory under
  ``runs_dir``: the same command resumes, and a fully cached re-run calls no model.
- ``envs`` empty: each suite runs in its own environment. An ``envs`` value replaces the suite's
  environment type, keeping the options the new environment also takes. A combination that
  cannot run (an environment bound to its tasks, a set-up that is missing, a scorer that needs
  what the environment does not give) is a cell saying why, never a crash; a runtime failure
  (provider down, too many errors) stops only its cell.
- Writes ``bench.md`` and ``bench.json`` into ``out`` (atomically). :func:`exit_code`: 3 when a
  cell failed or stopped early, 2 when a suite could not run in its own environment, else 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, TextIO

from skillopt_ci.benchmarks import REGISTRY, benchmark_pack
from skillopt_ci.core.errors import EXIT_INPUT, EXIT_OK, EXIT_RUNTIME, InputError, RuntimeFailure
from skillopt_ci.core.names import run_dir_name
from skillopt_ci.core.paths import display_path
from skillopt_ci.core.shard import Shard
from skillopt_ci.core.skill import Skill, load_skill
from skillopt_ci.engine.evaluation import EvalSession, default_run_dir, make_plan
from skillopt_ci.engine.rundir import RunDir, write_atomic, write_json_atomic
from skillopt_ci.engine.runner import EvalPlan
from skillopt_ci.envs.registry import environment_class, environment_names
from skillopt_ci.inputs.config import Config, ModelSpec
from skillopt_ci.inputs.suite import Suite, load_suite
from skillopt_ci.inputs.yamlfile import load_yaml
from skillopt_ci.models.base import Backend
from skillopt_ci.render.bench_table import (
    FAILED,
    NOT_RUN,
    OWN,
    RAN,
    BenchCell,
    BenchRow,
    BenchTable,
    bench_markdown,
    column_labels,
)
from skillopt_ci.render.eval_report import eval_report

IMPORT_HINT = 'import it first: skillopt-ci bench import {name} --from PATH'
# Environments whose tasks only they can run: their suites carry what the rollout is made of
# (a world to play, code to run on every test case), which no other environment reads.
BOUND = {
    "interactive": "its tasks are episodes in its world; only interactive plays them",
    "codegen": "its tasks run the model's code on every test case; only codegen does",
}


@dataclass(frozen=True)
class BenchRequest:
    skill: Path
    benchmarks: tuple[str, ...] = ()  # empty: every imported benchmark found
    envs: tuple[str, ...] = ()  # empty: each suite's own environment
    split: str = "test"
    suites_dir: Path = Path("eval_suites")
    out: Path | None = None
    shard: Shard | None = None
    cache_mode: str | None = None
    fresh: bool = False
    assume_yes: bool = False
    limit: int | None = None  # only the first N tasks of the split (the demo)


@dataclass(frozen=True)
class FoundSuite:
    path: Path
    benchmark: str
    variant: str | None


@dataclass
class BenchOutcome:
    table: BenchTable
    out: Path


def find_suites(suites_dir: Path) -> list[FoundSuite]:
    """The imported benchmark suites directly under ``suites_dir``, by folder name. Folders
    without ``benchmark:`` metadata (a team's own suites) are not benchmarks and are skipped."""
    found: list[FoundSuite] = []
    if not suites_dir.is_dir():
        return found
    for folder in sorted(p for p in suites_dir.iterdir() if p.is_dir()):
        yaml_file = folder / "suite.yaml"
        if not yaml_file.is_file():
            continue
        try:
            data = load_yaml(yaml_file, display_path(yaml_file)).data
        except InputError:
            continue  # not readable as a benchmark's metadata; loading it would fail only if it were one
        meta = data.get("benchmark") if isinstance(data, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get("name"), str):
            variant = meta.get("variant")
            found.append(FoundSuite(folder, meta["name"], variant if isinstance(variant, str) else None))
    return found


def select_suites(request: BenchRequest) -> list[FoundSuite]:
    """The suites to run, in the registry's order of benchmarks (or the order asked for)."""
    unknown = [n for n in request.benchmarks if n not in REGISTRY]
    if unknown:
        raise InputError(f"unknown benchmark {unknown[0]!r} in --benchmarks; known: {', '.join(REGISTRY.names())}")
    found = find_suites(request.suites_dir)
    shown = display_path(request.suites_dir)
    if not request.benchmarks:
        if not found:
            raise InputError(f"no imported benchmark suite under {shown} (a suite.yaml with benchmark: metadata)",
                             hint=IMPORT_HINT.format(name="NAME") + f" (NAME: {', '.join(REGISTRY.names())}), "
                             "or point --suites-dir at the folder you imported into")
        order = REGISTRY.names()
        return sorted(found, key=lambda f: (order.index(f.benchmark) if f.benchmark in order else len(order),
                                            f.benchmark, f.path.name))
    selected = []
    for name in request.benchmarks:
        mine = [f for f in found if f.benchmark == name]
        if not mine:
            raise InputError(f"no imported {name} suite under {shown}", hint=IMPORT_HINT.format(name=name)
                             + f" --out {shown}/{name}; {data_help(name)}")
        selected += mine
    return selected


def data_help(name: str) -> str:
    try:
        return benchmark_pack(name).data_help or "see the README's Benchmarks section"
    except (ImportError, InputError, AttributeError):
        return "see the README's Benchmarks section"


def title_of(found: FoundSuite, duplicates: bool) -> str:
    try:
        title = benchmark_pack(found.benchmark).title
    except (ImportError, InputError, AttributeError):
        title = found.benchmark
    extra = [x for x in (found.variant, found.path.name if duplicates else None) if x]
    return f"{title} ({', '.join(extra)})" if extra else title


def environment_for(suite: Suite, kind: str) -> dict[str, Any] | str:
    """The suite's environment with its type replaced by ``kind``, keeping the options ``kind``
    also takes; or, as a string, why ``kind`` cannot run this suite."""
    own = dict(suite.environment)
    own_kind = own.get("type", "chat")
    if kind == own_kind:
        return own
    if own_kind in BOUND:
        return f"{own_kind} suite: {BOUND[own_kind]}"
    if kind in BOUND:
        return f"{kind} needs a suite made for it; this one is a {own_kind} suite"
    try:
        accepted = {f.name for f in fields(environment_class(kind).Options)}
    except TypeError:  # Options without fields
        accepted = set()
    return {"type": kind, **{k: v for k, v in own.items() if k != "type" and k in accepted}}


@dataclass
class _Cell:
    row: int
    column: str
    environment: str
    suite: Suite | None = None
    plan: EvalPlan | None = None
    reason: str | None = None


def plan_cells(skill: Skill, suites: Sequence[Suite], request: BenchRequest) -> list[_Cell]:
    """One cell per suite × column, with its plan, or the reason it cannot run."""
    cells = []
    for i, suite in enumerate(suites):
        own_kind = str(dict(suite.environment).get("type", "chat"))
        for column, kind in zip(column_labels(request.envs), request.envs or (own_kind,), strict=True):
            spec = environment_for(suite, kind)
            if isinstance(spec, str):
                cells.append(_Cell(i, column, kind, reason=spec))
                continue
            variant = replace(suite, environment=MappingProxyType(spec))
            plan = make_plan(skill, variant, request.split, None, request.shard)
            if request.limit is not None:
                plan = replace(plan, tasks=plan.tasks[:request.limit])
            cells.append(_Cell(i, column, kind, suite=variant, plan=plan))
    return cells


def check_envs(envs: Sequence[str]) -> None:
    known = environment_names()
    for kind in envs:
        if kind not in known:
            raise InputError(f"unknown environment {kind!r} in --env; known: {', '.join(known)}")
    if len(set(envs)) != len(envs):
        raise InputError("--env names an environment twice")


def run_bench(config: Config, request: BenchRequest, *, stream: TextIO | None = None, show_progress: bool = True,
              env: Mapping[str, str] | None = None,
              backend_factory: Callable[[ModelSpec, Mapping[str, str]], Backend] | None = None,
              log: Callable[[str], None] | None = None) -> BenchOutcome:
    """Evaluate the skill on every selected benchmark × environment; write the table."""
    check_envs(request.envs)
    found = select_suites(request)
    skill = load_skill(request.skill, display=display_path(request.skill))
    suites = [load_suite(f.path, display=display_path(f.path)) for f in found]
    cells = plan_cells(skill, suites, request)
    runnable = sum(c.plan is not None for c in cells)
    with EvalSession(config, cache_mode=request.cache_mode, env=env, backend_factory=backend_factory,
                     show_progress=show_progress, stream=stream, assume_yes=request.assume_yes,
                     estimate_runs=max(1, runnable)) as session:
        for cell in cells:
            _prepare(session, cell)
        for cell in cells:  # keys, prices and the cost estimate concern the whole command: exit 2
            if cell.plan is not None and cell.suite is not None:
                session.check(cell.suite, cell.plan)
        done = [_evaluate(session, config, cell, request, log) for cell in cells]
    table = _table(config, skill, request, found, suites, done)
    out = request.out or config.runs_dir / run_dir_name("bench", skill.name, request.split)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "bench.md", bench_markdown(table))
    write_json_atomic(out / "bench.json", table.to_dict())
    return BenchOutcome(table, out)


def _prepare(session: EvalSession, cell: _Cell) -> None:
    """Build the cell's environment and scorer before anything is spent; what fails here (a
    missing agent CLI, options the environment refuses) is the cell's reason."""
    if cell.suite is None:
        return
    try:
        session.environment(cell.suite)
        session.scorer(cell.suite)
    except InputError as exc:
        cell.suite, cell.plan, cell.reason = None, None, str(exc)


def _evaluate(session: EvalSession, config: Config, cell: _Cell, request: BenchRequest,
              log: Callable[[str], None] | None) -> BenchCell:
    if cell.plan is None:
        return BenchCell(cell.column, cell.environment, NOT_RUN, reason=cell.reason)
    out = default_run_dir(config, cell.plan, prefix="bench")
    if log:
        log(f"{cell.plan.suite.name} · {cell.environment}: {display_path(out)}")
    try:
        outcome = session.evaluate(cell.plan, out, fresh=request.fresh,
                                   label=f"{cell.plan.suite.name} · {cell.environment}")
    except InputError as exc:
        return BenchCell(cell.column, cell.environment, NOT_RUN, run_dir=display_path(out), reason=str(exc))
    except RuntimeFailure as exc:
        return BenchCell(cell.column, cell.environment, FAILED, run_dir=display_path(out), reason=str(exc))
    RunDir(outcome.run_dir).write_text("report.md", eval_report(outcome.summary, outcome.results))
    return BenchCell(cell.column, cell.environment, RAN, summary=outcome.summary,
                     run_dir=display_path(outcome.run_dir))


def _table(config: Config, skill: Skill, request: BenchRequest, found: Sequence[FoundSuite],
           suites: Sequence[Suite], done: Sequence[BenchCell]) -> BenchTable:
    per_row: dict[int, list[BenchCell]] = {}
    columns = column_labels(request.envs)
    for index, cell in enumerate(done):
        per_row.setdefault(index // len(columns), []).append(cell)
    names = [f.benchmark for f in found]
    rows = tuple(
        BenchRow(f.benchmark, title_of(f, names.count(f.benchmark) > 1), suite.display,
                 str(dict(suite.environment).get("type", "chat")), tuple(per_row.get(i, ())))
        for i, (f, suite) in enumerate(zip(found, suites, strict=True))
    )
    target = config.models["target"]
    notes = (f"only the first {request.limit} tasks of the split",) if request.limit else ()
    return BenchTable(skill={"name": skill.name, "hash": skill.hash},
                      model={"provider": target.provider, "model": target.model}, split=request.split,
                      columns=columns, rows=rows, shard=str(request.shard) if request.shard else None, notes=notes)


def too_many_errors(table: BenchTable, max_error_rate: float) -> list[str]:
    """One line per cell whose errored rollouts are more than ``max_error_rate`` of its results
    (``eval.max_error_rate``: an eval with that many errors fails too)."""
    lines = []
    for row in table.rows:
        for c in row.cells:
            s = c.summary
            if s is not None and s.n_results and s.n_errors / s.n_results > max_error_rate:
                lines.append(f"{row.title} · {c.column}: {s.n_errors} of {s.n_results} rollouts errored "
                             f"({s.n_errors / s.n_results:.0%}), more than eval.max_error_rate {max_error_rate:.0%}")
    return lines


def exit_code(table: BenchTable, max_error_rate: float = 1.0) -> int:
    """3 when a cell failed, stopped early or has more errored rollouts than ``max_error_rate``
    of its results; 2 when a suite could not run in its own environment (its set-up is
    missing); else 0. A requested combination that cannot run is not an error: the cell says why."""
    cells = [(row, c) for row in table.rows for c in row.cells]
    if any(c.state == FAILED or (c.summary is not None and not c.summary.complete) for _, c in cells):
        return EXIT_RUNTIME
    if too_many_errors(table, max_error_rate):
        return EXIT_RUNTIME
    if any(c.state == NOT_RUN and (c.column == OWN or c.environment == row.own_environment) for row, c in cells):
        return EXIT_INPUT
    return EXIT_OK
