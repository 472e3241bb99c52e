"""``bench run``: one skill on the imported benchmarks, one results table (benchmark × environment)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import click

from skillopt_ci.cli import options
from skillopt_ci.cli.common import State, check_out, load_project_config
from skillopt_ci.core.errors import InputError


def names(value: str | None, option: str) -> tuple[str, ...]:
    """A comma-separated list, blanks dropped; an empty list is a usage error."""
    if value is None:
        return ()
    items = tuple(part.strip() for part in value.split(",") if part.strip())
    if not items:
        raise InputError(f"{option} is empty; give comma-separated names")
    return items


@click.command(name="run")
@click.option("--skill", "skill", required=True, type=click.Path(path_type=Path), help="The skill file to evaluate.")
@click.option("--benchmarks", help="Comma-separated benchmark names (default: every imported one found).")
@click.option("--env", "envs", help="Comma-separated environments, one column each, e.g. chat,codex,claude-code "
              "(default: each suite's own environment).")
@click.option("--split", default="test", show_default=True, help="Which split to evaluate.")
@click.option("--suites-dir", type=click.Path(path_type=Path), default=Path("eval_suites"), show_default=True,
              help="The folder holding the imported suites, one folder each (bench import writes eval_suites/NAME; "
                   "after bench import --out DIR/NAME, pass DIR).")
@click.option("--out", type=click.Path(path_type=Path), help="Where to write bench.md and bench.json (default: under runs_dir).")
@options.model
@options.base_url()
@options.cache_mode("Response cache mode.")
@click.option("--concurrency", type=click.IntRange(1, 512), help="Model calls in flight.")
@click.option("--shard", help="Evaluate one stable slice of each split, i/n (merge each cell's runs with merge).")
@click.option("--fresh", is_flag=True, help="Discard the existing runs of these cells and start over.")
@options.assume_yes
@options.quiet
@click.pass_obj
def bench_run(state: State, skill: Path, benchmarks: str | None, envs: str | None, split: str, suites_dir: Path,
              out: Path | None, model: str | None, base_url: str | None, cache_mode: str | None,
              concurrency: int | None, shard: str | None, fresh: bool, assume_yes: bool, quiet: bool) -> None:
    """Evaluate a skill on imported benchmarks: one table, benchmark × environment."""
    from skillopt_ci.benchmarks.run import BenchRequest, exit_code, run_bench, too_many_errors
    from skillopt_ci.core.paths import display_path
    from skillopt_ci.core.shard import parse_shard
    from skillopt_ci.render.bench_table import bench_text, heading

    config = load_project_config(state, model, base_url)
    if concurrency:
        config = replace(config, concurrency=concurrency)
    check_out(config, out)
    request = BenchRequest(skill=skill, benchmarks=names(benchmarks, "--benchmarks"), envs=names(envs, "--env"),
                           split=split, suites_dir=suites_dir, out=out, shard=parse_shard(shard),
                           cache_mode=cache_mode, fresh=fresh, assume_yes=assume_yes)
    outcome = run_bench(config, request, show_progress=not quiet,
                        log=None if quiet else lambda line: click.echo(line, err=True))
    click.echo(heading(outcome.table))
    click.echo("")
    click.echo(bench_text(outcome.table))
    click.echo(f"\nwritten: {display_path(outcome.out / 'bench.md')}, {display_path(outcome.out / 'bench.json')}")
    for line in too_many_errors(outcome.table, config.max_error_rate):
        click.echo(f"fail: {line}", err=True)
    sys.exit(exit_code(outcome.table, config.max_error_rate))
