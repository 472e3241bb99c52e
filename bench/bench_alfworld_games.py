"""Real ALFWorld games, one child process each: what a game costs and how games run side by side.

Run: python bench/bench_alfworld_games.py [--games 8] [--concurrency 4]

Needs the ``alfworld`` package. Plays the two hand-written PDDL games of
``tests/benchmarks/test_bench_alfworld_real.py`` (copies of them, under a temporary ALFWORLD_DATA) by their
walkthroughs through :class:`~skillopt_ci.envs.alfworld.AlfworldWorld`, without a model.
Printed:

- start-up: from ``reset`` being called to the first observation (the child process starting,
  importing the engine, loading the game), median over the sequential games;
- a step: median over every step of the sequential games;
- the wall time of all games one after the other, then with ``--concurrency`` at once (each
  world on a thread of its own, as the ``interactive`` environment runs it), and how many games
  were won and how many errored in each.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from skillopt_ci.envs.alfworld import AlfworldWorld  # noqa: E402


def play(root: Path, gamefile: str, walkthrough: list[str]) -> tuple[bool, float, list[float], str]:
    """(won, start-up seconds, step seconds, error) of one game played by its walkthrough."""
    world = AlfworldWorld(str(root))
    started = time.perf_counter()
    try:
        world.reset({"id": gamefile, "gamefile": gamefile})
        startup = time.perf_counter() - started
        steps, done = [], False
        for action in walkthrough:
            begun = time.perf_counter()
            _, _, done = world.step(action)
            steps.append(time.perf_counter() - begun)
        return done, startup, steps, ""
    except Exception as exc:  # counted and shown, the bench goes on
        return False, 0.0, [], f"{type(exc).__name__}: {exc}"
    finally:
        world.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    try:
        import test_bench_alfworld_real as real
    except Exception as exc:  # pytest.skip raised at import: the package is missing
        raise SystemExit(f"this bench needs the alfworld package: {exc}") from None
    root = Path(tempfile.mkdtemp(prefix="alfworld-bench-"))
    games: list[tuple[str, list[str]]] = []
    for trial in range((args.games + 1) // 2):
        for task_type, rel in real.write_games(root, f"T{trial}").items():
            games.append((rel, list(real.GAMES[task_type][2])))
    games = games[:args.games]

    began = time.perf_counter()
    sequential = [play(root, g, w) for g, w in games]
    sequential_wall = time.perf_counter() - began
    began = time.perf_counter()
    with ThreadPoolExecutor(args.concurrency) as pool:
        concurrent = list(pool.map(lambda game: play(root, *game), games))
    concurrent_wall = time.perf_counter() - began

    startups = [s for won, s, _, error in sequential if not error]
    steps = [t for *_, times, error in sequential if not error for t in times]
    print(f"games: {len(games)} (two hand-written PDDL games, {sum(len(w) for _, w in games)} steps in all)")
    print(f"start-up (process, engine import, game load): median {statistics.median(startups):.2f} s")
    print(f"a step: median {statistics.median(steps) * 1000:.0f} ms")
    for name, results, wall in (("one after the other", sequential, sequential_wall),
                                (f"concurrency {args.concurrency}", concurrent, concurrent_wall)):
        won = sum(1 for r in results if r[0])
        errors = [r[3] for r in results if r[3]]
        print(f"{name}: {wall:.1f} s wall, {won} won, {len(errors)} errored"
              + (f" (first: {errors[0][:100]})" if errors else ""))


if __name__ == "__main__":
    main()
