"""Extension through entry points, one registry for every kind (``skillopt_ci.core.registry``): a
tiny installed distribution (a ``.dist-info`` with ``entry_points.txt`` on ``sys.path``) adds a
scorer and a benchmark, which the real CLI then uses by name like a built-in. The environment
plug-in is shown in ``tests/envs/test_envs.py`` (``two-pass``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from helpers import bench_toy
from helpers.cli import run_cli
from helpers.project import write_project
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.registry import Registry, subclass_of
from skillopt_ci.scorers import SCORERS
from skillopt_ci.scorers.base import Scorer

SHOUTING = '''
from dataclasses import dataclass

from skillopt_ci.scorers.base import Score, Scorer


@dataclass(frozen=True)
class ShoutOptions:
    weight: float = 1.0


class ShoutScorer(Scorer):
    """Right when the output, upper-cased, equals the expected answer upper-cased."""

    name = "shout"
    Options = ShoutOptions

    def score(self, output, task):
        right = output.strip().upper() == str(task.expected).strip().upper()
        return Score(self.options.weight if right else 0.0, right, "loud and clear" if right else "say it again")
'''


def install(site: Path, monkeypatch, module: str, source: str | None, group: str, line: str) -> None:
    """A distribution named after ``module`` whose ``entry_points.txt`` declares ``line`` in ``group``."""
    info = site / f"{module}-0.1.dist-info"
    info.mkdir(parents=True)
    if source is not None:
        (site / f"{module}.py").write_text(source)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{line}\n")
    monkeypatch.syspath_prepend(str(site))


def test_a_plugin_scorer_is_used_by_name_in_a_suite(tmp_path, monkeypatch, server):
    install(tmp_path / "site", monkeypatch, "shout_plugin", SHOUTING, "skillopt_ci.scorers", "shout = shout_plugin:ShoutScorer")
    assert SCORERS.names()[-1] == "shout" and "shout" in SCORERS
    project = write_project(tmp_path / "p", server.openai_base_url)
    suite = project / "eval_suites/ticket-triage/suite.yaml"
    data = yaml.safe_load(suite.read_text())
    data["scorer"] = {"type": "shout", "weight": 0.5}
    suite.write_text(yaml.safe_dump(data, sort_keys=False))
    assert run_cli("validate", cwd=project).code == 0
    out = tmp_path / "run"
    res = run_cli("eval", "ticket-triage", "--out", str(out), "--quiet", cwd=project)
    assert res.code == 0, res.err
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {r["score"] for r in results} <= {0.0, 0.5} and any(r["score"] == 0.5 for r in results)
    assert {r["feedback"] for r in results} <= {"loud and clear", "say it again"}
    # Its options are checked like a built-in's.
    data["scorer"] = {"type": "shout", "volume": 11}
    suite.write_text(yaml.safe_dump(data, sort_keys=False))
    bad = run_cli("validate", cwd=project)
    assert bad.code == 2 and "volume" in bad.err and "weight" in bad.err


def test_a_plugin_benchmark_imports_like_a_built_in(tmp_path, monkeypatch):
    install(tmp_path / "site", monkeypatch, "toy_bench_dist", None, "skillopt_ci.benchmarks", "toy = helpers.bench_toy")
    manifest = bench_toy.write_manifest(tmp_path / "manifest", {"train": ["t1"], "val": ["v1"], "test": ["e1"]})
    data = bench_toy.write_data(tmp_path / "data", ["t1", "v1", "e1"])
    res = run_cli("bench", "import", "toy", "--from", str(data), "--manifest", str(manifest),
                  "--out", str(tmp_path / "suite"))
    assert res.code == 0, res.err
    assert "imported Toy into" in res.out and "1 train / 1 val / 1 test" in res.out
    unknown = run_cli("bench", "import", "nosuch", "--from", str(data))
    assert unknown.code == 2 and "known: searchqa, docvqa" in unknown.err and unknown.err.rstrip().endswith(
        "officeqa, toy (install the package that provides it (entry-point group skillopt_ci.benchmarks))")


def test_a_plugin_that_fails_to_import_names_itself(tmp_path, monkeypatch):
    install(tmp_path / "site", monkeypatch, "broken_plugin", "raise RuntimeError('half-installed')\n",
            "skillopt_ci.scorers", "broken = broken_plugin:Broken")
    with pytest.raises(InputError, match=r"scorer 'broken' \(broken_plugin:Broken\) failed to load: "
                                         r"RuntimeError: half-installed"):
        SCORERS.load("broken")


def test_a_plugin_of_the_wrong_kind_is_refused(tmp_path, monkeypatch):
    install(tmp_path / "site", monkeypatch, "wrong_plugin", "class NotAScorer:\n    pass\n",
            "skillopt_ci.scorers", "wrong = wrong_plugin:NotAScorer")
    with pytest.raises(InputError, match="scorer 'wrong' is not a skillopt_ci.scorers.base.Scorer subclass"):
        SCORERS.load("wrong")


def test_a_built_in_wins_over_a_plugin_of_the_same_name(tmp_path, monkeypatch):
    install(tmp_path / "site", monkeypatch, "impostor", SHOUTING, "skillopt_ci.scorers", "exact = impostor:ShoutScorer")
    assert SCORERS.names().count("exact") == 1
    assert SCORERS.load("exact").__module__ == "skillopt_ci.scorers.text"


def test_every_registry_reads_the_same():
    registry = Registry("widget", "skillopt_ci.widgets", {"a": "skillopt_ci.scorers.text:Exact"}, subclass_of(Scorer))
    assert registry.names() == ["a"] and list(registry) == ["a"]
    with pytest.raises(InputError) as info:
        registry.load("b", where="x.yaml")
    assert info.value.message == "unknown widget 'b'; known: a" and info.value.where == "x.yaml"
