"""The import contract (``[tool.importlinter]`` in pyproject.toml) sees every package of
skillopt_ci, the unmodified tree keeps it, and an upward (or otherwise forbidden) import planted
in a module of each package breaks it, naming the import. No module imports itself through
others (no import circle). The environments' plug-in API (``skillopt_ci.envs``) loads its names on
first use.

See docs/architecture.md for the layers and the rules.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from helpers.paths import REPO

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: import-linter's own dependency reads TOML
    import tomli as tomllib

PACKAGE = REPO / "skillopt_ci"
CONFIG = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]

LAYERS = "Layers: imports point down only"
PURE = "Core and pure renderers: no SDK, network, database, subprocess or engine"
SDKS = "SDKs only in their adapters"
TESTING = "Only the demo imports skillopt_ci.sim"
CLI_TESTING = "The CLI reaches skillopt_ci.sim only through the demo"
LEAVES = "Shared leaves outside the layers import nothing above the core"
DOUBLES = "The test doubles import no front door and no orchestration"
PACKS = "A benchmark pack imports nothing that runs it"
PACK_SCORERS = "A pack's scorers import no environment"
CONTRACTS = (LAYERS, PURE, SDKS, TESTING, CLI_TESTING, LEAVES, DOUBLES, PACKS, PACK_SCORERS)

# What sits outside the layers, on purpose (docs/architecture.md, "Outside the layers").
OUTSIDE_LAYERS = {"prompts", "httpserve", "demo", "sim", "__main__"}
# Folders of package data that hold Python files which are not modules of the package (the
# example project's suite tools, copied out by `skillopt-ci init`).
DATA_FOLDERS = (PACKAGE / "inputs" / "example",)


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the package under ``root``, with that copy first on the path (not the
    installed one), and no cache written into ``root``."""
    script = Path(sys.executable).parent / "lint-imports"
    command = [str(script)] if script.exists() else [
        sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command;"
        " sys.exit(lint_imports_command())"]
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([*command, "--no-cache"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A copy of the package and of pyproject.toml (the same contract), for planting imports in."""
    root = tmp_path_factory.mktemp("contract")
    shutil.copytree(PACKAGE, root / "skillopt_ci", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy2(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


@contextmanager
def planted(root: Path, module: str, line: str) -> Iterator[None]:
    """``line`` appended to ``module`` (a path under skillopt_ci/) for the duration, then undone."""
    target = root / "skillopt_ci" / module
    original = target.read_text(encoding="utf-8")
    target.write_text(f"{original}\n{line}  # noqa\n", encoding="utf-8")
    try:
        yield
    finally:
        target.write_text(original, encoding="utf-8")


def layer_names() -> set[str]:
    """The top-level names of skillopt_ci that the layers contract lists. A name in parentheses
    is optional to import-linter (it may be missing), so it does not count as covered."""
    (layers,) = (c for c in CONFIG["contracts"] if c["id"] == "layers")
    names = set()
    for layer in layers["layers"]:
        for member in layer.split("|"):
            member = member.strip()
            if not member.startswith("("):
                names.add(member.removeprefix("skillopt_ci."))
    return names


def test_every_package_is_a_package_and_has_a_place_in_the_contract():
    """A folder of modules without ``__init__.py`` is invisible to import-linter (the contract
    passed whatever it imported); a top-level package in no layer is under no layer rule."""
    folders = {path.parent for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts}
    missing = sorted(str(folder.relative_to(REPO)) for folder in folders
                     if not (folder / "__init__.py").exists()
                     and not any(folder.is_relative_to(data) for data in DATA_FOLDERS))
    assert missing == [], f"folders of modules with no __init__.py: {missing}"
    top = {path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    top |= {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").exists()}
    assert sorted(top - layer_names() - OUTSIDE_LAYERS) == []
    assert layer_names() <= top, "the layers name a package that does not exist"


@pytest.mark.slow
def test_the_unmodified_tree_keeps_every_contract(tree):
    res = lint_imports(tree)
    assert res.returncode == 0, res.stdout + res.stderr
    for name in CONTRACTS:
        assert re.search(rf"^{re.escape(name)} KEPT", res.stdout, re.MULTILINE), (name, res.stdout)
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in res.stdout, res.stdout
    assert len(CONFIG["contracts"]) == len(CONTRACTS)


# One planted import per package (and per module outside the layers): upward where the package
# has a layer above it, otherwise the import its contract forbids.
PLANTS = {
    "cli": ("cli/__init__.py", "from skillopt_ci.sim import server", CLI_TESTING,
            "skillopt_ci.cli -> skillopt_ci.sim"),
    "github": ("github/settings.py", "import skillopt_ci.cli", LAYERS,
               "skillopt_ci.github.settings -> skillopt_ci.cli"),
    "viewer": ("viewer/report.py", "import skillopt_ci.github.sticky", LAYERS,
               "skillopt_ci.viewer.report -> skillopt_ci.github.sticky"),
    "gate": ("gate/run.py", "import skillopt_ci.viewer.bundle", LAYERS,
             "skillopt_ci.gate.run -> skillopt_ci.viewer.bundle"),
    "train": ("train/entry.py", "import skillopt_ci.github.trend", LAYERS,
              "skillopt_ci.train.entry -> skillopt_ci.github.trend"),
    "benchmarks": ("benchmarks/run.py", "import skillopt_ci.gate.run", LAYERS,
                   "skillopt_ci.benchmarks.run -> skillopt_ci.gate.run"),
    "engine": ("engine/runner.py", "import skillopt_ci.train.entry", LAYERS,
               "skillopt_ci.engine.runner -> skillopt_ci.train.entry"),
    "envs": ("envs/chat.py", "import skillopt_ci.github.action", LAYERS,
             "skillopt_ci.envs.chat -> skillopt_ci.github.action"),
    "scorers": ("scorers/match.py", "import skillopt_ci.engine.runner", LAYERS,
                "skillopt_ci.scorers.match -> skillopt_ci.engine.runner"),
    "models": ("models/pool.py", "import skillopt_ci.envs.chat", LAYERS,
               "skillopt_ci.models.pool -> skillopt_ci.envs.chat"),
    "render": ("render/markdown.py", "import skillopt_ci.scorers.match", LAYERS,
               "skillopt_ci.render.markdown -> skillopt_ci.scorers.match"),
    "sandbox": ("sandbox/workspace.py", "import skillopt_ci.envs.base", LAYERS,
                "skillopt_ci.sandbox.workspace -> skillopt_ci.envs.base"),
    "inputs": ("inputs/config.py", "import skillopt_ci.models.pool", LAYERS,
               "skillopt_ci.inputs.config -> skillopt_ci.models.pool"),
    "core": ("core/stats.py", "import skillopt_ci.inputs.config", LAYERS,
             "skillopt_ci.core.stats -> skillopt_ci.inputs.config"),
    "prompts": ("prompts/render.py", "import skillopt_ci.train.entry", LEAVES,
                "skillopt_ci.prompts.render -> skillopt_ci.train.entry"),
    "httpserve": ("httpserve.py", "import skillopt_ci.viewer.server", LEAVES,
                  "skillopt_ci.httpserve -> skillopt_ci.viewer.server"),
    "sim": ("sim/server.py", "import skillopt_ci.engine.runner", DOUBLES,
                "skillopt_ci.sim.server -> skillopt_ci.engine.runner"),
    "demo": ("demo.py", "import openai", SDKS, "skillopt_ci.demo -> openai"),
    "__main__": ("__main__.py", "import skillopt_ci.sim.server", CLI_TESTING,
                 "skillopt_ci.__main__ -> skillopt_ci.sim.server"),
}

# Forbidden imports that are not upward: an SDK, a database or a subprocess where it may not be.
FORBIDDEN = {
    "engine-in-core": ("core/stats.py", "from skillopt_ci.engine import runner", LAYERS,
                       "skillopt_ci.core.stats -> skillopt_ci.engine"),
    "sqlite-in-core": ("core/task.py", "import sqlite3", PURE, "skillopt_ci.core.task -> sqlite3"),
    "subprocess-in-renderer": ("train/report.py", "import subprocess", PURE,
                               "skillopt_ci.train.report -> subprocess"),
    "subprocess-in-steps-text": ("envs/steps_text.py", "import subprocess", PURE,
                                 "skillopt_ci.envs.steps_text -> subprocess"),
    "socket-in-sandbox-records": ("sandbox/result.py", "import socket", PURE,
                                  "skillopt_ci.sandbox.result -> socket"),
    "openai-in-envs": ("envs/tools.py", "import openai", SDKS, "skillopt_ci.envs.tools -> openai"),
    "pygithub-in-engine": ("engine/runner.py", "from github import Github", SDKS,
                           "skillopt_ci.engine.runner -> github"),
    "sim-in-engine": ("engine/runner.py", "from skillopt_ci.sim import server", TESTING,
                          "skillopt_ci.engine.runner -> skillopt_ci.sim"),
    "sim-in-sandbox": ("sandbox/process.py", "import skillopt_ci.sim.server", TESTING,
                           "skillopt_ci.sandbox.process -> skillopt_ci.sim.server"),
    "sibling-envs-to-scorers": ("envs/tools.py", "import skillopt_ci.scorers.match", LAYERS,
                                "skillopt_ci.envs.tools -> skillopt_ci.scorers.match"),
    # A benchmark pack sits in the benchmarks layer but may reach nothing that runs it.
    "engine-in-pack-scorer": ("benchmarks/packs/officeqa/scorer.py", "import skillopt_ci.engine.runner", PACKS,
                              "skillopt_ci.benchmarks.packs.officeqa.scorer -> skillopt_ci.engine.runner"),
    "bench-run-in-pack-importer": ("benchmarks/packs/searchqa/importer.py", "import skillopt_ci.benchmarks.run",
                                   PACKS, "skillopt_ci.benchmarks.packs.searchqa.importer -> skillopt_ci.benchmarks.run"),
    "env-in-pack-scorer": ("benchmarks/packs/docvqa/scorer.py", "import skillopt_ci.envs.chat", PACK_SCORERS,
                           "skillopt_ci.benchmarks.packs.docvqa.scorer -> skillopt_ci.envs.chat"),
    "trainer-in-pack-fixture": ("benchmarks/packs/searchqa/fixture.py", "import skillopt_ci.train.entry", DOUBLES,
                                "skillopt_ci.benchmarks.packs.searchqa.fixture -> skillopt_ci.train.entry"),
    # Only a pack's fixture may speak the scripted server's records.
    "sim-in-pack-importer": ("benchmarks/packs/searchqa/importer.py", "import skillopt_ci.sim.server", TESTING,
                             "skillopt_ci.benchmarks.packs.searchqa.importer -> skillopt_ci.sim.server"),
}


def test_every_package_has_a_planted_import():
    top = {path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    top |= {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").exists()}
    assert sorted(top - set(PLANTS)) == []


@pytest.mark.slow
@pytest.mark.parametrize(("module", "line", "contract", "chain"),
                         [*PLANTS.values(), *FORBIDDEN.values()], ids=[*PLANTS, *FORBIDDEN])
def test_a_planted_import_breaks_the_contract(tree, module, line, contract, chain):
    with planted(tree, module, line):
        res = lint_imports(tree)
    assert res.returncode == 1, res.stdout + res.stderr
    assert re.search(rf"^{re.escape(contract)} BROKEN", res.stdout, re.MULTILINE), res.stdout
    assert chain in res.stdout, res.stdout


def run_python(code: str) -> str:
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_the_plugin_api_loads_its_names_on_first_use():
    """Importing the package (or one small environment module) loads neither the sandbox nor the
    model interface; asking for a name loads its module, and the name is the defining object."""
    loaded = run_python("import sys, skillopt_ci.envs, skillopt_ci.envs.agent_clis;"
                        " print(sorted(m for m in sys.modules if m.startswith(('skillopt_ci.sandbox',"
                        " 'skillopt_ci.models', 'skillopt_ci.envs.base'))))")
    assert loaded == "[]"
    import skillopt_ci.envs as envs
    from skillopt_ci.core.trajectory import Rollout
    from skillopt_ci.envs.base import BaseEnvironment

    assert envs.BaseEnvironment is BaseEnvironment and envs.Rollout is Rollout
    assert set(envs.__all__) == set(envs._HOMES)
    for name in envs.__all__:
        assert getattr(envs, name) is getattr(sys.modules[envs._HOMES[name]], name), name
    with pytest.raises(AttributeError, match="no attribute 'Environmnet'"):
        _ = envs.Environmnet


def package_modules(root: Path) -> dict[str, Path]:
    """Every module of the package under ``root`` by dotted name (a package by its ``__init__``);
    files in folders without ``__init__.py`` (package data) are not modules."""
    modules = {}
    for path in sorted((root / "skillopt_ci").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if "__pycache__" in parts or not all((root.joinpath(*parts[:i]) / "__init__.py").exists()
                                             for i in range(1, len(parts))):
            continue
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def import_graph(root: Path) -> dict[str, set[str]]:
    """module → the modules of the package it imports. Every import statement counts, wherever it
    is: at module level, inside a function, or under ``if TYPE_CHECKING``. ``from a import b``
    points at the module ``a.b`` when there is one, else at ``a``; ``import a.b.c`` at ``a.b.c``
    (the parent packages it also runs are not counted as edges)."""
    modules = package_modules(root)

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                edges |= {known(alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                    base = f"{anchor}.{base}" if base else anchor
                edges |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else known(base)
                          for alias in node.names}
        graph[name] = {edge for edge in edges if edge and edge != name}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_no_module_imports_itself_through_others():
    graph = import_graph(REPO)
    assert len(graph) > 200 and "skillopt_ci.envs.chat" in graph  # the whole package, envs included
    assert import_circles(graph) == []


@pytest.mark.parametrize(("module", "line", "circle"), [
    ("models/endpoint.py", "import skillopt_ci.models.registry",
     ["skillopt_ci.models.endpoint", "skillopt_ci.models.registry"]),
    ("github/context.py", "def _planted(): from skillopt_ci.github.action import run_action",
     ["skillopt_ci.github.action", "skillopt_ci.github.context"]),
    ("models/batch_protocol.py", "def _planted(): from . import batch",
     ["skillopt_ci.models.batch", "skillopt_ci.models.batch_protocol"]),
], ids=["module-level", "function-level", "relative"])
def test_a_planted_circle_is_found(tree, module, line, circle):
    with planted(tree, module, line):
        found = import_circles(import_graph(tree))
    assert len(found) == 1 and set(circle) <= set(found[0]), found  # the planted edge closes one circle
