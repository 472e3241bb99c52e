"""Records to JSON and back: the codec (pydantic over the dataclasses) against the hand-written
``to_dict``/``from_dict`` methods it replaced.

Run: python bench/bench_records.py [--old 5211de7] [--steps 200] [--results 4000] [--rounds 5]

Builds a big ``state.json`` (the committed ``tests/data/state_v1.json`` with its history repeated
to ``--steps`` steps) and ``--results`` result lines (``tests/data/results-before-environments.jsonl``
repeated), then times, in this tree and in the tree of ``--old`` (extracted with ``git archive``
into a temporary folder, the last revision with the hand-written methods by default), loading and
writing back each: ``TrainState.from_dict``/``to_dict`` and ``TaskResult.from_dict``/``to_dict``.
Both trees run in their own process; the first call (which builds the codec's adapters and
imports pydantic) is timed apart. Prints milliseconds per state file and microseconds per result
line, the new/old ratio, and whether both trees wrote the same bytes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
OLD = "5211de7"  # the last revision whose records had hand-written to_dict/from_dict


def big_state(steps: int) -> dict:
    state = json.loads((DATA / "state_v1.json").read_text())
    history = state["history"]
    state["history"] = [{**history[i % len(history)], "step": f"e{i // 100}-s{i % 100:02d}"} for i in range(steps)]
    return state


def result_lines(n: int) -> list[dict]:
    lines = [json.loads(x) for x in (DATA / "results-before-environments.jsonl").read_text().splitlines() if x]
    return [{**lines[i % len(lines)], "repeat": i} for i in range(n)]


def measure(state: dict, results: list[dict], rounds: int) -> dict:
    """Run inside one tree (``skillopt_ci`` importable from it): the timings and the bytes written."""
    from skillopt_ci.core.records import TaskResult
    from skillopt_ci.train.state import TrainState

    t0 = time.perf_counter()
    TrainState.from_dict(state).to_dict()
    TaskResult.from_dict(results[0]).to_dict()
    first = time.perf_counter() - t0
    out: dict = {"first_s": first}
    for name, load, items in (("state", TrainState.from_dict, [state]), ("result", TaskResult.from_dict, results)):
        best_load = best_dump = float("inf")
        for _ in range(rounds):
            t = time.perf_counter()
            records = [load(x) for x in items]
            best_load = min(best_load, time.perf_counter() - t)
            t = time.perf_counter()
            dumped = [r.to_dict() for r in records]
            best_dump = min(best_dump, time.perf_counter() - t)
        out[name] = {"load": best_load / len(items), "dump": best_dump / len(items),
                     "bytes": "".join(json.dumps(d, ensure_ascii=False) for d in dumped)}
    return out


def run_in(tree: Path, args: argparse.Namespace) -> dict:
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2]);"
            "import bench_records as b; a = json.loads(sys.argv[3]);"
            "print(json.dumps(b.measure(b.big_state(a['steps']), b.result_lines(a['results']), a['rounds'])))")
    params = json.dumps({"steps": args.steps, "results": args.results, "rounds": args.rounds})
    done = subprocess.run([sys.executable, "-c", code, str(tree), str(ROOT / "bench"), params],
                          capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
    return json.loads(done.stdout)


def old_tree(rev: str, into: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "skillopt_ci"], capture_output=True, check=True)
    tar = into / "old.tar"
    tar.write_bytes(archive.stdout)
    with tarfile.open(tar) as t:
        t.extractall(into, filter="data")
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default=OLD)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--results", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = run_in(old_tree(args.old, Path(tmp)), args)
    new = run_in(ROOT, args)
    print(f"first call (adapters built, pydantic imported): new {new['first_s'] * 1e3:.0f} ms, "
          f"old {old['first_s'] * 1e3:.0f} ms")
    for name, unit, scale in (("state", "ms per state.json", 1e3), ("result", "µs per result line", 1e6)):
        for op in ("load", "dump"):
            n, o = new[name][op] * scale, old[name][op] * scale
            print(f"{name:6} {op}: new {n:9.2f}  old {o:9.2f}  {unit}  (new/old {n / o:.2f}×)")
        print(f"{name:6} same bytes written by both: {'yes' if new[name]['bytes'] == old[name]['bytes'] else 'NO'}")
    print(f"({args.steps} history steps in the state; {args.results} result lines; best of {args.rounds})")


if __name__ == "__main__":
    main()
