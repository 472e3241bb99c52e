"""What the workspace sandbox costs per command and per file tool call.

Run: python bench/bench_sandbox.py [--n 50]

Prints the median wall time (and this process's CPU time) of N calls of:
- a bare `true` through `subprocess.run`, and through `asyncio.create_subprocess_exec`;
- `Workspace.run(["true"])` with the network cut (through bwrap/unshare when `isolation()` says
  one works) and with the network allowed (no wrapper: rlimits, new session, clean environment,
  concurrent capture, process-group kill);
- `Workspace.read_text` and `Workspace.grep` on a small file against a bare `open().read()`,
  and `Workspace.write_text` against a bare `open().write()`;
with each sandboxed figure's ratio to its bare counterpart measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median

from skillopt_ci.sandbox import SandboxLimits, Workspace, isolation


def measure(call: Callable[[], object], n: int) -> tuple[float, float]:
    """Median wall and median CPU seconds of ``n`` calls (after one warm-up call)."""
    call()
    walls, cpus = [], []
    for _ in range(n):
        wall, cpu = time.perf_counter(), time.process_time()
        call()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return median(walls), median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50)
    n = parser.parse_args().n
    loop = asyncio.new_event_loop()
    text = "".join(f"line {i} of the document, some words\n" for i in range(200))
    with Workspace.create() as ws:
        ws.write_text("doc.txt", text)
        bare_file = ws.path / "doc.txt"

        async def bare_async() -> None:
            proc = await asyncio.create_subprocess_exec(
                "true", stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            await proc.communicate()

        rows = [
            ("bare subprocess.run(true)", measure(lambda: subprocess.run(["true"], check=True), n), None),
            ("bare asyncio exec(true)", measure(lambda: loop.run_until_complete(bare_async()), n), None),
            (f"Workspace.run(true), network cut ({isolation()})",
             measure(lambda: loop.run_until_complete(ws.run(["true"])), n), "bare asyncio exec(true)"),
            ("Workspace.run(true), network allowed",
             measure(lambda: loop.run_until_complete(ws.run(["true"], limits=SandboxLimits(network=True))), n),
             "bare asyncio exec(true)"),
            ("bare open().read()", measure(lambda: Path(bare_file).read_text(), n * 20), None),
            ("Workspace.read_text", measure(lambda: ws.read_text("doc.txt"), n * 20), "bare open().read()"),
            ("Workspace.grep (1 file, 200 lines)", measure(lambda: ws.grep("line 1"), n * 20), "bare open().read()"),
            ("bare open().write()", measure(lambda: Path(ws.path / "bare.txt").write_text(text), n * 20), None),
            ("Workspace.write_text", measure(lambda: ws.write_text("out.txt", text), n * 20), "bare open().write()"),
        ]
    loop.close()
    base = {name: figures for name, figures, _ in rows}
    print(f"{'call':<52} {'wall ms':>9} {'cpu ms':>8} {'x bare (wall)':>14}")
    for name, (wall, cpu), against in rows:
        ratio = f"{wall / base[against][0]:.2f}" if against else ""
        print(f"{name:<52} {wall * 1000:>9.3f} {cpu * 1000:>8.3f} {ratio:>14}")


if __name__ == "__main__":
    main()
