"""Mode eval (a schedule or a manual run): every configured skill, or the named ones, evaluated
eval-only, beside the default branch's last scores (github/trend.py); the job summary, the verdict
and the exit code (:func:`report_evals`, which the merge job of a sharded run reports through).
"""

from __future__ import annotations

from typing import Any

from skillopt_ci.core.errors import EXIT_FAILED, EXIT_OK
from skillopt_ci.engine.evaluation import EvalSession, threshold_verdict
from skillopt_ci.github.context import (
    Context,
    _config,
    missing_key,
    selected_skills,
    shard_done,
    skip,
)
from skillopt_ci.inputs.config import Config
from skillopt_ci.render.eval_report import score_table


def eval_flow(ctx: Context) -> int:
    """Scheduled or manual run: every configured skill (or the named ones), eval-only."""
    from skillopt_ci.github.trend import evaluate_entries, scheduled_section

    s = ctx.settings
    config = _config(ctx)
    entries = selected_skills(config, s.skills)
    reason = missing_key(config, ("target", "judge"))
    if reason:
        return skip(ctx, "No model key", f"{reason}. Nothing was evaluated.")
    options = {**ctx.session_options, "estimate_runs": 2} if s.baseline else ctx.session_options
    if s.batch:  # input batch: at the batch price, answered within the providers' 24-hour window
        options = {**options, "batch": True}
    with EvalSession(config, **options) as session:
        summaries, _, worth_lines = evaluate_entries(ctx, config, session, entries, "scheduled")
    pairs = [(e.name, summary) for e, summary in zip(entries, summaries, strict=True)]
    if s.shard:
        return shard_done(ctx, pairs)
    return report_evals(ctx, config, pairs, worth_lines, trend=scheduled_section(ctx, pairs))


def report_evals(ctx: Context, config: Config, summaries: list[Any], worth_lines: list[str],
                 failed: tuple[str, ...] = (), trend: str = "") -> int:
    """Job summary, verdict and exit code of an eval: a score under gate.min_score or an incomplete run fails."""
    from skillopt_ci.github.trend import notes_of

    failing = list(failed)
    for name, summary in summaries:
        code, line = threshold_verdict(summary, config.gate.min_score)
        if code != EXIT_OK:
            failing.append(f"{name}: {line}")
    table = score_table([summary for _, summary in summaries], "github")
    notes = notes_of(worth_lines, failing)
    ctx.summary(f"## skillopt-ci eval: {'❌' if failing else '✅'} {len(summaries)} skill(s)\n\n{table}\n{notes}\n{trend}")
    ctx.outputs["verdict"] = "failed" if failing else "passed"
    return EXIT_FAILED if failing and ctx.settings.fail else EXIT_OK
