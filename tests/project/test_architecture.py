"""The architecture holds: the wheel ships the package data but no test double. The import
contract is checked in tests/project/test_import_contract.py.

See docs/architecture.md for the layers and the rules.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers.paths import REPO

SIM_SHIPPED = sorted([
    "__init__.py", "analyst.py", "constrained.py", "optimizer_sim.py", "protocols.py", "ratelimit.py",
    "reflection_prompt.py", "server.py", "sim_models.py", "skill_view.py", "triage.py", "trigger_sim.py", "wire_anthropic.py",
    "wire_batch.py", "wire_common.py", "wire_openai.py", "wire_stream.py",
])
# One folder per benchmark; its demo fixture ships in it (the demo needs it).
PACKS_SHIPPED = sorted([
    "__init__.py",
    *(f"{name}/{module}.py" for name in ("alfworld", "docvqa", "livemathematicianbench", "officeqa", "searchqa",
                                         "spreadsheetbench") for module in ("__init__", "importer", "fixture")),
    *(f"{name}/scorer.py" for name in ("docvqa", "livemathematicianbench", "officeqa", "searchqa", "spreadsheetbench")),
    "officeqa/rules.py", "spreadsheetbench/compare.py", "spreadsheetbench/codegen.py",
])


def copy_source(dest: Path) -> Path:
    """The package and the top-level files that configure it, copied to ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO / "skillopt_ci", dest / "skillopt_ci",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
    for item in REPO.iterdir():
        if item.is_file():
            shutil.copy2(item, dest / item.name)
    return dest


@pytest.mark.slow
def test_the_wheel_ships_package_data_and_no_fake_github(tmp_path):
    # Built from a copy: setuptools writes build/ and *.egg-info next to the sources.
    src = copy_source(tmp_path / "src")
    out = tmp_path / "wheel"
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation",
                          "--no-index", "-q", "-w", str(out)], cwd=src, capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stdout + res.stderr
    (wheel,) = out.glob("skillopt_ci-*.whl")
    names = zipfile.ZipFile(wheel).namelist()

    assert not [n for n in names if "fakes/" in n or "github_state" in n or n.startswith("tests/")], names
    # What the demo runs on ships (the scripted server, the simulated models; the benchmark
    # fixtures in their packs), listed in full; the test-only agents and worlds (tests/helpers) do not.
    assert "skillopt_ci/demo.py" in names and not [n for n in names if n.startswith("skillopt_ci/testing/")]
    sim = sorted(n.removeprefix("skillopt_ci/sim/") for n in names if n.startswith("skillopt_ci/sim/"))
    assert sim == SIM_SHIPPED, sim
    packs = sorted(n.removeprefix("skillopt_ci/benchmarks/packs/") for n in names
                   if n.startswith("skillopt_ci/benchmarks/packs/"))
    assert packs == PACKS_SHIPPED, packs
    schemas = {Path(n).name for n in names if n.startswith("skillopt_ci/inputs/schemas/") and n.endswith(".json")}
    assert {"config.schema.json", "suite.schema.json", "result.schema.json", "summary.schema.json",
            "gate.schema.json", "train_summary.schema.json", "proposal.schema.json"} <= schemas
    prompts = {Path(n).name for n in names if n.startswith("skillopt_ci/prompts/") and n.endswith(".md")}
    assert {"judge.md", "reflect_failures.md", "reflect_triggers.md", "slow_update.md"} <= prompts
    for data in ("skillopt_ci/inputs/example/skillopt.yml", "skillopt_ci/inputs/example/workflow.yml",
                 "skillopt_ci/inputs/example/skills/ticket-triage/SKILL.md",
                 "skillopt_ci/inputs/example/eval_suites/ticket-triage/suite.yaml",
                 "skillopt_ci/inputs/example/eval_suites/ticket-triage/val.jsonl",
                 "skillopt_ci/inputs/example/eval_suites/sales-analysis/data/rates.csv",
                 "skillopt_ci/inputs/example/eval_suites/release-notes/siblings/readme-writer/SKILL.md",
                 "skillopt_ci/viewer/static/app.js", "skillopt_ci/viewer/static/app.css"):
        assert data in names, data
