"""``skillopt-ci bench run``: imported benchmark suites found by their metadata, one ordinary eval
per benchmark × environment, one table (score [95 % CI] · n · cost · errors) printed and written."""

from __future__ import annotations

import json

import pytest
import yaml

from helpers import bench_fake
from helpers.cli import run_cli
from helpers.project import write_project
from skillopt_ci.benchmarks.importer import import_benchmark
from skillopt_ci.sim import ScriptedModelServer

QA_TEST = [f"e{i}" for i in range(1, 9)]  # e2, e4, e6, e8 are answered right: 4 of 8
MATH_TEST = ["m1", "m2", "m3", "m4", "m5", "m7"]  # m2, m4: 2 of 6


@pytest.fixture
def bench(tmp_path, monkeypatch):
    """A project whose eval_suites/ holds two imported fake benchmarks, and the scripted target."""
    published = tmp_path / "published"
    bench_fake.register(monkeypatch, published)
    bench_fake.register(monkeypatch, published, "fakemath", "Fake Math")
    with ScriptedModelServer(bench_fake.policy) as server:
        root = write_project(tmp_path / "proj", server.openai_base_url)
        for name, test in (("fakeqa", QA_TEST), ("fakemath", MATH_TEST)):
            folder = bench_fake.write_manifest(published, name, {"train": [f"{name}-t1"], "val": [f"{name}-v1"],
                                                                 "test": test})
            from skillopt_ci.benchmarks.manifest import load_manifest

            data = bench_fake.write_fixture(tmp_path / "data" / name, load_manifest(name, folder))
            import_benchmark(name, data, root / "eval_suites" / name)
        (root / "skill.md").write_text("# Answer\n\nAnswer the question.\n")
        yield root, server


def bench_run(root, *args):
    return run_cli("bench", "run", "--skill", "skill.md", "--out", "out", "--quiet", *args, cwd=root)


def test_the_table_shows_score_ci_n_cost_and_errors_per_benchmark(bench):
    root, server = bench
    result = bench_run(root)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    qa = next(line for line in lines if line.startswith("Fake QA"))
    math = next(line for line in lines if line.startswith("Fake Math"))
    # 4 of 8 right: t-interval over tasks; 8 calls of 1,000 + 500 tokens at $1 / $2 per million
    assert "chat" in qa and "0.500 [0.053, 0.947] · n 8 · $0.0160 · 0 errors" in qa
    # 2 of 6: the interval is clipped at 0
    assert "0.333 [0.000, 0.875] · n 6 · $0.0120 · 0 errors" in math
    assert server.call_count == 14


def test_the_table_is_written_as_markdown_and_json(bench):
    root, _ = bench
    assert bench_run(root, "--benchmarks", "fakeqa").code == 0
    md = (root / "out" / "bench.md").read_text().replace("\\[", "[")  # as the markdown renders
    assert "| Fake QA " in md and "0.500 [0.053, 0.947] · n 8 · $0.0160 · 0 errors" in md
    assert "Fake Math" not in md
    data = json.loads((root / "out" / "bench.json").read_text())
    (row,) = data["rows"]
    cell = row["cells"]["as imported"]
    assert (row["benchmark"], cell["environment"], cell["state"]) == ("fakeqa", "chat", "ran")
    assert cell["score"] == 0.5 and cell["ci95"] == pytest.approx([0.053128, 0.946872], abs=1e-6)
    assert (cell["n_tasks"], cell["n_scored"], cell["errors"]) == (8, 8, 0)
    assert cell["cost_usd"] == pytest.approx(0.016)
    assert (root / cell["run_dir"] / "report.md").is_file()


def test_a_second_run_calls_no_model(bench):
    root, server = bench
    assert bench_run(root).code == 0
    calls = server.call_count
    again = bench_run(root)  # resumes the finished runs
    fresh = bench_run(root, "--fresh")  # starts the runs over: every answer comes from the cache
    assert again.code == fresh.code == 0
    assert server.call_count == calls
    cell = json.loads((root / "out" / "bench.json").read_text())["rows"][0]["cells"]["as imported"]
    assert cell["cache_hits"] == cell["n_results"] > 0
    assert "0.500 [0.053, 0.947]" in fresh.out


def test_an_unknown_benchmark_is_exit_2(bench):
    root, server = bench
    result = bench_run(root, "--benchmarks", "fakeqa,nosuch")
    assert result.code == 2
    assert "unknown benchmark 'nosuch'" in result.err and "searchqa" in result.err
    assert server.call_count == 0


def test_a_benchmark_not_imported_names_the_import_command(bench):
    root, _ = bench
    result = bench_run(root, "--benchmarks", "searchqa")
    assert result.code == 2
    assert "no imported searchqa suite under eval_suites" in result.err
    assert "skillopt-ci bench import searchqa --from" in result.err


