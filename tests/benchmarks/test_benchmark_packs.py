"""A benchmark is one folder (``skillopt_ci/benchmarks/packs/<name>/``) registered by one line:
every built-in pack's record names modules that exist, the scorer and environment registries
take its entries in, and nothing of a pack is imported until it is used."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

from helpers.paths import REPO
from skillopt_ci.benchmarks import BENCHMARKS, benchmark_pack
from skillopt_ci.benchmarks.pack import Pack
from skillopt_ci.envs.base import BaseEnvironment
from skillopt_ci.envs.registry import ENVIRONMENTS
from skillopt_ci.scorers import SCORERS
from skillopt_ci.scorers.base import Scorer

PACKS = REPO / "skillopt_ci" / "benchmarks" / "packs"


def loaded_after(code: str) -> list[str]:
    """The modules of skillopt_ci.benchmarks loaded after running ``code`` in a fresh interpreter."""
    probe = f"import sys\n{code}\nprint(sorted(m for m in sys.modules if m.startswith('skillopt_ci.benchmarks')))"
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)
    assert res.returncode == 0, res.stderr
    return ast.literal_eval(res.stdout.strip().splitlines()[-1])


def test_every_folder_is_a_registered_pack_and_its_names_resolve():
    folders = sorted(p.name for p in PACKS.iterdir() if (p / "__init__.py").exists())
    assert folders == sorted(BENCHMARKS)
    for name in BENCHMARKS:
        pack = benchmark_pack(name)
        assert isinstance(pack, Pack) and pack.name == name and pack.title and pack.data_help
        assert callable(pack.reader())
        fixture = pack.fixture_module()
        assert fixture is not None and callable(fixture.write_fixture) and callable(fixture.policy), name
        for scorer in pack.scorers:
            assert issubclass(SCORERS.load(scorer), Scorer) and SCORERS.load(scorer).name == scorer
        for env in pack.environments:
            assert issubclass(ENVIRONMENTS.load(env), BaseEnvironment)


def test_the_registries_hold_the_packs_entries_after_their_own():
    assert SCORERS.names()[-5:] == ["searchqa", "docvqa", "livemath", "spreadsheet", "officeqa"]
    assert SCORERS.load("officeqa").__module__ == "skillopt_ci.benchmarks.packs.officeqa.scorer"
    assert ENVIRONMENTS.names()[-1] == "codegen" and "codegen" in ENVIRONMENTS
    assert ENVIRONMENTS.load("codegen").__module__ == "skillopt_ci.benchmarks.packs.spreadsheetbench.codegen"


def test_a_core_scorer_or_environment_reads_no_pack():
    loaded = loaded_after("from skillopt_ci.scorers import build_scorer\nfrom skillopt_ci.envs.registry import"
                          " build_environment\nbuild_scorer('exact', '.'); build_environment('tools', '.')")
    assert loaded == []


def test_a_pack_scorer_imports_its_own_module_and_only_the_packs_records():
    loaded = loaded_after("from skillopt_ci.scorers import build_scorer\nbuild_scorer('officeqa', '.')")
    modules = {m.removeprefix("skillopt_ci.benchmarks.") for m in loaded}
    records = {"packs", *(f"packs.{name}" for name in BENCHMARKS)}
    assert modules - records == {"skillopt_ci.benchmarks", "pack", "packs.officeqa.scorer", "packs.officeqa.rules"}


@pytest.mark.parametrize("argv", [["--help"], ["bench", "--help"]])
def test_the_help_imports_no_pack(argv):
    code = f"from skillopt_ci.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass"
    assert [m for m in loaded_after(code) if ".packs" in m] == []
