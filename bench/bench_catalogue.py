"""What a trigger task costs through the ``catalogue`` environment: calls, tokens, our CPU.

Run: python bench/bench_catalogue.py [--rounds 20] [--latency-ms 100]

The suite is the bundled ``release-notes`` trigger suite (12 validation requests, half of them
for the skill, next to two near-miss skills). Two descriptions are measured: the vague one it
ships with (the skill is never loaded, so a request is one model call) and one that names its
requests (a request the skill is for is a second call, after ``Skill`` returns the body; so is a
near-miss that loads a sibling).

The model is a fake that picks a skill instantly, with the simulated target's rule
(:func:`skillopt_ci.sim.trigger_sim.chosen_skill`), so what is measured is the environment
itself: the listing, the tool schema, the ``Skill`` call, the consult record, the workspace.
Tokens are those the request would carry (``estimate_tokens`` of every message sent). CPU time
(``time.process_time``) per model call is printed next to a typical model latency. Target: under
2 ms of our own CPU per call, as in ``chat``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

from skillopt_ci.core.description import with_description
from skillopt_ci.core.messages import ToolCall
from skillopt_ci.core.skill import estimate_tokens, parse_skill
from skillopt_ci.envs.base import RolloutRequest
from skillopt_ci.envs.registry import build_environment
from skillopt_ci.inputs.scaffold import example_path
from skillopt_ci.inputs.suite import load_suite
from skillopt_ci.models.base import Completion, Usage
from skillopt_ci.sim.trigger_sim import _LINE, chosen_skill

NAMED = ("Write the release notes or the changelog of a version. Use when the request is about release notes, "
         "a changelog, a version's changes or upgrade steps. Not for commit messages or a README.")


class InstantPicker:
    """Loads the skill the simulated target would pick, then answers; counts calls and tokens."""

    def __init__(self) -> None:
        self.calls = 0
        self.tokens = 0

    async def complete(self, role, messages, sample_index=0, *, tools=(), context=None) -> Completion:
        self.calls += 1
        self.tokens += sum(estimate_tokens(m.content if isinstance(m.content, str) else "") for m in messages)
        if any(m.role == "tool" for m in messages):
            return Completion("Done, following the skill.", Usage(10, 5), "stop")
        system = next(m.content for m in messages if m.role == "system")
        asked = next(m.content for m in messages if m.role == "user")
        name = chosen_skill(str(asked), dict(_LINE.findall(str(system))))
        if name is None:
            return Completion("Done, without any skill.", Usage(10, 5), "stop")
        call = ToolCall("call_1", "Skill", json.dumps({"skill": name}))
        return Completion("", Usage(10, 5), "tool_calls", tool_calls=(call,))


def measure(text: str, rounds: int) -> dict[str, float]:
    suite_dir = example_path("eval_suites/release-notes")
    suite = load_suite(suite_dir)
    env = build_environment(dict(suite.environment), suite_dir)
    skill = parse_skill(text, path="skills/release-notes/SKILL.md")
    tasks = suite.tasks("val")
    model = InstantPicker()
    consulted = 0
    cpu = 0.0
    unloaded: list[int] = []  # calls of each rollout that loaded no skill at all
    for n in range(rounds + 1):  # the first round warms up (imports, schema validators)
        before_calls, before_tokens = model.calls, model.tokens
        started = time.process_time()
        for task in tasks:
            calls_before = model.calls
            request = RolloutRequest(skill=skill, task=task, prompt=task.input, suite_dir=suite_dir)
            result = asyncio.run(env.run(request, model))
            result.close()
            if not result.ok:
                sys.exit(f"the rollout did not run as planned: {result.error}")
            consulted += bool(n and result.consult and result.consult.consulted)
            if n and not any(s.kind == "tool_result" for s in result.steps):
                unloaded.append(model.calls - calls_before)
        if n == 0:
            model.calls, model.tokens = before_calls, before_tokens
        else:
            cpu += time.process_time() - started
    per_task = rounds * len(tasks)
    return {"tasks": len(tasks), "calls": model.calls / per_task, "tokens": model.tokens / per_task,
            "tokens_per_call": model.tokens / model.calls, "consulted": consulted / per_task,
            "cpu_ms_per_call": cpu / model.calls * 1000,
            "unloaded": statistics.mean(unloaded) if unloaded else float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    args = parser.parse_args()
    shipped = Path(example_path("skills/release-notes/SKILL.md")).read_text(encoding="utf-8")
    rows = [("vague (as shipped)", measure(shipped, args.rounds)),
            ("naming its requests", measure(with_description(shipped, NAMED), args.rounds))]
    print(f"catalogue: the release-notes trigger suite, {rows[0][1]['tasks']:.0f} val requests x {args.rounds} rounds "
          "(instant fake model with the simulated target's rule)")
    print(f"  {'description':<22}{'used':>7}{'calls/task':>12}{'no load':>9}{'tokens/task':>13}{'tokens/call':>13}"
          f"{'CPU/call':>11}{'ratio':>8}")
    for label, r in rows:
        print(f"  {label:<22}{r['consulted']:>7.0%}{r['calls']:>12.2f}{r['unloaded']:>9.2f}{r['tokens']:>13.0f}"
              f"{r['tokens_per_call']:>13.0f}{r['cpu_ms_per_call']:>8.3f} ms{r['cpu_ms_per_call'] / args.latency_ms:>8.4f}")
    print("  used: share of requests that loaded the skill under test; no load: calls of a request that loaded no")
    print("  skill (a loaded sibling costs a second call too)")
    worst = max(r["cpu_ms_per_call"] for _, r in rows)
    print(f"  ratio: our CPU per call / a {args.latency_ms:.0f} ms model call; target < 2 ms per call: "
          f"{'met' if worst < 2 else 'NOT met'} (worst {worst:.3f} ms)")


if __name__ == "__main__":
    main()
