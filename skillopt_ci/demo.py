"""``skillopt-ci demo``: the whole eval path, offline, on a simulated model.

It starts the scripted model server on 127.0.0.1 with the simulated models (targets whose answers
follow only the rules the skill states, and an optimizer), points the real OpenAI SDK at it
through the ``openai-compatible`` provider, and evaluates and trains both bundled examples: the
ticket-triage chat suite and the sales-analysis tools suite (Python over a CSV in a workspace). Nothing leaves the
machine and no key is needed; every number printed is labelled as coming from a simulation.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

from skillopt_ci.core.records import EvalSummary
from skillopt_ci.engine.evaluation import EvalRequest, run_eval
from skillopt_ci.inputs.config import CacheSettings, Config, ModelSpec, SkillEntry, TrainPolicy
from skillopt_ci.inputs.scaffold import example_path
from skillopt_ci.render.eval_report import score_table
from skillopt_ci.testing.server import ScriptedModelServer
from skillopt_ci.testing.sim_models import SIM_OPTIMIZER, SIM_TARGET, SimulatedModels
from skillopt_ci.train.entry import TrainRequest, run_training
from skillopt_ci.train.report import summary_table

SIM_MODEL = SIM_TARGET
EXAMPLES = ("ticket-triage", "sales-analysis")
BANNER = (
    "SIMULATION - no real model is called. A scripted server on 127.0.0.1 plays both models:\n"
    "- the target follows only the rules written in the skill, so the score shows which rules it has\n"
    "  (ticket-triage: one chat answer; sales-analysis: Python run over a CSV in a sandbox, via tool calls);\n"
    "- the optimizer proposes rules from the scorer's feedback, and sometimes a bad one for the gate to catch."
)


def demo_config(base_url: str, runs_dir: Path) -> Config:
    def model(role: str, name: str) -> ModelSpec:
        return ModelSpec.from_dict(
            role, {"provider": "openai-compatible", "model": name, "base_url": base_url, "params": {"temperature": 0}}
        )

    free = MappingProxyType({"input": 0.0, "output": 0.0})
    return Config(
        root=runs_dir,
        file="(demo)",
        models=MappingProxyType({"target": model("target", SIM_TARGET), "optimizer": model("optimizer", SIM_OPTIMIZER)}),
        skills=tuple(SkillEntry(name, example_path(f"skills/{name}/SKILL.md"), example_path(f"eval_suites/{name}"))
                     for name in EXAMPLES),
        concurrency=8,
        cache=CacheSettings(mode="off", path=runs_dir / "cache.sqlite"),
        runs_dir=runs_dir,
        pricing=MappingProxyType({SIM_TARGET: free, SIM_OPTIMIZER: free}),
        train=TrainPolicy(epochs=3, batch_size=6),
    )


def evaluate_examples(config: Config, runs: Path) -> list[EvalSummary]:
    """Each bundled example's val and test scores (``skillopt-ci eval``)."""
    summaries = []
    for entry in config.skills:
        for split in ("val", "test"):
            request = EvalRequest(skill=entry.path, suite=entry.suite, split=split,
                                  out=runs / f"eval-{entry.name}-{split}", fresh=True)
            summaries.append(run_eval(config, request, show_progress=False).summary)
    return summaries


def train_example(config: Config, runs: Path, name: str, echo: Callable[[str], None]) -> None:
    echo(f"   {name}:")
    if name == "sales-analysis":  # every rollout runs code in a sandbox: a shorter schedule keeps the demo quick
        config = replace(config, train=replace(config.train, epochs=2, slow_update=False))
    outcome = run_training(config, TrainRequest(skill=name, out=runs / f"train-{name}", fresh=True),
                           log=lambda line: echo(f"   {line}"), session_options={"show_progress": False})
    echo("")
    echo(summary_table(outcome.summary))
    echo("")


def run_demo(out: Path | None, echo: Callable[[str], None] = print) -> None:
    echo(BANNER)
    echo("")
    with tempfile.TemporaryDirectory(prefix="skillopt-demo-") as tmp:
        runs = out or Path(tmp)
        with ScriptedModelServer(SimulatedModels()) as server:
            config = demo_config(server.openai_base_url, runs)
            summaries = evaluate_examples(config, runs)
            echo("1. Evaluate the bundled skills (skillopt-ci eval):")
            echo("")
            echo(score_table(summaries))
            echo("")
            echo("2. Train them (skillopt-ci train): each step proposes edits; only those that beat the")
            echo("   current skill on validation are kept.")
            echo("")
            for name in EXAMPLES:
                train_example(config, runs, name, echo)
        echo(f"{server.call_count} calls to the simulated models, all through the real OpenAI SDK.")
        if out:
            echo(f"Run directories: {out}")
        echo("Against real providers: skillopt-ci init, export OPENAI_API_KEY=…, then skillopt-ci eval ticket-triage")
        echo("(and, with models.optimizer set in skillopt.yml, skillopt-ci train --skill ticket-triage).")
