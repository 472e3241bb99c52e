"""The sharded Action: the shard jobs and the merge job of ``.github/workflows/skillopt-sharded.yml``.

A shard job (input ``shard: i/n``) runs the gate or the eval on one stable slice of the tasks, as
``--shard i/n`` does. Its run directories go to the workflow artifact (action.yml's upload step),
its job summary says which slice it measured, and it posts nothing: no comment, no check run
(:func:`~skillopt_ci.github.context.shard_done`, where the gate and eval flows end a shard job).

The merge job (input ``shards-path``: the folder the shard artifacts were downloaded into) finds
every shard run directory below that folder, merges them (:func:`merge_gate_runs`,
:func:`merge_eval_runs`) into the run directory a single job would have written, and publishes
exactly as the single job does (:func:`publish_gate`, :func:`report_evals`): the same comment,
check run, job summary and outputs, with the same numbers.

The merge job judges with its own configuration: the gate policy (margin, fail_on, confidence…),
the split's tasks and the suites come from its checkout, never from a shard's ``gate.json``, and
a gate shard whose config hash or suite hash is not this job's is refused with exit 2 naming the
shard (:class:`~skillopt_ci.gate.merge.MergeJudge`). Eval shards are matched to the job's own
skill and suite hashes and split, as before.

A shard that is missing (its job failed before uploading) or unfinished (no ``gate.json`` or
``summary.json``) leaves its tasks without results, so the merged report is incomplete: the
comment, the check run (a failure titled "Incomplete: …") and the job summary name the missing
shard and tasks, the verdict is never ``passed``, and the job exits 3. When no shard arrived at
all there is nothing to merge: the comment and check run say so (input ``shards`` names the
shards expected), the verdict is ``error``, and the job exits 3.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import EXIT_RUNTIME, InputError
from skillopt_ci.core.names import run_dir_name
from skillopt_ci.core.records import EvalSummary
from skillopt_ci.core.skill import load_skill
from skillopt_ci.engine.merge import merge_eval_runs, read_json
from skillopt_ci.gate.merge import incomplete_note, judge_for, merge_gate_runs
from skillopt_ci.github.context import FORK, Context, _config, selected_skills, skip
from skillopt_ci.github.eval_flow import report_evals
from skillopt_ci.github.gate_flow import publish_gate
from skillopt_ci.github.publisher import Publisher, marker
from skillopt_ci.github.runner_files import command
from skillopt_ci.github.sticky import post_sticky
from skillopt_ci.inputs.suite import load_suite
from skillopt_ci.render.markdown import code_span, escape_inline

MAX_LISTED = 20  # missing tasks named in the job summary, per skill


def merge_flow(ctx: Context) -> int:
    """The merge job: the gate's or the eval's shards, merged and published."""
    mode = ctx.settings.resolved_mode
    if mode == "gate":
        return _merge_gate(ctx)
    if mode == "eval":
        return _merge_eval(ctx)
    raise InputError(f"mode {mode} cannot be merged from shards", hint="use mode gate or eval with shards-path")


def _shards_root(ctx: Context) -> Path:
    where = ctx.settings.shards_path
    assert where is not None
    return where if where.is_absolute() else ctx.settings.workspace / where


def _expected(ctx: Context) -> str:
    n = ctx.settings.shards
    return f"expected {n} shard(s), 1/{n} to {n}/{n}" if n else "the input shards was not given"


def _check_count(ctx: Context, dirs: list[Path], recorded: list[str | None]) -> None:
    """Shards of another matrix than the one the workflow ran (input ``shards``) are bad input."""
    n = ctx.settings.shards
    for d, shard in zip(dirs, recorded, strict=True):
        if n and shard and shard.partition("/")[2] != str(n):
            raise InputError(f"shard {shard} is not of the {n} shards this workflow ran", where=str(d),
                             hint="download only this run's shard artifacts into shards-path")


def _merge_gate(ctx: Context) -> int:
    s = ctx.settings
    pr = s.gate_pull_request()
    if pr.fork:
        return skip(ctx, *FORK)
    config = _config(ctx)
    publisher = ctx.publisher_factory(s) if s.token else None
    root = _shards_root(ctx)
    dirs = sorted(p.parent for p in root.rglob("gate.json")) if root.is_dir() else []
    gates = [read_json(d / "gate.json") for d in dirs]
    for d, gate in zip(dirs, gates, strict=True):
        if gate.get("head_sha") != pr.head_sha:
            raise InputError(f"shard gates {str(gate.get('head_sha'))[:12]}, but the pull request's head is "
                             f"{pr.head_sha[:12]}", where=str(d / "gate.json"), hint="merge this run's shards only")
    _check_count(ctx, dirs, [g.get("shard") for g in gates])
    if not dirs:
        return _nothing_merged(ctx, publisher, pr.number, pr.head_sha, f"no shard job uploaded a gate ({_expected(ctx)})")
    out = config.runs_dir / run_dir_name(f"gate-pr{pr.number}", pr.head_sha[:12])
    ctx.run_dirs.append(out)
    names = {s.get("name") for g in gates for s in g.get("skills") or [] if s.get("verdict") != "deleted"}
    report = merge_gate_runs(dirs, out, judge_for(config, names))
    return publish_gate(ctx, report, out, pr, publisher, incomplete=incomplete_note(report))


def _nothing_merged(ctx: Context, publisher: Publisher | None, number: int, head_sha: str, why: str) -> int:
    """No shard to merge: say so where the report would have been, never stay silent."""
    s = ctx.settings
    text = (f"**Incomplete: {escape_inline(why, 500)}.** Nothing was merged and no verdict was reached; "
            "see the shard jobs' logs (a failed job, or a missing model key, uploads nothing).")
    command("error", f"incomplete: {why}", stream=ctx.out, title="skillopt-ci merge")
    ctx.summary(f"## skillopt-ci gate: 💥 incomplete\n\n{text}\n")
    ctx.outputs["verdict"] = "error"
    if publisher and s.comment:
        post_sticky(ctx, publisher, number, f"{marker('gate', head_sha)}\n## skillopt-ci gate: 💥 incomplete\n\n{text}\n")
    if publisher:
        ctx.publish(lambda: publisher.check_run(head_sha, conclusion="failure", title="Incomplete: no shard reported",
                                                summary=text, annotations=[], details_url=s.run_url))
    return EXIT_RUNTIME


def _eval_shards(root: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Finished eval shard directories below ``root`` with their run.json (unfinished ones, with
    no summary.json, are left out: their tasks count as missing)."""
    found = []
    for manifest in sorted(root.rglob("run.json")) if root.is_dir() else []:
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if data.get("kind") == "eval" and (manifest.parent / "summary.json").is_file():
            found.append((manifest.parent, data))
    return found


