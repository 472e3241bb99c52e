"""Training quality on the noisy simulated world (helpers.noisy_world), over many seeds.

Each run trains the world's seed skill (no rules) with `skillopt-ci train`'s machinery against the
in-process scripted model server: a noisy target (0.9 correct on a kind whose rule the skill
states, 0.1 otherwise; harmful rules break a kind) and an optimizer that proposes good, useless and
harmful rules. 48 train / 24 validation / 80 test tasks, one sample per task. Per configuration:

- test: mean held-out test accuracy of the best skill as the run measured it (one sample per
  task), its ratio to the ceiling (0.90); true: the same skills' expected accuracy (no noise);
- stall: runs whose best skill tests below 0.6; harmful: runs whose best skill holds a harmful rule;
- target / optimizer calls per run, counted at the server (training, then the final test
  evaluations); cancelled: target calls the server answered that no run directory recorded
  (rollouts in flight when early stopping cut them off, which a provider still bills);
- lucky baselines: runs whose seed skill (true accuracy 0.10) scored >= 0.2 on its first validation;
- winner's curse: mean validation score of accepted skills minus their true accuracy on the
  validation tasks (positive: accepted skills were, on average, lucky);
- A/A: candidates identical in effect to their incumbent (they differ by useless rules only)
  that the gate accepted, out of those it decided on.

Configurations name TrainPolicy options: "legacy" is the defaults before these mechanisms (a
strict one-pass gate, no screening), "defaults" today's defaults, and each other configuration one
mechanism switched on alone on top of "legacy"; an option this build's TrainPolicy lacks makes its
configuration "n/a (not in this build)". Last, the issue's targets are checked for "defaults"
against "legacy" (when both ran).

Run: python bench/bench_train_quality.py [--seeds 20] [--configs defaults,sequential] [--jobs N]
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from skillopt_ci.core.edits import EditCaps, apply_edits
from skillopt_ci.inputs.config import TrainPolicy
from skillopt_ci.inputs.suite import load_suite
from skillopt_ci.sim.server import ScriptedModelServer
from skillopt_ci.train.entry import TrainRequest, run_training
from skillopt_ci.train.state import TrainState

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the test-only worlds
from helpers import noisy_world as world  # noqa: E402 (tests/helpers, on the path above)

# The defaults before this benchmark's mechanisms: a strict one-pass gate, no screening.
LEGACY: dict[str, Any] = {"acceptance": "mean"}
CONFIGS: dict[str, dict[str, Any]] = {
    "legacy": LEGACY,
    "defaults": {},
    # the other acceptance rules, and each further mechanism on top of the legacy rule
    "honest": {"acceptance": "honest"},
    "sequential": {"acceptance": "sequential"},
    "screening": {**LEGACY, "screening": True},
    "credit_confidence=0.8": {**LEGACY, "credit_confidence": 0.8},
}
STALL = 0.6
LUCKY = 0.2  # a seed skill (true accuracy 0.10) that scored at least twice that on validation
# Run directories in memory where there is such a file system: a run checkpoints (and fsyncs) at
# every stage, which on a disk costs more than the model calls.
TMP = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


@dataclasses.dataclass
class RunResult:
    baseline_val: float
    test: float
    true_test: float
    harmful: bool
    train_calls: int
    test_calls: int
    optimizer_calls: int
    cancelled: int
    aa_decided: int
    aa_accepted: int
    curse: list[float]  # validation score minus true accuracy, per accepted version
    accepted: int
    seconds: float


def missing_options(overrides: dict[str, Any]) -> list[str]:
    return [k for k in overrides if k not in TrainPolicy.__dataclass_fields__]


def train_once(overrides: dict[str, Any], seed: int, concurrency: int) -> RunResult:
    with tempfile.TemporaryDirectory(dir=TMP) as tmp, ScriptedModelServer(world.NoisyModels()) as server:
        root = Path(tmp)
        files = world.write_world(root, seed)
        policy = dataclasses.replace(TrainPolicy(), seed=seed, **overrides)
        config = world.world_config(server.openai_base_url, root, files, policy, concurrency)
        started = time.perf_counter()
        outcome = run_training(config, TrainRequest(skill=world.SKILL_NAME, out=root / "run"), log=lambda line: None,
                               session_options={"show_progress": False})
        seconds = time.perf_counter() - started
        suite = load_suite(files.suite)
        test_prompts = {suite.render_prompt(t) for t in suite.tasks("test")}
        target = [c for c in server.calls if c.request.model == world.TARGET_MODEL]
        test_calls = sum(1 for c in target if c.request.last_user in test_prompts)
        recorded = sum(sum(1 for line in p.read_text().splitlines() if line.strip())
                       for p in (root / "run").rglob("results.jsonl"))
        aa_decided, aa_accepted = aa_counts(root / "run")
        state = TrainState.load(root / "run")
        curse = [v.val_mean - world.expected_accuracy((root / "run" / "skills" / f"v{v.number:03d}.md").read_text(),
                                                      list(files.kinds["val"]))
                 for v in state.versions[1:] if v.val_mean is not None]
        summary = outcome.summary
        return RunResult(
            baseline_val=state.versions[0].val_mean or 0.0,
            test=summary.test.trained if summary.test else float("nan"),
            true_test=world.expected_accuracy(outcome.best_text, list(files.kinds["test"])),
            harmful=bool(world.harmful_in(outcome.best_text)),
            train_calls=len(target) - test_calls, test_calls=test_calls,
            optimizer_calls=len(server.calls) - len(target), cancelled=len(target) - recorded,
            aa_decided=aa_decided, aa_accepted=aa_accepted, curse=curse, accepted=summary.steps_accepted, seconds=seconds)


def aa_counts(run: Path) -> tuple[int, int]:
    """(candidates identical in effect to their incumbent that training decided on, how many of them
    it accepted). A step's candidate is what its applied edits made of the incumbent, before any
    screening (so a step screened out counts as a rejection, as a gate's rejection would); the slow
    update's is the skill it validated."""
    decided = accepted = 0
    for record in TrainState.load(run).history:
        if record.decision is None or record.decision.value not in ("accepted", "rejected"):
            continue
        incumbent = run / "skills" / f"v{record.incumbent_version:03d}.md"
        candidate = proposed_candidate(run, record, incumbent.read_text(encoding="utf-8"))
        if candidate is None:
            continue
        if world.effect(candidate) == world.effect(incumbent.read_text(encoding="utf-8")):
            decided += 1
            accepted += record.decision.value == "accepted"
    return decided, accepted


def proposed_candidate(run: Path, record: Any, incumbent: str) -> str | None:
    edits = [o.edit for o in record.applied if o.applied]
    if record.kind.value == "step" and edits:
        text, _ = apply_edits(incumbent, edits, EditCaps(max_edit_chars=10**6, max_skill_tokens=10**6))
        return text
    validated = run / "steps" / record.step / "val" / "skill.md"
    return validated.read_text(encoding="utf-8") if validated.exists() else None


def _job(args: tuple[str, int, int]) -> tuple[str, int, RunResult]:
    name, seed, concurrency = args
    return name, seed, train_once(CONFIGS[name], seed, concurrency)


def report(name: str, runs: list[RunResult]) -> str:
    n = len(runs)
    test = sum(r.test for r in runs) / n
    true = sum(r.true_test for r in runs) / n
    aa_decided = sum(r.aa_decided for r in runs)
    aa_accepted = sum(r.aa_accepted for r in runs)
    aa = f"{aa_accepted}/{aa_decided}" + (f" ({100 * aa_accepted / aa_decided:.0f}%)" if aa_decided else "")
    per = lambda attr: sum(getattr(r, attr) for r in runs) / n  # noqa: E731
    lucky = sum(r.baseline_val >= LUCKY for r in runs)
    curse = [c for r in runs for c in r.curse]
    curse_text = f"{sum(curse) / len(curse):+.3f}" if curse else "n/a"
    return (f"{name:<22} test {test:.3f} ({100 * test / world.CEILING:.0f}% of ceiling), true {true:.3f} | "
            f"stall<{STALL}: {sum(r.test < STALL for r in runs)}/{n} | harmful: {sum(r.harmful for r in runs)}/{n} | "
            f"target calls {per('train_calls'):.0f} (+{per('test_calls'):.0f} test), cancelled {per('cancelled'):.1f} | "
            f"optimizer calls {per('optimizer_calls'):.1f} | accepted steps {per('accepted'):.1f} | A/A accepted {aa} | "
            f"lucky baselines {lucky}/{n} (highest {max(r.baseline_val for r in runs):.2f}) | "
            f"winner's curse {curse_text} | {per('seconds'):.1f}s/run")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, from: {', '.join(CONFIGS)}")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="runs in parallel (processes)")
    ap.add_argument("--concurrency", type=int, default=8, help="model calls in flight per run (the project default)")
    args = ap.parse_args()
    names = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in names if c not in CONFIGS]
    if unknown:
        ap.error(f"unknown configuration {unknown[0]!r}; known: {', '.join(CONFIGS)}")
    runnable = [c for c in names if not missing_options(CONFIGS[c])]
    print(f"noisy world: {len(world.CATEGORIES)} kinds, p {world.P_RIGHT}/{world.P_WRONG}, 48 train / 24 val / 80 test, "
          f"{args.seeds} seeds, ceiling {world.CEILING:.2f}, {args.jobs} jobs, concurrency {args.concurrency}")
    import openai  # noqa: F401  (imported once, before the workers fork)

    started = time.perf_counter()
    results: dict[str, list[RunResult]] = {c: [] for c in runnable}
    jobs = [(c, seed, args.concurrency) for c in runnable for seed in range(args.seeds)]
    with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        for name, _seed, result in pool.map(_job, jobs):
            results[name].append(result)
    for name in names:
        missing = missing_options(CONFIGS[name])
        print(report(name, results[name]) if not missing else
              f"{name:<22} n/a (not in this build: {', '.join(missing)})")
    if "defaults" in results and "legacy" in results:
        print(targets(results["defaults"], results["legacy"]))
    print(f"wall time {time.perf_counter() - started:.1f}s for {len(jobs)} runs")


