"""Per-rollout overhead of the agent CLIs (``codex``, ``claude-code``): what a rollout costs
beyond the model's own time.

Run: python bench/bench_agent_clis.py [--rollouts 5] [--latency-ms 200] [--clis codex,claude-code]

Each rollout is the real CLI (found like the tests find it: ``$SKILLOPT_AGENT_CLIS`` first, then
``PATH``) running a 4-call script against the scripted model server in this process: read the
skill through its own tool, run a command, write a file, answer. The server holds every model
call for ``--latency-ms`` (a stand-in for a model's time), and notes when each request arrived.
Printed per CLI, as medians over the rollouts:

- start-up: from the environment's ``run`` (workspace, skill install, home, CLI start) to the
  first model request reaching the server;
- total: the rollout's wall time;
- overhead: total minus model time (the calls' time inside the server), also per model call;
- overhead share: overhead / total, the part of a rollout that is not the model.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import MappingProxyType

from skillopt_ci.core.skill import load_skill
from skillopt_ci.core.task import Task
from skillopt_ci.envs.base import RolloutRequest
from skillopt_ci.envs.registry import build_environment
from skillopt_ci.inputs.config import Config, ModelSpec
from skillopt_ci.models.cache import ResponseCache
from skillopt_ci.models.pool import ModelPool
from skillopt_ci.sim import ScriptedModelServer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the test-only worlds
from helpers.agents import AgentScript  # noqa: E402 (tests/helpers, on the path above)

BINARIES = {"codex": "codex", "claude-code": "claude"}
KEY = "sk-bench-not-a-real-key"
SKILL = "---\nname: greeter\ndescription: How to write greeting answers.\n---\nWrite the greeting the task asks for.\n"


class TimedScript:
    """The scripted agent, holding each call for ``latency`` seconds and noting when it arrived."""

    def __init__(self, latency: float):
        self.agent, self.latency = AgentScript(command="ls"), latency
        self.arrivals: list[float] = []
        self.busy = 0.0
        self.lock = threading.Lock()

    def __call__(self, request):
        started = time.monotonic()
        reply = self.agent(request)
        time.sleep(self.latency)
        with self.lock:
            self.arrivals.append(started)
            self.busy += time.monotonic() - started
        return reply


def find_binary(name: str) -> str | None:
    folder = os.environ.get("SKILLOPT_AGENT_CLIS")
    if folder and (Path(folder) / "node_modules/.bin" / name).exists():
        return str(Path(folder) / "node_modules/.bin" / name)
    return shutil.which(name)


def pool(root: Path, cli: str, server: ScriptedModelServer) -> ModelPool:
    if cli == "codex":
        spec = {"provider": "openai", "api": "responses", "model": "gpt-5.5", "base_url": server.openai_base_url}
        env = {"OPENAI_API_KEY": KEY}
    else:
        spec = {"provider": "anthropic", "model": "sim-claude", "base_url": server.anthropic_base_url}
        env = {"ANTHROPIC_API_KEY": KEY}
    model = ModelSpec.from_dict("target", {**spec, "max_retries": 0})
    config = Config(root=root, file="skillopt.yml", models=MappingProxyType({"target": model}),
                    pricing={"gpt-5.5": {"input": 1.0, "output": 2.0}})
    return ModelPool(config, ResponseCache(root / "cache.sqlite", "off"), env=env)


def one(cli: str, binary: str, latency: float, root: Path) -> dict[str, float]:
    suite, skill_dir = root / "suite", root / "skills/greeter"
    suite.mkdir(parents=True, exist_ok=True)
    skill_dir.mkdir(parents=True, exist_ok=True)
    (skill_dir / "SKILL.md").write_text(SKILL)
    script = TimedScript(latency)
    with ScriptedModelServer(script) as server:
        env = build_environment({"type": cli, "binary": binary, "time_limit_s": 120}, suite)
        request = RolloutRequest(skill=load_skill(skill_dir / "SKILL.md"), task=Task("t1", "answer: hello"),
                                 prompt="Write answer.txt. answer: hello", suite_dir=suite)
        started = time.monotonic()
        done = asyncio.run(env.run(request, pool(root, cli, server)))
        total = time.monotonic() - started
        done.close()
    if not done.ok or not script.arrivals:
        sys.exit(f"{cli}: the rollout failed: {done.error}")
    calls = len(script.arrivals)
    overhead = total - script.busy
    return {"startup": min(script.arrivals) - started, "total": total, "overhead": overhead,
            "per_call": overhead / calls, "calls": calls, "share": overhead / total}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--clis", default="codex,claude-code")
    args = parser.parse_args()
    latency = args.latency_ms / 1000
    print(f"{args.rollouts} rollouts per CLI, 4-call script, model latency {args.latency_ms:g} ms per call (medians)")
    print(f"{'cli':<12} {'start-up':>9} {'total':>8} {'overhead':>9} {'per call':>9} {'calls':>6} {'share':>6}")
    for cli in args.clis.split(","):
        binary = find_binary(BINARIES[cli])
        if binary is None:
            print(f"{cli:<12} not installed (skillopt-ci install-agents, or set SKILLOPT_AGENT_CLIS)")
            continue
        runs = []
        for _ in range(args.rollouts):
            with tempfile.TemporaryDirectory(prefix="skillopt-bench-") as root:
                runs.append(one(cli, binary, latency, Path(root)))
        m = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"{cli:<12} {m['startup']:>8.3f}s {m['total']:>7.3f}s {m['overhead']:>8.3f}s "
              f"{m['per_call']:>8.3f}s {m['calls']:>6.0f} {m['share']:>6.0%}")


if __name__ == "__main__":
    main()