def _merge_eval(ctx: Context) -> int:
    s = ctx.settings
    config = _config(ctx)
    found = _eval_shards(_shards_root(ctx))
    _check_count(ctx, [d for d, _ in found], [m.get("shard") for _, m in found])
    pairs: list[tuple[str, EvalSummary]] = []
    absent: list[str] = []
    for entry in selected_skills(config, s.skills):
        skill = load_skill(entry.path, display=entry.name)
        suite = load_suite(entry.suite, display=entry.name)
        dirs = [d for d, m in found if (m.get("skill_hash"), m.get("suite_hash"), m.get("split")) ==
                (skill.hash, suite.hash, config.gate.split)]
        if not dirs:
            absent.append(f"{entry.name}: incomplete: no shard job uploaded its runs ({_expected(ctx)})")
            continue
        out = config.runs_dir / run_dir_name("scheduled", entry.name, skill.hash[:12])
        ctx.run_dirs.append(out)
        summary, _ = merge_eval_runs(dirs, out)
        pairs.append((entry.name, summary))
    from skillopt_ci.github.trend import scheduled_section

    code = report_evals(ctx, config, pairs, [], failed=tuple(absent), trend=scheduled_section(ctx, pairs))
    partial = [(name, summary) for name, summary in pairs if not summary.complete]
    if partial:
        ctx.summary("### Incomplete\n\n" + "\n".join(_missing_line(name, summary) for name, summary in partial) + "\n")
    if partial or absent:
        command("error", "incomplete: " + "; ".join([*(f"{n}: {x.stopped}" for n, x in partial), *absent]),
                stream=ctx.out, title="skillopt-ci merge")
        return EXIT_RUNTIME
    return code


def _missing_line(name: str, summary: EvalSummary) -> str:
    listed = summary.missing_tasks[:MAX_LISTED]
    more = len(summary.missing_tasks) - len(listed)
    tasks = ", ".join(code_span(t, 80) for t in listed) + (f" and {more} more" if more else "")
    return (f"- **{escape_inline(name, 100)}**: {escape_inline(summary.stopped or 'a shard did not finish', 300)}"
            + (f"; no results for {tasks}" if listed else ""))