def targets(new: list[RunResult], old: list[RunResult]) -> str:
    """The issue's targets for the defaults, each marked met or not."""
    n = len(new)
    test, old_test = sum(r.test for r in new) / n, sum(r.test for r in old) / len(old)
    calls, old_calls = sum(r.train_calls for r in new) / n, sum(r.train_calls for r in old) / len(old)
    decided, accepted = sum(r.aa_decided for r in new), sum(r.aa_accepted for r in new)
    aa = accepted / decided if decided else 0.0
    checks = [
        (f"test >= 94% of the ceiling ({test / world.CEILING:.1%})", test >= 0.94 * world.CEILING),
        (f"no run stalls below {STALL} ({sum(r.test < STALL for r in new)}/{n})", all(r.test >= STALL for r in new)),
        (f"no harmful rule in the best skill ({sum(r.harmful for r in new)}/{n})", not any(r.harmful for r in new)),
        (f"target calls <= half of legacy ({calls:.0f} vs {old_calls / 2:.0f})", calls <= old_calls / 2),
        (f"test accuracy >= legacy ({test:.3f} vs {old_test:.3f})", test >= old_test),
        (f"A/A accepted <= 5% ({aa:.1%} of {decided})", aa <= 0.05),
    ]
    return "targets (defaults vs legacy): " + "; ".join(f"{text} {'met' if ok else 'NOT met'}" for text, ok in checks)


if __name__ == "__main__":
    main()
