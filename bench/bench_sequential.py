"""The error rate and the cost of training's paired validation test (core/sequential.py).

Run: python bench/bench_sequential.py [--runs 2000] [--tasks 24] [--alpha 0.05] [--rounds 4]

A simulated validation split: each task passes with probability 0.9 or 0.1 (half the tasks each,
as in a world where a skill either states a category's rule or not). The incumbent carries the
samples an honest incumbent has after one earlier comparison (its own pass and one re-sample);
the candidate is sampled once per task in round 1, and the sequential test adds one sample per
side on the tasks where the two disagree. Printed per configuration:
- A/A: the candidate has the incumbent's success probabilities; the accept rate is the error the
  test is designed to hold at or below alpha (with a 95% Wilson interval);
- A/B: a share of the failing tasks becomes passing (a true gain of about +0.15 and +0.30);
- the mean samples the gate drew per task (candidate and incumbent, all rounds).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from skillopt_ci.core.sequential import validate  # noqa: E402


def wilson(k: int, n: int) -> tuple[float, float]:
    z = 1.96
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def world(n_tasks: int, gain_tasks: int) -> tuple[list[float], list[float]]:
    """(incumbent, candidate) success probabilities per task; ``gain_tasks`` failing tasks fixed."""
    inc = [0.9 if i % 2 == 0 else 0.1 for i in range(n_tasks)]
    cand = list(inc)
    for i in range(1, 2 * gain_tasks, 2):
        cand[i] = 0.9
    return inc, cand


def one_run(rng: random.Random, inc_p: list[float], cand_p: list[float], *, alpha: float, rounds: int,
            prior: int) -> tuple[bool, int]:
    ids = [f"t{i}" for i in range(len(inc_p))]
    p = {"incumbent": dict(zip(ids, inc_p, strict=True)), "candidate": dict(zip(ids, cand_p, strict=True))}

    def draw(side: str, tasks, _round: int) -> dict[str, list[float]]:
        return {t: [float(rng.random() < p[side][t])] for t in tasks}

    incumbent = {t: [float(rng.random() < p["incumbent"][t]) for _ in range(prior)] for t in ids}
    candidate = draw("candidate", ids, 1)
    result = validate(draw, candidate, incumbent, ids, alpha=alpha, rounds=rounds)
    drawn = len(ids) * 2 + result.extra_samples  # round 1: the candidate's pass and the incumbent's re-sample
    return result.look.verdict == "accept", drawn


def measure(runs: int, n_tasks: int, gain_tasks: int, *, alpha: float, rounds: int, seed: str) -> tuple[int, float]:
    rng = random.Random(seed)
    inc_p, cand_p = world(n_tasks, gain_tasks)
    accepted = drawn = 0
    for _ in range(runs):
        ok, n = one_run(rng, inc_p, cand_p, alpha=alpha, rounds=rounds, prior=2)
        accepted += ok
        drawn += n
    return accepted, drawn / runs / n_tasks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--tasks", type=int, default=24)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args(argv)
    n = args.tasks
    for label, rounds in (("one look (honest_incumbent)", 1), (f"sequential, {args.rounds} rounds", args.rounds)):
        print(f"{label}: {n} tasks, alpha {args.alpha:g} (Bonferroni: {args.alpha / rounds:.4g} per look)")
        for gain_tasks in (0, max(1, round(0.15 * n / 0.8)), max(1, round(0.30 * n / 0.8))):
            acc, per_task = measure(args.runs, n, gain_tasks, alpha=args.alpha, rounds=rounds,
                                    seed=f"{label}:{gain_tasks}")
            lo, hi = wilson(acc, args.runs)
            gain = gain_tasks * 0.8 / n
            name = "A/A" if gain_tasks == 0 else f"A/B (+{gain:.2f})"
            designed = f" (designed <= {args.alpha:.0%})" if gain_tasks == 0 else ""
            print(f"  {name} accepted {acc / args.runs:.1%} [{lo:.1%}, {hi:.1%}]{designed}, "
                  f"mean samples {per_task:.2f} per task")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
