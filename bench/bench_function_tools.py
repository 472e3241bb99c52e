"""What a suite function tool costs per call now that it runs in the sandbox.

Run: python bench/bench_function_tools.py [--n 30]

Prints the median wall time (and this process's CPU time) of N calls of a small suite function:
- called directly in this process (what the in-process design cost: nothing measurable);
- through ``FunctionTool.call``: a fresh ``python -I -B -m skillopt_ci.envs.function_runner`` in
  the workspace under the sandbox limits (isolation as ``isolation()`` finds it), the file's
  source executed, the function called, its JSON result read back;
- a bare ``python -I -B -c pass`` through the same sandbox, to show how much of it is the
  interpreter's own start-up.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from bench_sandbox import measure  # the sandbox bench's timing loop (this folder is on sys.path)

from skillopt_ci.core.task import Task
from skillopt_ci.envs.functions import load_function_tool
from skillopt_ci.sandbox import SandboxLimits, Workspace, isolation

TOOL = '''
def population(city: str) -> int:
    """Look up a city."""
    return {"paris": 2_100_000}.get(city, 0)
'''


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=30)
    n = parser.parse_args().n
    with tempfile.TemporaryDirectory() as folder:
        suite = Path(folder)
        (suite / "cities.py").write_text(TOOL)
        tool = load_function_tool(suite, "cities:population", str(suite / "suite.yaml"))
        namespace: dict = {}
        exec(compile(TOOL, "cities.py", "exec"), namespace)  # noqa: S102 - the bench's own code
        direct = namespace["population"]
        limits = SandboxLimits(wall_s=30)
        task = Task(id="t1", input="")
        with Workspace.create() as ws:
            loop = asyncio.new_event_loop()
            rows = [
                ("in process", measure(lambda: direct(city="paris"), n)),
                ("FunctionTool.call (sandboxed child)", measure(lambda: loop.run_until_complete(
                    tool.call({"city": "paris"}, limits=limits, workspace=ws.path, task=task)), n)),
                ("bare python -I -B -c pass (sandboxed)", measure(lambda: loop.run_until_complete(
                    ws.run([sys.executable, "-I", "-B", "-c", "pass"], limits=limits)), n)),
            ]
            loop.close()
    print(f"isolation: {isolation()}; {n} calls each; median wall ms / this process's CPU ms")
    for name, (wall, cpu) in rows:
        print(f"  {name:40s} {wall * 1000:8.2f} ms   {cpu * 1000:6.2f} ms CPU")


if __name__ == "__main__":
    main()
