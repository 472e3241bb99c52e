"""The tests mirror the package: every test module sits in ``tests/<package>/`` named after a
package of ``skillopt_ci`` (or ``tests/project/`` for checks of the whole checkout), its file name
is unique (pytest imports test modules by their base name), and no module under ``tests/``
imports a test module or ``conftest``: shared code lives in ``tests/helpers/`` and
``tests/fakes/``, shared fixtures in ``conftest.py``."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers.paths import REPO, TESTS

SUPPORT = {"helpers", "fakes"}  # packages of shared code, holding no test module
IGNORED = {"data", "golden"}  # fixtures and golden files, read by the tests, never imported


def packages(package_root: Path) -> set[str]:
    """The folders of ``package_root`` that are packages, and ``project``."""
    return {p.parent.name for p in package_root.glob("*/__init__.py")} | {"project"}


def python_files(tests: Path) -> list[Path]:
    return sorted(p for p in tests.rglob("*.py") if p.relative_to(tests).parts[0] not in IGNORED)


def placement_problems(tests: Path, allowed: set[str]) -> list[str]:
    """Each test module outside ``tests/<allowed>/``, each module of another kind outside the
    shared packages, and each test file name used twice."""
    problems, seen = [], {}
    for path in python_files(tests):
        rel = path.relative_to(tests)
        if path.name.startswith("test_"):
            if len(rel.parts) != 2 or rel.parts[0] not in allowed:
                problems.append(f"{rel}: a test module belongs in tests/<package>/ (one of {sorted(allowed)})")
            if path.name in seen:
                problems.append(f"{rel}: the same file name as {seen[path.name]}")
            seen.setdefault(path.name, rel)
        elif path.name != "conftest.py" and rel.parts[0] not in SUPPORT:
            problems.append(f"{rel}: shared code belongs in tests/helpers/ or tests/fakes/")
    return problems


def imported_modules(path: Path) -> set[str]:
    """The top-level names of every module ``path`` imports, at any depth of its code."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def import_problems(tests: Path) -> list[str]:
    """Each import of a test module or of ``conftest`` by a module under ``tests``."""
    files = python_files(tests)
    test_modules = {p.stem for p in files if p.name.startswith("test_")} | {"conftest"}
    return [f"{path.relative_to(tests)} imports {name}" for path in files
            for name in sorted(imported_modules(path) & test_modules)]


def test_every_test_module_sits_in_a_folder_named_after_a_package():
    allowed = packages(REPO / "skillopt_ci")
    assert {"core", "engine", "github", "sim"} <= allowed
    assert placement_problems(TESTS, allowed) == []
    assert {p.parent.name for p in TESTS.glob("*/test_*.py")} <= allowed


def test_no_module_under_tests_imports_a_test_module():
    assert import_problems(TESTS) == []


def test_the_checks_name_a_misplaced_module_a_twice_used_name_and_an_import_of_a_test_module(tmp_path):
    files = {
        "core/test_a.py": "from test_b import helper\n",
        "engine/test_b.py": "def helper():\n    from conftest import run_cli\n",
        "test_flat.py": "",
        "widgets/test_c.py": "",
        "sim/test_a.py": "import helpers.cli\n",
        "loose_helpers.py": "",
        "helpers/cli.py": "",
        "data/suite/test_scorer.py": "import test_a\n",
        "conftest.py": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    allowed = {"core", "engine", "sim", "project"}
    assert placement_problems(tmp_path, allowed) == [
        "loose_helpers.py: shared code belongs in tests/helpers/ or tests/fakes/",
        "sim/test_a.py: the same file name as core/test_a.py",
        f"test_flat.py: a test module belongs in tests/<package>/ (one of {sorted(allowed)})",
        f"widgets/test_c.py: a test module belongs in tests/<package>/ (one of {sorted(allowed)})",
    ]
    assert import_problems(tmp_path) == ["core/test_a.py imports test_b", "engine/test_b.py imports conftest"]
