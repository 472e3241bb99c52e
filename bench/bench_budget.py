"""What budget reservations cost an eval, and how close to its budget a stopped eval ends.

Run: python bench/bench_budget.py [--tasks 300] [--latency 0.1] [--concurrency 16] [--runs 3]

Against the scripted model server in its own process (see bench_eval.py), a priced model:
- eval wall time without a budget vs with a dollar budget it never reaches (every call reserves
  its estimate; the first call goes alone, so about one latency is the expected extra);
- an eval stopped by a dollar budget of a third of its cost: what it spent against the budget,
  and how many calls the server answered against the results kept;
- the CPU one reservation costs in this process (estimate a call with a ~16k-token skill, reserve,
  release), without the network: the figure the wall times above hide in their noise.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).parent))
from bench_eval import make_project, run_eval, start_server  # noqa: E402

PRICE = {"input": 1.0, "output": 2.0}  # USD per 1M tokens


def set_budget(root: Path, dollars: float | None) -> None:
    config = yaml.safe_load((root / "skillopt.yml").read_text())
    config["pricing"] = {"bench": PRICE}
    config["budgets"] = {} if dollars is None else {"max_dollars": dollars}
    (root / "skillopt.yml").write_text(yaml.safe_dump(config))


def walls(root: Path, out: Path, runs: int) -> tuple[list[float], list[float], dict]:
    """Eval wall times without a budget and with one never reached, the runs interleaved (so the
    machine's load falls on both alike); and a summary of the run without a budget."""
    free, held, summary = [], [], {}
    for k in range(runs):
        for budget, times in ((None, free), (1_000.0, held)):
            set_budget(root, budget)
            done, _, _ = run_eval(root, str(out / f"{budget}-{k}"), "--cache", "off", "--yes", preimport=True)
            times.append(done["wall_time_s"])
            summary = done if budget is None else summary
    return free, held, summary


def stopped_eval(root: Path, out: Path) -> dict:
    """An eval the budget stops (exit 3): its summary.json."""
    done = subprocess.run([sys.executable, "-m", "skillopt_ci", "eval", "echo", "--out", str(out), "--quiet",
                           "--cache", "off", "--yes"], cwd=root, capture_output=True, text=True)
    if done.returncode != 3:
        raise SystemExit(f"expected a budget stop (exit 3), got {done.returncode}: {done.stderr}")
    return json.loads((out / "summary.json").read_text())


def reservation_cpu(calls: int = 2_000) -> float:
    """Seconds of CPU per call to estimate, reserve and release (the skill estimate is cached)."""
    import asyncio

    from skillopt_ci.core.messages import Message
    from skillopt_ci.models.budget import Limits, SpendGuard, Spent, estimate_call

    skill = "Read the ticket carefully and decide. " * 1_500
    guard = SpendGuard(lambda: Spent(0.0, 0))

    async def go() -> float:
        with guard.limited(Limits(max_dollars=1e9)):
            started = time.process_time()
            for i in range(calls):
                messages = [Message("system", skill), Message("user", f"ticket {i}: my invoice is wrong")]
                held = await guard.reserve("target", estimate_call(messages, (), None, (1.0, 2.0)), (1.0, 2.0))
                guard.release(held, 100, 5)
            return (time.process_time() - started) / calls

    return asyncio.run(go())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=300)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        server, url = start_server(args.latency)
        try:
            make_project(root / "p", url, args.tasks, args.concurrency)
            free, held, full = walls(root / "p", root / "runs", args.runs)
            print(f"eval {args.tasks} tasks, latency {args.latency}s, concurrency {args.concurrency}, best of {args.runs}")
            print(f"  no budget: {min(free):.2f}s   a budget never reached: {min(held):.2f}s   extra "
                  f"{min(held) - min(free):+.2f}s (about one latency expected: the first call goes alone)")
            budget = round(full["spent_usd"] / 3, 6)
            set_budget(root / "p", budget)
            stopped = stopped_eval(root / "p", root / "stopped")
            print(f"  stopped by ${budget:.6f} (a third of the ${full['spent_usd']:.6f} run): spent "
                  f"${stopped['spent_usd']:.6f} ({stopped['spent_usd'] / budget:.1%} of the budget), "
                  f"{stopped['n_results']} of {args.tasks} results kept")
            print(f"  stop line: {stopped['stopped']}")
            print(f"  one reservation (estimate, reserve, release): {reservation_cpu() * 1e6:.0f} us of CPU a call")
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
