"""``skillopt-ci demo``: the whole eval path, offline, on a simulated model.

It starts the scripted model server on 127.0.0.1 with the simulated ticket-triage model (whose
answers follow only the rules the skill states), points the real OpenAI SDK at it through the
``openai-compatible`` provider, and evaluates the bundled example skill. Nothing leaves the
machine and no key is needed; every number printed is labelled as coming from a simulation.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType

from skillopt_ci.config import CacheSettings, Config, ModelSpec
from skillopt_ci.evaluation import EvalRequest, run_eval
from skillopt_ci.report import score_table
from skillopt_ci.scaffold import example_path
from skillopt_ci.testing.server import ScriptedModelServer
from skillopt_ci.testing.triage import TriagePolicy

SIM_MODEL = "sim-triage-1"
BANNER = (
    "SIMULATION - no real model is called. A scripted server on 127.0.0.1 plays the target model:\n"
    "it follows only the rules written in the skill, so the score shows which rules the skill has."
)


def demo_config(base_url: str, runs_dir: Path) -> Config:
    target = ModelSpec.from_dict(
        "target",
        {"provider": "openai-compatible", "model": SIM_MODEL, "base_url": base_url, "params": {"temperature": 0}},
    )
    return Config(
        root=runs_dir,
        file="(demo)",
        models=MappingProxyType({"target": target}),
        concurrency=8,
        cache=CacheSettings(mode="off", path=runs_dir / "cache.sqlite"),
        runs_dir=runs_dir,
        pricing=MappingProxyType({SIM_MODEL: MappingProxyType({"input": 0.0, "output": 0.0})}),
    )


def run_demo(out: Path | None, echo: Callable[[str], None] = print) -> None:
    echo(BANNER)
    echo("")
    with tempfile.TemporaryDirectory(prefix="skillopt-demo-") as tmp:
        runs = out or Path(tmp)
        with ScriptedModelServer(TriagePolicy()) as server:
            config = demo_config(server.openai_base_url, runs)
            summaries = []
            for split in ("val", "test"):
                request = EvalRequest(
                    skill=example_path("skills/ticket-triage/SKILL.md"),
                    suite=example_path("eval_suites/ticket-triage"),
                    split=split,
                    out=runs / f"eval-ticket-triage-{split}",
                    fresh=True,
                )
                summaries.append(run_eval(config, request, show_progress=False).summary)
        echo(score_table(summaries))
        echo("")
        echo(f"{server.call_count} calls to the simulated model through the real OpenAI SDK.")
        if out:
            echo(f"Run directories: {out}")
        echo("Against a real provider: skillopt-ci init && OPENAI_API_KEY=… skillopt-ci eval ticket-triage")
