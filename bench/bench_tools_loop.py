"""Per-step CPU overhead of the ``tools`` environment's loop.

Run: python bench/bench_tools_loop.py [--steps 200] [--rollouts 5] [--latency-ms 100]

A step is one model turn that calls ``read_file`` on a task file plus that tool call: the model
is a fake that answers instantly (a ``read_file`` call, then a final answer), so what is
measured is the loop itself — building messages, checking arguments against the schema,
reading the file through the workspace, recording steps — plus the workspace set-up and the
transcript, spread over the steps. CPU time (``time.process_time``) is printed next to a typical
model latency and their ratio. Target: under 5 ms CPU per step.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from skillopt_ci.core.messages import ToolCall
from skillopt_ci.core.skill import parse_skill
from skillopt_ci.core.task import Task
from skillopt_ci.envs.base import RolloutRequest
from skillopt_ci.envs.registry import build_environment
from skillopt_ci.models.base import Completion, Usage


class InstantModel:
    """Calls ``read_file`` ``steps`` times, then answers; no I/O, no waiting."""

    def __init__(self, steps: int):
        self.left = steps
        self.call = ToolCall("call_1", "read_file", '{"path": "data.csv"}')

    async def complete(self, role, messages, sample_index=0, *, tools=(), context=None) -> Completion:
        if self.left == 0:
            return Completion("done", Usage(10, 1), "stop")
        self.left -= 1
        return Completion("", Usage(10, 1), "tool_calls", tool_calls=(self.call,))


def one_rollout(env, request: RolloutRequest, steps: int) -> float:
    """CPU seconds of one rollout of ``steps`` tool-calling steps."""
    started = time.process_time()
    result = asyncio.run(env.run(request, InstantModel(steps)))
    result.close()
    spent = time.process_time() - started
    if not result.ok or sum(s.kind == "tool_result" for s in result.steps) != steps:
        sys.exit(f"the rollout did not run as planned: {result.error}")
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rollouts", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        suite = Path(tmp)
        (suite / "suite.yaml").write_text("name: bench\n")
        (suite / "data.csv").write_text("region,amount\n" + "".join(f"r{i},{i}\n" for i in range(200)))
        env = build_environment({"type": "tools", "tools": ["read_file", "submit_answer"],
                                 "max_turns": args.steps + 1}, suite)
        task = Task(id="t1", input="sum the amounts", fields={"id": "t1", "files": "data.csv"})
        request = RolloutRequest(skill=parse_skill("# Skill\nRead the file.\n"), task=task,
                                 prompt="Sum the amounts.", suite_dir=suite)
        one_rollout(env, request, 5)  # warm-up: imports, the schema validator
        per_step = [one_rollout(env, request, args.steps) / args.steps * 1000 for _ in range(args.rollouts)]
    ms = statistics.median(per_step)
    print(f"tools loop: {args.rollouts} rollouts x {args.steps} steps (fake model, read_file tool)")
    print(f"  CPU per step     {ms:8.3f} ms   (median; min {min(per_step):.3f}, max {max(per_step):.3f})")
    print(f"  model latency    {args.latency_ms:8.3f} ms   (a typical call)")
    print(f"  overhead ratio   {ms / args.latency_ms:8.4f}      (CPU per step / model latency)")
    print(f"  target < 5 ms    {'met' if ms < 5 else 'NOT met'}")


if __name__ == "__main__":
    main()
