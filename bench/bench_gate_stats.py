"""How often the gate fails a PR that changed nothing, how often it catches a real drop, and
whether the "detectable drop" it states matches what it catches.

Run: python bench/bench_gate_stats.py [--runs 300] [--workers 2]

Uses the simulated noisy model of ``tests/gate/test_gate_statistics.py`` (60% of tasks truly pass
under base, every rollout's outcome flipped with probability 0.2; run ``i`` uses model seed ``i``,
the policy is the default one with seed 0) on four suites: 24 tasks × 1 repeat (a small
validation split), 24 × 3, 60 × 1, and 60 tasks × 3 repeats (the acceptance scenario).
Per suite it prints:
- the false-failure rate of ``--runs`` A/A comparisons with a 95% Wilson interval, against the
  nominal level: a 95% interval fails on its lower tail only, so (1 - 0.95) / 2 = 2.5%;
  beside it the rate of the interval alone (the decision before the exact test had to agree);
- the detection rate (power) of true drops of 10 and 15 points, with the interval alone beside it;
- the detectable drop the gate states (median over the A/A runs: ``Comparison.detectable_drop``,
  80% power at alpha 0.05), and the power simulated at exactly that drop (target about 80%;
  skipped when the drop is more than the model can make: only 60% of the tasks pass to begin with);
- the time per comparison at 60 tasks and at 500 tasks × 2000 resamples (pass/fail scores, whose
  exact test is counted, and continuous ones, whose exact test samples 2000 sign patterns).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_gate_statistics import BASE_PASS_SHARE, FLIP, POLICY, simulate_drop  # noqa: E402

from skillopt_ci.core.compare import compare_results  # noqa: E402
from skillopt_ci.core.records import TaskResult  # noqa: E402
from skillopt_ci.core.stats import below  # noqa: E402

SUITES = ((24, 1), (24, 3), (60, 1), (60, 3))
NOMINAL = (1 - POLICY.confidence) / 2


def one(args: tuple[int, int, float, int]) -> tuple[bool, bool, float | None]:
    """(gate says regressed, interval alone says regressed, stated detectable drop) for one run."""
    n_tasks, repeats, drop, seed = args
    c = compare_results(*simulate_drop(seed, n_tasks, repeats, drop), POLICY)
    interval_alone = c.ci is not None and below(c.ci[1], -POLICY.margin)
    return c.verdict == "regressed", interval_alone, c.detectable_drop


def batch(pool: ProcessPoolExecutor, n_tasks: int, repeats: int, drop: float, runs: int
          ) -> list[tuple[bool, bool, float | None]]:
    return list(pool.map(one, [(n_tasks, repeats, drop, seed) for seed in range(runs)], chunksize=25))


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(rows: list[tuple[bool, bool, float | None]], column: int = 0) -> str:
    k = sum(r[column] for r in rows)
    lo, hi = wilson(k, len(rows))
    return f"{k / len(rows):5.1%} [{lo:.1%}, {hi:.1%}]"


def seconds_per_comparison(n_tasks: int, repeats: int, count: int, continuous: bool = False) -> float:
    rng = random.Random(0)
    ids = [f"t{i}" for i in range(n_tasks)]

    def side() -> list[TaskResult]:
        return [TaskResult(t, r, "p", "o", s, s >= 0.5) for t in ids for r in range(repeats)
                for s in (rng.random() if continuous else float(rng.random() < 0.6),)]

    base, head = side(), side()
    start = time.perf_counter()
    for _ in range(count):
        compare_results(base, head, ids, POLICY)
    return (time.perf_counter() - start) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="simulated PRs per row (>= 300 for the A/A claim)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    start = time.perf_counter()
    print(f"policy: {POLICY.confidence:.0%} interval + exact paired test, margin {POLICY.margin}, "
          f"{POLICY.resamples} resamples; {args.runs} simulated PRs per row; rates with 95% Wilson intervals")
    print(f"nominal false-failure rate: {NOMINAL:.1%} (one-sided tail of the {POLICY.confidence:.0%} interval)")
    with ProcessPoolExecutor(args.workers) as pool:
        for n_tasks, repeats in SUITES:
            print(f"\n{n_tasks} tasks × {repeats} repeat{'s' if repeats > 1 else ''}")
            print(f"  {'true drop':<18} {'gate: regressed':>24} {'interval alone':>24}")
            aa = batch(pool, n_tasks, repeats, 0.0, args.runs)
            print(f"  {'0 pt (A/A)':<18} {rate(aa):>24} {rate(aa, 1):>24}")
            for points in (10, 15):
                rows = batch(pool, n_tasks, repeats, points / 100, args.runs)
                print(f"  {f'{points} pt':<18} {rate(rows):>24} {rate(rows, 1):>24}")
            mde = median(r[2] for r in aa if r[2] is not None)
            reachable = round(BASE_PASS_SHARE * n_tasks) * ((1 - FLIP) - FLIP) / n_tasks
            if mde <= reachable:
                rows = batch(pool, n_tasks, repeats, mde, args.runs)
                print(f"  {f'{mde * 100:.1f} pt (stated)':<18} {rate(rows):>24} {rate(rows, 1):>24}")
                simulated = f"simulated power there: {sum(r[0] for r in rows) / len(rows):.1%}"
            else:
                simulated = f"not simulated (this model drops at most {reachable * 100:.0f} points)"
            k = sum(r[0] for r in aa)
            verdict = ("at or below it" if k / len(aa) <= NOMINAL else
                       "above it, within sampling noise" if wilson(k, len(aa))[0] <= NOMINAL else "EXCEEDED")
            print(f"  false failures: {k} of {len(aa)} ({k / len(aa):.1%}), nominal {NOMINAL:.1%}: {verdict}")
            print(f"  stated detectable drop (80% power): {mde * 100:.1f} points; {simulated}")
    print(f"\ntime per comparison, 60 tasks × 3 repeats: {seconds_per_comparison(60, 3, 50) * 1e3:.1f} ms")
    print(f"time per comparison, 500 tasks × 1 repeat: {seconds_per_comparison(500, 1, 5) * 1e3:.1f} ms "
          f"(pass/fail), {seconds_per_comparison(500, 1, 5, continuous=True) * 1e3:.1f} ms (continuous scores)")
    print(f"bench wall time: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
