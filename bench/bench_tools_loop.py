"""Per-step CPU overhead of the ``tools`` environment's loop.

Run: python bench/bench_tools_loop.py [--steps 200] [--rollouts 5] [--latency-ms 100]

A step is one model turn that calls ``read_file`` on a task file plus that tool call: the model
is a fake that answers instantly (a ``read_file`` call, then a final answer), so what is
measured is the loop itself — building messages, checking arguments against the schema,
reading the file through the workspace, recording steps — plus the workspace set-up and the
transcript, spread over the steps. CPU time (``time.process_time``) is printed next to a typical
model latency and their ratio. Target: under 5 ms CPU per step.

The second figure is the same loop through the real model pool and OpenAI SDK against the
scripted server in its own process (so its CPU is not counted): what a step costs this process
in practice, HTTP and JSON included, with the cache off.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
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


def read_file_policy(request):
    """The scripted server's side: ``read_file`` until SDK_STEPS results came back, then answer."""
    from skillopt_ci.sim.protocols import ScriptedReply, ScriptedToolCall

    if len(request.tool_results) < int(os.environ.get("SDK_STEPS", "20")) and \
            sum(m["role"] == "tool" for m in request.messages) < int(os.environ.get("SDK_STEPS", "20")):
        return ScriptedReply("", tool_calls=(ScriptedToolCall("read_file", {"path": "data.csv"}),))
    return ScriptedReply("done")


def through_the_sdk(env, request: RolloutRequest, suite: Path, steps: int, rollouts: int) -> list[float]:
    """CPU ms per step of rollouts through ModelPool + the OpenAI SDK against a server process."""
    from skillopt_ci.inputs.config import load_config
    from skillopt_ci.models.cache import ResponseCache
    from skillopt_ci.models.pool import ModelPool

    server = subprocess.Popen([sys.executable, "-m", "skillopt_ci.sim.server", "--policy",
                               "bench_tools_loop:read_file_policy"], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "SDK_STEPS": str(steps),
                                   "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])})
    try:
        url = server.stdout.readline().split()[1]
        (suite / "SKILL.md").write_text("# Skill\nRead the file.\n")
        (suite / "skillopt.yml").write_text(
            "version: 1\nmodels:\n  target: {provider: openai-compatible, model: bench, base_url: "
            f"'{url}/v1'}}\nskills: [{{path: SKILL.md, suite: .}}]\ncache: {{mode: 'off'}}\n")
        config = load_config(suite / "skillopt.yml")

        async def measure() -> list[float]:
            pool = ModelPool(config, ResponseCache(suite / "cache.sqlite", "off"))
            spent = []
            for i in range(rollouts + 1):  # the first warms up the client
                started = time.process_time()
                result = await env.run(request, pool)
                result.close()
                if not result.ok:
                    sys.exit(f"the rollout did not run as planned: {result.error}")
                if i:
                    spent.append((time.process_time() - started) / steps * 1000)
            await pool.aclose()
            return spent

        return asyncio.run(measure())
    finally:
        server.terminate()
        server.wait()


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
        sdk = through_the_sdk(env, request, suite, 20, args.rollouts)
    ms = statistics.median(per_step)
    print(f"tools loop: {args.rollouts} rollouts x {args.steps} steps (fake model, read_file tool)")
    print(f"  CPU per step     {ms:8.3f} ms   (median; min {min(per_step):.3f}, max {max(per_step):.3f})")
    print(f"  model latency    {args.latency_ms:8.3f} ms   (a typical call)")
    print(f"  overhead ratio   {ms / args.latency_ms:8.4f}      (CPU per step / model latency)")
    print(f"  target < 5 ms    {'met' if ms < 5 else 'NOT met'}")
    sdk_ms = statistics.median(sdk)
    print(f"through ModelPool + OpenAI SDK + HTTP: {args.rollouts} rollouts x 20 steps (server in its own process)")
    print(f"  CPU per step     {sdk_ms:8.3f} ms   (median; min {min(sdk):.3f}, max {max(sdk):.3f})")
    print(f"  overhead ratio   {sdk_ms / args.latency_ms:8.4f}      (CPU per step / model latency)")
    print(f"  target < 5 ms    {'met' if sdk_ms < 5 else 'NOT met'}")


if __name__ == "__main__":
    main()
