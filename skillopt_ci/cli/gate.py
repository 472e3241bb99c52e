"""``compare``, ``gate`` and ``merge``: paired comparisons of two skill versions, and joining
the directories of sharded runs. The exit code is the gate's verdict."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from skillopt_ci.cli import options
from skillopt_ci.cli.common import State, check_out, load_project_config
from skillopt_ci.core.baseline import BASELINES
from skillopt_ci.core.errors import EXIT_RUNTIME, InputError
from skillopt_ci.core.paths import display_path


def _session(config: Any, cache_mode: str | None, quiet: bool, strict: bool = False, assume_yes: bool = False,
             wait: bool = False, baseline: str | None = None) -> Any:
    """The session of a gate or compare: base and head are evaluated, so the estimate counts two
    (three with ``--baseline none``)."""
    from skillopt_ci.engine.evaluation import EvalSession

    return EvalSession(config, cache_mode=cache_mode, show_progress=not quiet, strict=strict, assume_yes=assume_yes,
                       estimate_runs=3 if baseline else 2, wait=wait)


BASELINE_HELP = "Also evaluate the head with no skill and report what the skill adds; the verdict is unchanged."


def _finish_gate(report: Any, out: Path, as_json: bool, as_markdown: bool = False,
                 incomplete: str | None = None) -> None:
    """Write report.md, print the table (or gate.json, or the markdown) and exit with the gate's
    code; a merge missing shards (``incomplete``: why) exits 3 whatever the verdicts, as an
    incomplete eval merge does, so a partial merge never passes for the whole split."""
    from skillopt_ci.engine.rundir import write_atomic
    from skillopt_ci.gate.report import render_gate, terminal_table

    markdown = render_gate(report, limit=1_000_000)
    write_atomic(out / "report.md", markdown)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    elif as_markdown:
        click.echo(markdown)
    else:
        click.echo(terminal_table(report))
        click.echo(f"\nreport: {display_path(out / 'report.md')}")
    code = 1 if report.failed and not report.overridden else 0
    reasons = [f"{s.change.name}: {s.reason}" for s in report.skills if s.failed or s.verdict == "inconclusive"]
    click.echo(f"{report.verdict}" + (": " + "; ".join(reasons) if reasons else ""), err=True)
    if incomplete:
        click.echo(f"incomplete: {incomplete}; merge every shard's directory", err=True)
        sys.exit(EXIT_RUNTIME)
    sys.exit(code)


@click.command()
@click.argument("base_skill", type=click.Path(path_type=Path))
@click.argument("head_skill", type=click.Path(path_type=Path))
@click.option("--suite", type=click.Path(path_type=Path), required=True, help="Suite directory.")
@click.option("--split", help="Split (default: gate.split, val).")
@click.option("--repeats", type=click.IntRange(1, 100), help="Rollouts per task and side.")
@click.option("--out", type=click.Path(path_type=Path), help="Run directory (default: under runs_dir, named by the "
              "content of both skills and the suite; re-running resumes).")
@options.fresh
@click.option("--shard", help="Compare on one stable slice of the tasks, i/n.")
@options.model
@options.base_url("Base URL for --model.")
@options.cache_mode()
@click.option("--baseline", type=click.Choice(BASELINES), help=BASELINE_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print gate.json instead of the table.")
@options.run_guards
@click.pass_obj
def compare(state: State, base_skill: Path, head_skill: Path, suite: Path, split: str | None, repeats: int | None,
            out: Path | None, fresh: bool, shard: str | None, model: str | None, base_url: str | None,
            cache_mode: str | None, baseline: str | None, as_json: bool, quiet: bool, strict: bool,
            assume_yes: bool, wait: bool) -> None:
    """Paired comparison of two skill files on the same tasks; exit 1 when the head regresses."""
    from skillopt_ci.core.shard import parse_shard
    from skillopt_ci.engine.runlock import RunLock
    from skillopt_ci.gate.run import run_compare
    from skillopt_ci.gate.run_names import compare_run_dir

    config = _with_gate(load_project_config(state, model, base_url), split, repeats)
    shard_spec = parse_shard(shard)
    check_out(config, out)
    out = out or compare_run_dir(config, base_skill, head_skill, suite, shard_spec)
    with RunLock(out, wait=wait), _session(config, cache_mode, quiet, strict, assume_yes, wait, baseline) as session:
        report = run_compare(config, session, base_skill, head_skill, suite, out, shard=shard_spec, fresh=fresh,
                             baseline=baseline is not None)
        _finish_gate(report, out, as_json)


def _with_gate(config: Any, split: str | None, repeats: int | None) -> Any:
    changes = {k: v for k, v in (("split", split), ("repeats", repeats)) if v is not None}
    return replace(config, gate=replace(config.gate, **changes)) if changes else config


@click.command()
@click.option("--base", "base_ref", help="Base ref (default: origin/HEAD, origin/main or main).")
@click.option("--head", "head_ref", help="Head ref (default: the working tree, uncommitted edits included).")
@click.option("--skill", "skills", multiple=True, help="Only these configured skills (repeatable).")
@click.option("--split", help="Split (default: gate.split, val).")
@click.option("--repeats", type=click.IntRange(1, 100), help="Rollouts per task and side.")
@click.option("--out", type=click.Path(path_type=Path), help="Run directory (default: under runs_dir, named by the "
              "commits or working-tree content compared; re-running resumes).")
@options.fresh
@click.option("--shard", help="Evaluate one stable slice of the tasks, i/n (merge the slices with merge).")
@options.cache_mode()
@click.option("--baseline", type=click.Choice(BASELINES), help=BASELINE_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print gate.json instead of the table.")
@click.option("--markdown", "as_markdown", is_flag=True, help="Print report.md (e.g. >> $GITHUB_STEP_SUMMARY).")
@options.run_guards
@click.pass_obj
def gate(state: State, base_ref: str | None, head_ref: str | None, skills: tuple[str, ...], split: str | None,
         repeats: int | None, out: Path | None, fresh: bool, shard: str | None, cache_mode: str | None,
         baseline: str | None, as_json: bool, as_markdown: bool, quiet: bool, strict: bool, assume_yes: bool,
         wait: bool) -> None:
    """Evaluate base and head of every changed skill on held-out tasks; exit 1 on a regression."""
    from skillopt_ci.core.shard import parse_shard
    from skillopt_ci.engine.runlock import RunLock
    from skillopt_ci.gate.changes import default_base_ref
    from skillopt_ci.gate.git import Git
    from skillopt_ci.gate.run import run_gate
    from skillopt_ci.gate.run_names import gate_run_dir

    config = _with_gate(load_project_config(state), split, repeats)
    git = Git(config.root)
    git.top_level()  # outside a repository, say so before any ref is looked up
    base_ref = base_ref or default_base_ref(git)
    shard_spec = parse_shard(shard)
    check_out(config, out)
    out = out or gate_run_dir(config, git, base_ref, head_ref, shard_spec, skills)
    with RunLock(out, wait=wait), _session(config, cache_mode, quiet, strict, assume_yes, wait, baseline) as session:
        report = run_gate(config, git, session, out, base_ref=base_ref, head_ref=head_ref, shard=shard_spec,
                          only=skills, fresh=fresh, baseline=baseline is not None)
        _finish_gate(report, out, as_json, as_markdown)


def _refuse_an_input_as_out(dirs: tuple[Path, ...], out: Path) -> None:
    """--out must not be (or hold, or lie inside) a shard being merged: writing it would destroy that shard."""
    target = out.resolve()
    for given in dirs:
        source = given.resolve()
        if target == source or source in target.parents or target in source.parents:
            raise InputError(f"--out {out} is (or overlaps) the input run directory {given}: the merge would "
                             "overwrite that shard", hint="give --out a new folder")


@click.command()
@click.argument("dirs", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Where to write the merged run.")
@click.option("--json", "as_json", is_flag=True, help="Print the merged summary or gate.json.")
def merge(dirs: tuple[Path, ...], out: Path, as_json: bool) -> None:
    """Join the run directories of --shard jobs into the report a single run would give."""
    from skillopt_ci.engine.merge import kind_of, merge_eval_runs
    from skillopt_ci.engine.rundir import write_atomic
    from skillopt_ci.engine.runlock import RunLock
    from skillopt_ci.gate.merge import incomplete_note, merge_gate_runs
    from skillopt_ci.inputs.writable import check_dir
    from skillopt_ci.render.eval_report import eval_report, score_table

    check_dir(out, "--out")
    _refuse_an_input_as_out(dirs, out)
    kinds = {kind_of(d) for d in dirs}
    if len(kinds) > 1:
        raise InputError("cannot merge eval runs with gate runs", hint="pass the shard directories of one job")
    with RunLock(out):
        if kinds == {"gate"}:
            report = merge_gate_runs(list(dirs), out)
            _finish_gate(report, out, as_json, incomplete=incomplete_note(report))
        summary, results = merge_eval_runs(list(dirs), out)
        write_atomic(out / "report.md", eval_report(summary, results))
    click.echo(json.dumps(summary.to_dict(), indent=2) if as_json else score_table([summary]))
    if not summary.complete:
        # A partial merge must not pass for the whole split.
        advice = "merge every shard's directory" if summary.missing_tasks else "resume that shard, then merge again"
        click.echo(f"incomplete: {summary.stopped}; {advice}", err=True)
        sys.exit(EXIT_RUNTIME)
