"""Eval throughput, cache, start-up time and memory, measured against the scripted model server.

Run: python bench/bench_eval.py [--tasks 500] [--latency 0.1] [--concurrency 16] [--big 10000] [--runs 3]

Prints ratios against an ideal measured in the same run (these machines are noisy):
- efficiency = ideal wall time (tasks × latency / concurrency) ÷ measured eval wall time
  (target ≥ 0.9 with the SDK already imported; best of ``--runs``, since load only slows a run);
  the server runs in its own process so it does not share our GIL;
- the cost of writing each result as it finishes (one ``O_APPEND`` write per line, so ``kill -9``
  loses only the calls in flight) against one batched write of the same lines;
- the same eval re-run from the cache: model calls (target 0) and wall time;
- ``skillopt-ci --help`` start-up vs ``python -c pass`` (target < 0.5 s extra);
- peak RSS of a 10,000-task eval process (target < 300 MB).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

PY = sys.executable
CLI = [PY, "-m", "skillopt_ci"]


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [PY, "-m", "skillopt_ci.sim.server", "--latency", str(latency)],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline().strip()
    if not line.startswith("READY "):
        raise SystemExit(f"server did not start: {line!r}")
    return proc, line.split()[1]


def make_project(root: Path, url: str, n_tasks: int, concurrency: int) -> None:
    suite = root / "eval_suites/echo"
    suite.mkdir(parents=True)
    (suite / "suite.yaml").write_text("name: echo\nprompt: '{{ input }}'\nscorer: {type: exact}\n")
    with open(suite / "val.jsonl", "w") as fh:
        for i in range(n_tasks):
            text = f"task number {i}: repeat this sentence back"
            fh.write(json.dumps({"id": f"t{i}", "input": text, "expected": text}) + "\n")
    (root / "skills").mkdir()
    (root / "skills/echo.md").write_text("# Echo\n\nRepeat the user's message exactly.\n")
    config = {
        "models": {"target": {"provider": "openai-compatible", "model": "bench", "base_url": url + "/v1"}},
        "skills": [{"path": "skills/echo.md", "suite": "eval_suites/echo"}],
        "concurrency": concurrency,
        "pricing": {"bench": {"input": 0.0, "output": 0.0}},
    }
    (root / "skillopt.yml").write_text(yaml.safe_dump(config))


def run_eval(root: Path, out: str, *extra: str, preimport: bool = False) -> tuple[dict, float, int]:
    """Run the CLI in a child process; returns (summary, process wall seconds, peak RSS bytes).

    ``preimport`` imports the OpenAI SDK before the eval starts, as in a long-lived process that
    has already called a model (the trainer evaluating its second candidate)."""
    started = time.perf_counter()
    argv = ["eval", "echo", "--out", out, "--quiet", "--json", *extra]
    code = f"{'import openai; ' if preimport else ''}from skillopt_ci.cli import main; main({argv!r})"
    proc = subprocess.Popen([PY, "-c", code], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout_chunks = []
    stdout_chunks.append(proc.stdout.read())
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    err = proc.stderr.read()
    if proc.returncode != 0:
        raise SystemExit(f"eval failed ({proc.returncode}): {err}")
    return json.loads("".join(stdout_chunks)), wall, usage.ru_maxrss * 1024


def append_cost(sample: Path, n: int, rounds: int = 5) -> tuple[float, float]:
    """Seconds per result: one O_APPEND write per result (what the runner does) vs one write of
    all lines (what a batching log does). Best of ``rounds``; both include the JSON encoding."""
    from skillopt_ci.core.records import TaskResult
    from skillopt_ci.engine.rundir import ResultLog

    first = TaskResult.from_dict(json.loads(sample.read_text().splitlines()[0]))
    results = [first] * n
    per_line, batched = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(rounds):
            t = time.perf_counter()
            with ResultLog(Path(tmp) / f"a{k}.jsonl") as log:
                for r in results:
                    log.append(r)
            per_line.append((time.perf_counter() - t) / n)
            t = time.perf_counter()
            with ResultLog(Path(tmp) / f"b{k}.jsonl") as log:
                log.write("".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in results))
            batched.append((time.perf_counter() - t) / n)
    return min(per_line), min(batched)


def startup(cmd: list[str], runs: int = 9) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=500)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--big", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        server, url = start_server(args.latency)
        try:
            make_project(root / "p", url, args.tasks, args.concurrency)
            ideal = args.tasks * args.latency / args.concurrency
            print(f"eval {args.tasks} tasks, latency {args.latency}s, concurrency {args.concurrency}, ideal {ideal:.2f}s")
            walls = []
            for k in range(args.runs):
                warm, _, _ = run_eval(root / "p", str(root / f"warm{k}"), "--cache", "off", preimport=True)
                walls.append(warm["wall_time_s"])
            eff = ideal / min(walls)
            print(f"  SDK already imported: eval wall {min(walls):.2f}s  efficiency {eff:.2f} (target >= 0.9; "
                  f"best of {args.runs}: {', '.join(f'{ideal / w:.2f}' for w in walls)})")
            per_line, batched = append_cost(root / "warm0" / "results.jsonl", args.tasks)
            extra = max(per_line - batched, 0.0) * args.tasks
            print(f"  result log (incl. JSON encoding): {per_line * 1e6:.1f} us per result written as it finishes, "
                  f"{batched * 1e6:.1f} us batched; flushing each one adds {extra * 1000:.1f} ms for {args.tasks} "
                  f"results ({extra / ideal:.2%} of the ideal wall time)")
            summary, wall, _ = run_eval(root / "p", str(root / "run1"))
            eff = ideal / summary["wall_time_s"]
            print(f"  cold process: eval wall {summary['wall_time_s']:.2f}s  efficiency {eff:.2f} "
                  "(includes the one-time SDK import on the first cache miss)")
            print(f"  whole cold process incl. interpreter start: {wall:.2f}s (efficiency {ideal / wall:.2f})")
            print(f"  score {summary['mean']:.3f} (echo policy: 1.000 expected), errors {summary['n_errors']}")
            cached, cached_wall, _ = run_eval(root / "p", str(root / "run2"))
            calls = cached["n_results"] - cached["cache_hits"]
            print("re-run from cache")
            print(f"  model calls {calls} (target 0)  eval wall {cached['wall_time_s']:.2f}s  process {cached_wall:.2f}s")
        finally:
            server.terminate()
            server.wait()

        base = startup([PY, "-c", "pass"])
        helped = startup([*CLI, "--help"])
        print("start-up")
        print(f"  python -c pass {base * 1000:.0f} ms  skillopt-ci --help {helped * 1000:.0f} ms  "
              f"extra {(helped - base) * 1000:.0f} ms (target < 500 ms)")

        server, url = start_server(0.0)
        try:
            make_project(root / "big", url, args.big, args.concurrency)
            big, big_wall, rss = run_eval(root / "big", str(root / "run3"), "--cache", "off")
            print(f"memory: eval of {args.big} tasks")
            print(f"  peak RSS {rss / 2**20:.0f} MB (target < 300 MB)  wall {big_wall:.1f}s  "
                  f"results {big['n_results']} errors {big['n_errors']}")
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
