"""``skillopt-ci demo``: the whole eval path, offline, on a simulated model.

It starts the scripted model server on 127.0.0.1 with the simulated models (targets whose answers
follow only the rules the skill states, and an optimizer), points the real OpenAI SDK at it
through the ``openai-compatible`` provider, and evaluates and trains both bundled examples: the
ticket-triage chat suite and the sales-analysis tools suite (Python over a CSV in a workspace). Nothing leaves the
machine and no key is needed; every number printed is labelled as coming from a simulation.

``demo --benchmark NAME`` does the same for one of the method's benchmarks, with nothing specific
to it: the fixture module of the benchmark's pack (``skillopt_ci.benchmarks.packs.<name>.fixture``) writes a tiny
dataset in the upstream format (one record per id of the published manifest's first test ids),
the benchmark's importer turns it into a suite (the real import path), the module's ``policy`` plays the target on the scripted server, and ``bench run``
evaluates a skill on a few test tasks and prints the results table.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType, ModuleType

from skillopt_ci.benchmarks import benchmark_pack
from skillopt_ci.benchmarks.extras import require
from skillopt_ci.benchmarks.manifest import Manifest, load_manifest
from skillopt_ci.benchmarks.run import BenchRequest, run_bench
from skillopt_ci.benchmarks.writer import write_suite
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.records import EvalSummary
from skillopt_ci.engine.evaluation import EvalRequest, EvalSession, run_eval
from skillopt_ci.gate.report import terminal_table
from skillopt_ci.gate.run import run_compare
from skillopt_ci.inputs.config import CacheSettings, Config, ModelSpec, SkillEntry, TrainPolicy
from skillopt_ci.inputs.scaffold import example_path
from skillopt_ci.render.bench_table import bench_text, heading
from skillopt_ci.render.eval_report import score_table
from skillopt_ci.sim.server import ScriptedModelServer
from skillopt_ci.sim.sim_models import SIM_OPTIMIZER, SIM_TARGET, SimulatedModels
from skillopt_ci.train.entry import TrainRequest, run_training
from skillopt_ci.train.report import summary_table

SIM_MODEL = SIM_TARGET
EXAMPLES = ("ticket-triage", "sales-analysis", "release-notes")
DESCRIPTION_EXAMPLE = "release-notes"  # a trigger suite: its description is what training edits
BANNER = (
    "SIMULATION - no real model is called. A scripted server on 127.0.0.1 plays both models:\n"
    "- the target follows only the rules written in the skill, so the score shows which rules it has\n"
    "  (ticket-triage: one chat answer; sales-analysis: Python run over a CSV in a sandbox, via tool calls);\n"
    "- release-notes: the target sees only each skill's name and description and loads the one that matches\n"
    "  the request (the catalogue environment); a vague description is never loaded;\n"
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


def train_example(config: Config, runs: Path, name: str, echo: Callable[[str], None]) -> Path:
    echo(f"   {name}:")
    if name == "sales-analysis":  # every rollout runs code in a sandbox: a shorter schedule keeps the demo quick
        config = replace(config, train=replace(config.train, epochs=2, slow_update=False))
    target = "description" if name == DESCRIPTION_EXAMPLE else None
    outcome = run_training(config, TrainRequest(skill=name, out=runs / f"train-{name}", fresh=True, target=target),
                           log=lambda line: echo(f"   {line}"), session_options={"show_progress": False})
    echo("")
    echo(summary_table(outcome.summary))
    echo("")
    return outcome.run_dir / "best_skill.md"


def gate_vague_description(config: Config, trained: Path, runs: Path, echo: Callable[[str], None]) -> None:
    """``skillopt-ci compare``: a pull request that takes the trained description back to the
    vague one, judged on the trigger tasks; the gate fails it on recall."""
    entry = next(e for e in config.skills if e.name == DESCRIPTION_EXAMPLE)
    with EvalSession(config, show_progress=False) as session:
        report = run_compare(config, session, trained, entry.path, entry.suite, runs / "compare-release-notes",
                             fresh=True)
    echo(terminal_table(report))
    echo("")


def run_demo(out: Path | None, echo: Callable[[str], None] = print) -> None:
    echo(BANNER)
    echo("")
    with tempfile.TemporaryDirectory(prefix="skillopt-demo-") as tmp, _bundled_code_may_run_unisolated(echo):
        runs = out or Path(tmp)
        with ScriptedModelServer(SimulatedModels()) as server:
            config = demo_config(server.openai_base_url, runs)
            summaries = evaluate_examples(config, runs)
            echo("1. Evaluate the bundled skills (skillopt-ci eval):")
            echo("")
            echo(score_table(summaries))
            echo("")
            echo("2. Train them (skillopt-ci train): each step proposes edits; only those confirmed alone on")
            echo("   the training failures they were proposed for, and not worse on validation, are kept.")
            echo("   release-notes trains its description on the trigger tasks (train --target description).")
            echo("")
            trained = {name: train_example(config, runs, name, echo) for name in EXAMPLES}
            echo("3. Gate a pull request that makes the release-notes description vague again (skillopt-ci compare):")
            echo("   the trigger tasks are paired per request, and a significant drop in recall fails like a score drop.")
            echo("")
            gate_vague_description(config, trained[DESCRIPTION_EXAMPLE], runs, echo)
        echo(f"{server.call_count} calls to the simulated models, all through the real OpenAI SDK.")
        if out:
            echo(f"Run directories: {out}")
        echo("Against real providers: skillopt-ci init, export OPENAI_API_KEY=…, then skillopt-ci eval ticket-triage")
        echo("(and, with models.optimizer set in skillopt.yml, skillopt-ci train --skill ticket-triage).")


@contextlib.contextmanager
def _bundled_code_may_run_unisolated(echo: Callable[[str], None]) -> Iterator[None]:
    """The demo runs only its own bundled suites against its own simulated model: on a machine
    where commands cannot be isolated (no working bubblewrap) it opts in for itself, and says so,
    rather than refusing the sales-analysis example (a user's own suites still need the opt-in)."""
    from skillopt_ci.sandbox import isolation, policy

    if isolation() == "bwrap" or policy.opted_in():
        yield
        return
    echo("Note: commands cannot be isolated on this machine (no working bubblewrap); the demo runs its own")
    echo(f"bundled example without a sandbox. Your suites need bubblewrap, or {policy.OPT_IN}=1 (docs/sandbox.md).")
    echo("")
    saved = os.environ.get(policy.OPT_IN)
    os.environ[policy.OPT_IN] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(policy.OPT_IN, None)
        else:
            os.environ[policy.OPT_IN] = saved


BENCH_MODEL = "sim-benchmark-1"
BENCH_TASKS = 5
STARTER_SKILL = """---
name: {name}-starter
description: A starting skill for {title}; train it with skillopt-ci train.
---
# {title}

Read the task carefully and use only what it gives you. Think before you answer, then give the
final answer in exactly the form the task asks for.
"""


def fixture_module(name: str) -> ModuleType:
    """The benchmark's fixture module (``write_fixture`` and ``policy``); InputError when none."""
    fixture = benchmark_pack(name).fixture_module()  # an unknown name: InputError listing the six
    if fixture is None:
        raise InputError(f"no demo data for the {name} benchmark in this installation")
    return fixture


@contextlib.contextmanager
def variables(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for the demo and restore them afterwards."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def demo_manifest(name: str, tasks: int) -> Manifest:
    """The published manifest of ``name`` cut to ``tasks`` test ids spread evenly over the test
    split (a benchmark's ids are often grouped by task type) and the first two of each other
    split: the fixture then holds one record per id, and the import needs no other."""
    manifest = load_manifest(name)
    test = manifest.splits["test"]
    spread = test[:: max(1, len(test) // tasks)][:tasks]
    keep = {split: spread if split == "test" else items[:2] for split, items in manifest.splits.items()}
    return replace(manifest, splits=MappingProxyType(keep))


def import_fixture(name: str, root: Path, tasks: int = BENCH_TASKS) -> tuple[Path, dict[str, str]]:
    """Write the fixture under ``root`` and import it with the benchmark's own importer into
    ``root/eval_suites/<name>``. Asset roots the suite names by a variable (``${ALFWORLD_DATA}``)
    are pointed at the fixture: the variables to set are returned with the suites folder."""
    pack, fixture = benchmark_pack(name), fixture_module(name)
    for extra in pack.extras:
        require(extra, name)
    manifest = demo_manifest(name, tasks)
    data = fixture.write_fixture(root / "data", manifest)
    draft = pack.reader()(data, manifest)
    found = (re.match(r"\$\{(\w+)\}", folder) for folder in draft.asset_roots.values())
    names = {m.group(1): str(data) for m in found if m}
    suites = root / "eval_suites"
    write_suite(draft, suites / name, benchmark=name, manifest=manifest, source=str(data), force=True)
    return suites, names


def bench_demo_config(base_url: str, runs_dir: Path) -> Config:
    target = ModelSpec.from_dict("target", {"provider": "openai-compatible", "model": BENCH_MODEL,
                                            "base_url": base_url, "params": {"temperature": 0}})
    return Config(root=runs_dir, file="(demo)", models=MappingProxyType({"target": target}), skills=(),
                  concurrency=4, cache=CacheSettings(mode="off", path=runs_dir / "cache.sqlite"), runs_dir=runs_dir,
                  pricing=MappingProxyType({BENCH_MODEL: MappingProxyType({"input": 0.0, "output": 0.0})}))


def run_benchmark_demo(name: str, out: Path | None, skill: Path | None = None,
                       echo: Callable[[str], None] = print, tasks: int = BENCH_TASKS) -> int:
    """``demo --benchmark NAME``: the table of a skill on ``tasks`` test tasks of the benchmark's
    fixture (spread over the published test split), on a simulated target. Returns the bench run's exit code."""
    from skillopt_ci.benchmarks.run import exit_code

    pack, fixture = benchmark_pack(name), fixture_module(name)
    with tempfile.TemporaryDirectory(prefix=f"skillopt-demo-{name}-") as tmp:
        root = out or Path(tmp)
        suites, names = import_fixture(name, root, tasks)
        if skill is None:
            skill = root / "skills" / f"{name}-starter" / "SKILL.md"
            skill.parent.mkdir(parents=True, exist_ok=True)
            text = getattr(fixture, "SKILL", None) or STARTER_SKILL.format(name=name, title=pack.title)
            skill.write_text(text, encoding="utf-8")
        echo(f"SIMULATION - no real model is called. {pack.title}: a tiny dataset in the upstream format,")
        echo(f"imported with skillopt-ci bench import {name}; a scripted server on 127.0.0.1 plays the target,")
        echo("right on some tasks and wrong on others, through the real OpenAI SDK. The numbers say nothing")
        echo("about any real model.")
        echo("")
        with variables(names), ScriptedModelServer(fixture.policy) as server:
            request = BenchRequest(skill=skill, benchmarks=(name,), split="test", suites_dir=suites,
                                   out=root / "bench", fresh=True)
            outcome = run_bench(bench_demo_config(server.openai_base_url, root), request, show_progress=False)
        published = len(load_manifest(name).splits["test"])
        echo(heading(outcome.table) + f" · {tasks} of the {published} test tasks, spread over the split")
        echo("")
        echo(bench_text(outcome.table))
        echo("")
        echo(f"{server.call_count} calls to the simulated target.")
        if out:
            echo(f"Suite, runs and table: {out}")
        echo(f"With the real data: skillopt-ci bench import {name} --from PATH, then")
        echo(f"skillopt-ci bench run --skill SKILL.md --benchmarks {name}  ({pack.data_help})")
        return exit_code(outcome.table)
