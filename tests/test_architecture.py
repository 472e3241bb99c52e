"""The architecture holds: the import contract (``[tool.importlinter]`` in pyproject.toml) passes,
it fails when a forbidden import is added, and the wheel ships the package data but no test double.

See docs/architecture.md for the layers and the rules.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

CONTRACTS = (
    "Layers: imports point down only",
    "Core and pure renderers: no SDK, network, database, subprocess or engine",
    "Only the demo imports skillopt_ci.sim",
    "The CLI reaches skillopt_ci.sim only through the demo",
    "Shared leaves outside the layers import nothing above the core",
)


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the package under ``root``, with that copy first on the path (not the
    installed one), and no cache written into ``root``."""
    script = Path(sys.executable).parent / "lint-imports"
    command = [str(script)] if script.exists() else [sys.executable, "-c",
                                                     "import sys; from importlinter.cli import lint_imports_command;"
                                                     " sys.exit(lint_imports_command())"]
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([*command, "--no-cache"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=120)


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
def test_the_import_contract_is_kept():
    res = lint_imports(REPO)
    assert res.returncode == 0, res.stdout + res.stderr
    for name in CONTRACTS:
        assert re.search(rf"^{re.escape(name)} KEPT", res.stdout, re.MULTILINE), (name, res.stdout)
    assert re.search(rf"Contracts: {len(CONTRACTS)} kept, 0 broken", res.stdout), res.stdout


@pytest.mark.slow
@pytest.mark.parametrize(("module", "line", "contract", "chain"), [
    ("core/task.py", "import sqlite3", CONTRACTS[1], "skillopt_ci.core.task -> sqlite3"),
    ("core/stats.py", "from skillopt_ci.engine import runner", CONTRACTS[0],
     "skillopt_ci.core.stats -> skillopt_ci.engine"),
    ("train/report.py", "import subprocess", CONTRACTS[1], "skillopt_ci.train.report -> subprocess"),
    ("engine/runner.py", "from skillopt_ci.sim import server", CONTRACTS[2],
     "skillopt_ci.engine.runner -> skillopt_ci.sim"),
    ("cli/__init__.py", "from skillopt_ci.sim import server", CONTRACTS[3],
     "skillopt_ci.cli -> skillopt_ci.sim"),
], ids=["sqlite-in-core", "engine-in-core", "subprocess-in-renderer", "testing-in-engine", "testing-in-cli"])
def test_a_forbidden_import_breaks_the_contract(tmp_path, module, line, contract, chain):
    root = copy_source(tmp_path / "src")
    target = root / "skillopt_ci" / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n{line}  # noqa\n", encoding="utf-8")
    res = lint_imports(root)
    assert res.returncode != 0, res.stdout
    assert re.search(rf"^{re.escape(contract)} BROKEN", res.stdout, re.MULTILINE), res.stdout
    assert chain in res.stdout, res.stdout


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
    # What the demo needs of the test servers ships; nothing else of tests/ does.
    assert "skillopt_ci/sim/server.py" in names and "skillopt_ci/demo.py" in names
    schemas = {Path(n).name for n in names if n.startswith("skillopt_ci/inputs/schemas/") and n.endswith(".json")}
    assert {"config.schema.json", "suite.schema.json", "result.schema.json", "summary.schema.json",
            "gate.schema.json", "train_summary.schema.json", "proposal.schema.json"} <= schemas
    prompts = {Path(n).name for n in names if n.startswith("skillopt_ci/prompts/") and n.endswith(".md")}
    assert {"judge.md", "reflect_failures.md", "slow_update.md"} <= prompts
    for data in ("skillopt_ci/inputs/example/skillopt.yml", "skillopt_ci/inputs/example/workflow.yml",
                 "skillopt_ci/inputs/example/skills/ticket-triage/SKILL.md",
                 "skillopt_ci/inputs/example/eval_suites/ticket-triage/suite.yaml",
                 "skillopt_ci/inputs/example/eval_suites/ticket-triage/val.jsonl",
                 "skillopt_ci/inputs/example/eval_suites/sales-analysis/data/rates.csv",
                 "skillopt_ci/viewer/static/app.js", "skillopt_ci/viewer/static/app.css"):
        assert data in names, data
