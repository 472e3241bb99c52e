"""``skillopt-ci demo --benchmark NAME``: the benchmark's fixture written in its upstream format,
imported with its importer, a few test tasks run on the scripted target, the table printed and
labelled as a simulation. Nothing in it is specific to one benchmark (a fake one here)."""

from __future__ import annotations

import json

import pytest

from helpers import bench_fake
from helpers.cli import run_cli


@pytest.fixture
def fake(tmp_path, monkeypatch):
    published = tmp_path / "published"
    bench_fake.register(monkeypatch, published)
    bench_fake.write_manifest(published, "fakeqa", {"train": ["t1", "t2"], "val": ["v1"],
                                                    "test": [f"e{i}" for i in range(1, 9)]})
    return tmp_path


def test_the_demo_imports_the_fixture_and_prints_the_table_of_five_tasks(fake):
    result = run_cli("demo", "--benchmark", "fakeqa", "--out", str(fake / "demo"))
    assert result.code == 0, result.err
    assert result.out.startswith("SIMULATION - no real model is called.")
    row = next(line for line in result.out.splitlines() if line.startswith("Fake QA"))
    # the first 5 test tasks, e2 and e4 answered right; the simulated model is free
    assert "0.400 [0.000, 1.000] · n 5 · $0.0000 · 0 errors" in row
    assert "5 calls to the simulated target." in result.out
    assert "skillopt-ci bench import fakeqa --from PATH" in result.out
    # the real import path wrote an ordinary suite with the benchmark's metadata and the manifest's splits
    suite = fake / "demo" / "eval_suites" / "fakeqa"
    assert "name: fakeqa" in (suite / "suite.yaml").read_text()
    # the fixture holds the published manifest's first 5 test ids (and 2 of each other split)
    assert [json.loads(line)["id"] for line in (suite / "test.jsonl").read_text().splitlines()] == \
        ["e1", "e2", "e3", "e4", "e5"]
    assert len((suite / "train.jsonl").read_text().splitlines()) == 2
    table = json.loads((fake / "demo" / "bench" / "bench.json").read_text())
    assert table["rows"][0]["cells"]["as imported"]["n_tasks"] == 5


def test_the_demo_evaluates_a_given_skill(fake):
    skill = fake / "mine.md"
    skill.write_text("---\nname: my-answers\ndescription: Answers.\n---\nAnswer briefly.\n")
    result = run_cli("demo", "--benchmark", "fakeqa", "--skill", str(skill))
    assert result.code == 0, result.err
    assert "skill my-answers" in result.out and "0.400 [0.000, 1.000]" in result.out


def test_an_unknown_benchmark_or_one_without_demo_data_is_exit_2(fake, monkeypatch):
    unknown = run_cli("demo", "--benchmark", "nosuch")
    assert unknown.code == 2 and "unknown benchmark 'nosuch'" in unknown.err
    from skillopt_ci import benchmarks

    monkeypatch.setitem(benchmarks.BENCHMARKS, "nodata", "helpers.bench_fake")
    missing = run_cli("demo", "--benchmark", "nodata")
    assert missing.code == 2 and "no demo data for the nodata benchmark" in missing.err


def test_skill_without_benchmark_is_a_usage_error(fake):
    skill = fake / "s.md"
    skill.write_text("# s\n")
    result = run_cli("demo", "--skill", str(skill))
    assert result.code == 2 and "--skill needs --benchmark" in result.err


def test_an_asset_root_named_by_a_variable_is_pointed_at_the_fixture(fake, monkeypatch):
    module = bench_fake.register(monkeypatch, fake / "published", "fakedocs", "Fake Docs")
    monkeypatch.setattr(module, "read", bench_fake.read_with_assets)
    bench_fake.write_manifest(fake / "published", "fakedocs", {"train": ["t1"], "val": ["v1"], "test": ["e1", "e2"]})
    monkeypatch.delenv("FAKEQA_DATA", raising=False)
    result = run_cli("demo", "--benchmark", "fakedocs", "--out", str(fake / "demo"))
    assert result.code == 0, result.err
    assert "0.500 [0.000, 1.000] · n 2" in result.out
    assert "${FAKEQA_DATA}" in (fake / "demo" / "eval_suites" / "fakedocs" / "suite.yaml").read_text()
    import os

    assert "FAKEQA_DATA" not in os.environ  # restored after the demo
