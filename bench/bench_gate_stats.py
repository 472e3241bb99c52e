"""How often the gate fails a PR that changed nothing, and how often it catches a real drop.

Run: python bench/bench_gate_stats.py [--runs 100]

Uses the simulated noisy model of ``tests/test_gate_statistics.py`` (60 tasks, 3 repeats per
side, 60% of tasks truly pass under base, every rollout's outcome flipped with probability 0.2;
run ``i`` uses model seed ``i``, the policy is the default one with seed 0). Prints:
- the false-failure rate of A/A comparisons (target ≤ 5%);
- the detection rate of true drops of 15 points (target ≥ 80%), 10 and 5 points: a power curve;
  a drop of P points breaks P / 100 × 60 / 0.6 truly passing tasks;
- beside the interval's verdict, how often the reported sign test and McNemar test alone would
  have flagged the drop at the same level (they do not decide; shown for comparison);
- the time per comparison, at 60 tasks and at 500 tasks × 2000 resamples.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from statistics import fmean

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_gate_statistics import POLICY, simulate, tasks_for_drop  # noqa: E402

from skillopt_ci.compare import compare_results  # noqa: E402
from skillopt_ci.records import TaskResult  # noqa: E402


def rates(drop_tasks: int, runs: int) -> dict[str, float]:
    alpha = 1 - POLICY.confidence
    flagged = {"regressed": 0, "sign": 0, "mcnemar": 0}
    deltas = []
    for seed in range(runs):
        c = compare_results(*simulate(seed, drop_tasks), POLICY)
        deltas.append(c.delta)
        moved_down = sum(1 for t in c.tasks if t.base_pass >= 0.5 > t.head_pass)
        moved_up = sum(1 for t in c.tasks if t.head_pass >= 0.5 > t.base_pass)
        flagged["regressed"] += c.verdict == "regressed"
        flagged["sign"] += c.p_sign < alpha and c.regressed > c.improved
        flagged["mcnemar"] += c.p_mcnemar < alpha and moved_down > moved_up
    return {**{k: v / runs for k, v in flagged.items()}, "delta": fmean(deltas)}


def seconds_per_comparison(n_tasks: int, repeats: int, count: int) -> float:
    rng = random.Random(0)
    ids = [f"t{i}" for i in range(n_tasks)]

    def side() -> list[TaskResult]:
        return [TaskResult(t, r, "p", "o", s, s >= 0.5) for t in ids for r in range(repeats)
                for s in (float(rng.random() < 0.6),)]

    base, head = side(), side()
    start = time.perf_counter()
    for _ in range(count):
        compare_results(base, head, ids, POLICY)
    return (time.perf_counter() - start) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100, help="simulated PRs per scenario")
    args = parser.parse_args()

    print(f"policy: {POLICY.confidence:.0%} interval, margin {POLICY.margin}, "
          f"{POLICY.resamples} resamples; {args.runs} simulated PRs per row")
    print(f"{'true drop':>10} {'broken':>7} {'mean Δ':>8} {'regressed':>10} {'sign':>6} {'McNemar':>8}")
    regressed = {}
    for points in (0, 5, 10, 15):
        k = tasks_for_drop(points / 100)
        r = rates(k, args.runs)
        regressed[points] = r["regressed"]
        print(f"{points:>7} pt {k:>7} {r['delta']:>+8.3f} {r['regressed']:>10.1%} "
              f"{r['sign']:>6.1%} {r['mcnemar']:>8.1%}")
    print(f"false-failure rate (A/A): {regressed[0]:.1%} (target ≤ 5%)")
    print(f"detection of a 15-point drop: {regressed[15]:.1%} (target ≥ 80%)")
    print(f"time per comparison, 60 tasks × 3 repeats: {seconds_per_comparison(60, 3, 50) * 1e3:.1f} ms")
    print(f"time per comparison, 500 tasks × 1 repeat: {seconds_per_comparison(500, 1, 5) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
