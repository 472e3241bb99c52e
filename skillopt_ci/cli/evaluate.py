"""``eval``: evaluate one skill on a suite split, with an optional threshold."""

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
from skillopt_ci.core.errors import EXIT_OK, InputError


@click.command(name="eval")
@click.argument("skill")
@click.option("--suite", type=click.Path(path_type=Path), help="Suite directory (default: the skill's suite in skillopt.yml).")
@click.option("--split", default="val", show_default=True, help="Which split to evaluate.")
@click.option("--repeats", type=click.IntRange(1, 100), help="Rollouts per task (default: the suite's).")
@click.option("--out", type=click.Path(path_type=Path), help="Run directory (default: a stable one under runs_dir; re-running resumes).")
@options.fresh
@click.option("--threshold", type=click.FloatRange(0, 1), help="Eval-only check: exit 1 when the score is below it.")
@options.model
@options.base_url()
@options.cache_mode("Response cache mode.")
@click.option("--concurrency", type=click.IntRange(1, 512), help="Model calls in flight.")
@click.option("--shard", help="Evaluate one stable slice of the tasks, i/n (merge the slices with merge).")
@click.option("--baseline", type=click.Choice(BASELINES), help="Also evaluate the same tasks with no skill and show what the skill adds (--baseline none).")
@click.option("--json", "as_json", is_flag=True, help="Print summary.json (plus the input warnings) instead of the table.")
@options.run_guards
@click.option("--batch", is_flag=True, help="Send the model calls through the provider's batch API (OpenAI, Azure OpenAI, Anthropic) at the batch price; slower, resumable.")
@click.pass_obj
def eval_cmd(state: State, skill: str, suite: Path | None, split: str, repeats: int | None, out: Path | None,
             fresh: bool, threshold: float | None, model: str | None, base_url: str | None, cache_mode: str | None,
             concurrency: int | None, shard: str | None, baseline: str | None, as_json: bool, quiet: bool, strict: bool,
             assume_yes: bool, wait: bool, batch: bool) -> None:
    """Evaluate SKILL (a file, or a skill name from skillopt.yml) on a suite split."""
    from skillopt_ci.core.shard import parse_shard
    from skillopt_ci.engine.evaluation import EvalRequest, run_eval, threshold_verdict
    from skillopt_ci.render.eval_report import no_skill_line, score_table

    config = load_project_config(state, model, base_url)
    if concurrency:
        config = replace(config, concurrency=concurrency)
    skill_path, suite_path = resolve_skill(config, skill, suite)
    check_out(config, out)
    request = EvalRequest(skill=skill_path, suite=suite_path, split=split, repeats=repeats, out=out, fresh=fresh,
                          threshold=threshold, cache_mode=cache_mode, shard=parse_shard(shard), strict=strict,
                          assume_yes=assume_yes, wait=wait, baseline=baseline, batch=batch)
    outcome = run_eval(config, request, show_progress=not quiet)
    code, verdict = threshold_verdict(outcome.summary, threshold)
    if as_json:
        from skillopt_ci.engine.evaluation import prepare
        from skillopt_ci.inputs.preflight import plan_warnings

        warnings = [str(p) for p in plan_warnings(prepare(request), config.limits)]
        click.echo(json.dumps({**outcome.summary.to_dict(), "warnings": warnings}, indent=2))
    else:
        click.echo(score_table([outcome.summary]))
        if outcome.summary.no_skill:
            click.echo(no_skill_line(outcome.summary))
        click.echo(f"\nrun: {outcome.run_dir}")
    click.echo(("ok: " if code == EXIT_OK else "fail: ") + verdict, err=True)
    sys.exit(code)


def resolve_skill(config: Any, skill: str, suite: Path | None) -> tuple[Path, Path]:
    """SKILL is a path, or the name of a configured skill; --suite defaults to its suite."""
    entry = config.skill(skill)
    path = Path(skill)
    if entry is None:
        resolved = (path / "SKILL.md" if path.is_dir() else path).resolve()
        entry = next((e for e in config.skills if e.path.resolve() == resolved), None)
    if entry is not None and not path.exists():
        path = entry.path
    if not path.exists():
        known = ", ".join(e.name for e in config.skills) or "none configured"
        raise InputError(f"no skill file or configured skill named {skill!r}", hint=f"configured skills: {known}")
    if suite is None:
        if entry is None:
            raise InputError(f"{skill} is not in skillopt.yml, so --suite is needed")
        suite = entry.suite
    return path, suite
