"""``train``: improve a skill on its train split, keeping only edits that win on validation."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from skillopt_ci.cli import options
from skillopt_ci.cli.common import State, check_out, load_project_config
from skillopt_ci.core.baseline import BASELINES
from skillopt_ci.core.errors import EXIT_OK
from skillopt_ci.core.paths import display_path


@click.command()
@click.option("--skill", "skill", required=True, help="The configured skill to train.")
@click.option("--out", type=click.Path(path_type=Path), help="Run directory (default: under runs_dir; re-running resumes).")
@options.fresh
@click.option("--epochs", type=click.IntRange(1, 100), help="Passes over the train split (default: train.epochs).")
@click.option("--batch-size", type=click.IntRange(1, 10_000), help="Train tasks per step (default: train.batch_size).")
@click.option("--budget-tokens", type=click.IntRange(0), help="Stop after this many tokens (all models).")
@click.option("--budget-dollars", type=click.FloatRange(0), help="Stop after this many dollars.")
@click.option("--budget-seconds", type=click.FloatRange(0), help="Stop after this much wall time.")
@options.cache_mode()
@click.option("--baseline", type=click.Choice(BASELINES), help="Also evaluate val and test with no skill and show "
              "what the trained skill adds (--baseline none).")
@click.option("--target", type=click.Choice(("body", "description", "both")), help="What edits change: the body, the "
              "front-matter description (trained on the suite's trigger tasks), or both (default: train.target).")
@click.option("--json", "as_json", is_flag=True, help="Print summary.json.")
@options.run_guards
@click.pass_obj
def train(state: State, skill: str, out: Path | None, fresh: bool, epochs: int | None, batch_size: int | None,
          budget_tokens: int | None, budget_dollars: float | None, budget_seconds: float | None,
          cache_mode: str | None, baseline: str | None, target: str | None, as_json: bool, quiet: bool, strict: bool, assume_yes: bool,
          wait: bool) -> None:
    """Train a skill: rollout, reflect, edit, keep only what beats it on validation."""
    from skillopt_ci.train.entry import TrainRequest, run_training
    from skillopt_ci.train.report import summary_table

    config = load_project_config(state)
    check_out(config, out)
    request = TrainRequest(skill=skill, out=out, fresh=fresh, epochs=epochs, batch_size=batch_size,
                           max_tokens=budget_tokens, max_dollars=budget_dollars, max_wall_seconds=budget_seconds,
                           cache_mode=cache_mode, wait=wait, baseline=baseline, target=target)
    outcome = run_training(config, request, log=(lambda line: None) if quiet else (lambda line: click.echo(line, err=True)),
                           session_options={"show_progress": False, "strict": strict, "assume_yes": assume_yes,
                                            # the no-skill val run costs about one more evaluation
                                            "estimate_runs": 2 if baseline else 1})
    if as_json:
        from skillopt_ci.core.skill import load_skill
        from skillopt_ci.inputs.preflight import skill_warnings

        shown = display_path(outcome.entry.path)
        warnings = [str(p) for p in skill_warnings(load_skill(outcome.entry.path, display=shown), shown, config.limits)]
        click.echo(json.dumps({**outcome.summary.to_dict(), "warnings": warnings}, indent=2))
    else:
        click.echo(summary_table(outcome.summary))
        click.echo(f"\nbest skill: {display_path(outcome.run_dir / 'best_skill.md')}")
    s = outcome.summary
    if not s.complete:
        click.echo(f"stopped: {s.stopped}; re-run the same command to resume", err=True)
    else:
        click.echo("improved" if s.improved else "no improvement", err=True)
    sys.exit(EXIT_OK)