def test_an_empty_suites_dir_is_exit_2_with_the_import_command(bench):
    root, _ = bench
    (root / "empty").mkdir()
    result = bench_run(root, "--suites-dir", "empty")
    assert result.code == 2
    first = result.err.splitlines()[0]
    assert "no imported benchmark suite under empty" in first
    assert "skillopt-ci bench import NAME --from PATH" in result.err
    # the project's own suite (no benchmark: metadata) is not a benchmark
    assert bench_run(root, "--suites-dir", "eval_suites", "--benchmarks", "fakeqa").code == 0


def test_an_impossible_combination_is_a_cell_that_says_why(bench):
    root, server = bench
    world = root / "eval_suites" / "fakeworld"
    world.mkdir()
    (world / "suite.yaml").write_text(yaml.safe_dump({
        "benchmark": {"name": "fakeworld"}, "environment": {"type": "interactive", "world": "world:World"},
        "scorer": {"type": "reward"}}))
    (world / "test.jsonl").write_text(json.dumps({"id": "g1", "input": "play"}) + "\n")
    result = bench_run(root, "--env", "chat")
    assert result.code == 0, result.err
    row = next(line for line in result.out.splitlines() if line.startswith("fakeworld"))
    assert "not run: interactive suite: its tasks are episodes in its world" in row
    assert "0.500 [0.053, 0.947]" in result.out  # the other benchmarks ran
    cells = {r["benchmark"]: r["cells"]["chat"] for r in json.loads((root / "out" / "bench.json").read_text())["rows"]}
    assert cells["fakeworld"]["state"] == "not run" and "only interactive plays them" in cells["fakeworld"]["reason"]
    assert server.call_count == 14


def test_a_scorer_the_environment_cannot_feed_stops_only_its_cell(bench):
    root, _ = bench
    suite = root / "eval_suites" / "fakeqa" / "suite.yaml"
    doc = yaml.safe_load(suite.read_text())
    doc["scorer"] = {"type": "reward"}  # needs an episode's reward; chat gives none
    suite.write_text(yaml.safe_dump(doc))
    result = bench_run(root)
    assert result.code == 2  # the suite cannot run in its own environment
    qa = next(line for line in result.out.splitlines() if line.startswith("Fake QA"))
    assert "not run: eval_suites/fakeqa" in qa
    # the cell is cut in the terminal; the whole reason follows the table
    assert "Fake QA · chat: not run:" in result.out and "needs an environment that gives a reward" in result.out
    assert "0.333 [0.000, 0.875]" in result.out


def test_an_unknown_environment_is_exit_2(bench):
    root, _ = bench
    result = bench_run(root, "--env", "chat,nosuch")
    assert result.code == 2 and "unknown environment 'nosuch' in --env" in result.err


def test_each_environment_column_runs_in_its_own_environment(bench):
    root, server = bench
    result = bench_run(root, "--benchmarks", "fakeqa", "--env", "chat,tools")
    assert result.code == 0, result.err
    qa = next(line for line in result.out.splitlines() if line.startswith("Fake QA"))
    assert qa.count("0.500 [0.053, 0.947] · n 8 · $0.0160 · 0 errors") == 2
    cells = json.loads((root / "out" / "bench.json").read_text())["rows"][0]["cells"]
    ran = {column: json.loads((root / cell["run_dir"] / "run.json").read_text()) for column, cell in cells.items()}
    assert "environment" not in ran["chat"] and ran["tools"]["environment"]["type"] == "tools"
    assert sum(1 for call in server.calls if call.request.tools) == 8  # the tools column offered tools


def test_a_budget_stop_marks_the_cell_incomplete_and_exits_3(bench):
    root, _ = bench
    config = yaml.safe_load((root / "skillopt.yml").read_text())
    config["budgets"] = {"max_tokens": 3300}  # two calls of 1,500 tokens, and room for the estimate of a next one to err
    config["concurrency"] = 1
    (root / "skillopt.yml").write_text(yaml.safe_dump(config))
    result = bench_run(root, "--benchmarks", "fakeqa")
    assert result.code == 3
    qa = next(line for line in result.out.splitlines() if line.startswith("Fake QA"))
    assert "n 2/8" in qa and "incomplete (token budget reached" in qa
    again = bench_run(root, "--benchmarks", "fakeqa")  # the same command resumes, and stops again
    assert again.code == 3


def test_a_cell_with_more_errors_than_max_error_rate_fails_the_command(bench):
    from skillopt_ci.sim import Fault

    root, server = bench
    server.inject(*[Fault.status(400, "Scripted refusal.")] * 4)  # not retried: 4 of the 6 rollouts error
    result = bench_run(root, "--benchmarks", "fakemath")
    assert result.code == 3, result.err
    assert "fail: Fake Math · as imported: 4 of 6 rollouts errored (67%), more than eval.max_error_rate 50%" in result.err


def test_the_suites_dir_help_names_the_folder_that_holds_the_suites():
    result = run_cli("bench", "run", "--help")
    text = " ".join(result.out.split())
    assert "The folder holding the imported suites, one folder each" in text
    assert "after bench import --out DIR/NAME, pass DIR" in text
