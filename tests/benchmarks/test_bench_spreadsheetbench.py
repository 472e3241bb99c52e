"""SpreadsheetBench import: the data as distributed (a folder, an extracted archive, the .tar.gz;
the three test-case namings) into a suite that validates with the published split sizes; bad data
is exit 2 naming the id and the file; then an eval through the real OpenAI SDK against the
scripted server, with a repair turn, replayed from the response cache."""

from __future__ import annotations

import json
import shutil
import sys
import tarfile
from pathlib import Path

import yaml

from helpers.cli import run_cli
from helpers.manifests import write_small_manifest
from helpers.paths import DATA
from skillopt_ci.benchmarks.manifest import load_manifest
from skillopt_ci.benchmarks.packs.spreadsheetbench import fixture
from skillopt_ci.inputs.suite import load_suite
from skillopt_ci.sim import ScriptedModelServer

SAMPLE = DATA / "benchmarks" / "spreadsheetbench"
KEYS = {"OPENAI_API_KEY": "sk-test-not-a-key-000000000000"}
SKILL = "---\nname: sheets\ndescription: Edit workbooks with Python.\n---\nWrite values with openpyxl.\n"


def bench_import(source: Path, out: Path, manifest: Path | None = None):
    args = ["bench", "import", "spreadsheetbench", "--from", str(source), "--out", str(out)]
    return run_cli(*args, *(["--manifest", str(manifest)] if manifest else []))


def write_manifest(folder: Path, splits: dict[str, list[str]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "split_manifest.json").write_text(json.dumps({"benchmark": "SpreadsheetBench"}))
    for split, ids in splits.items():
        (folder / split).mkdir(exist_ok=True)
        (folder / split / "items.json").write_text(json.dumps([{"id": i} for i in ids]))
    return folder


def write_project(root: Path, target: dict) -> Path:
    skill = root / "skills" / "sheets" / "SKILL.md"
    skill.parent.mkdir(parents=True, exist_ok=True)
    skill.write_text(SKILL)
    config = {"version": 1, "models": {"target": {"max_retries": 1, **target}},
              "skills": [{"path": "skills/sheets/SKILL.md", "suite": "eval_suites/spreadsheetbench"}],
              "concurrency": 3, "cache": {"mode": "read-write", "path": ".skillopt/cache.sqlite"}}
    (root / "skillopt.yml").write_text(yaml.safe_dump(config))
    return root


def test_the_fixture_of_every_published_id_imports_and_validates_with_80_40_280(tmp_path):
    source = fixture.write_fixture(tmp_path / "data")  # by default one task per published id
    project = tmp_path / "project"
    result = bench_import(source, project / "eval_suites" / "spreadsheetbench")
    assert result.code == 0, result.err
    assert "80 train / 40 val / 280 test" in result.out and "400 of 401 tasks used" in result.out
    write_project(project, {"provider": "openai-compatible", "model": "sim", "base_url": "http://127.0.0.1:9/v1"})
    checked = run_cli("validate", cwd=project)
    assert checked.code == 0, checked.out + checked.err
    suite = load_suite(project / "eval_suites" / "spreadsheetbench")
    assert [len(suite.tasks(s)) for s in ("train", "val", "test")] == [80, 40, 280]
    published = load_manifest("spreadsheetbench")
    assert [t.id for t in suite.tasks("test")] == [i.id for i in published.splits["test"]]


def test_a_missing_or_duplicated_id_is_exit_2_naming_the_id_and_the_file(tmp_path):
    source = fixture.write_fixture(tmp_path / "data", load_manifest("spreadsheetbench"))
    dataset = source / "dataset.json"
    records = json.loads(dataset.read_text())
    first_test_id = load_manifest("spreadsheetbench").splits["test"][0].id
    dataset.write_text(json.dumps([r for r in records if r["id"] != first_test_id]))
    missing = bench_import(source, tmp_path / "out")
    assert missing.code == 2
    assert f"id '{first_test_id}' of the test split" in missing.err and "dataset.json" in missing.err
    assert not (tmp_path / "out").exists()
    dataset.write_text(json.dumps(records + [records[5]]))
    duplicated = bench_import(source, tmp_path / "out")
    assert duplicated.code == 2
    assert f"id '{records[5]['id']}' appears twice" in duplicated.err and "dataset.json[5]" in duplicated.err


def sample_with_verified_copies(tmp_path: Path) -> Path:
    """The real sample (v0.1 naming) plus renamed copies in both Verified 400 namings."""
    data = tmp_path / "data"
    shutil.copytree(SAMPLE, data, ignore=shutil.ignore_patterns("NOTICE"))
    records = json.loads((data / "dataset.json").read_text())
    renamed = data / "spreadsheet" / "v-10452"
    renamed.mkdir()
    for n in (1, 2, 3):
        shutil.copyfile(SAMPLE / f"spreadsheet/10452/{n}_10452_input.xlsx", renamed / f"{n}_v-10452_init.xlsx")
        shutil.copyfile(SAMPLE / f"spreadsheet/10452/{n}_10452_answer.xlsx", renamed / f"{n}_v-10452_golden.xlsx")
    bare = data / "spreadsheet" / "b-325-44"
    bare.mkdir()
    shutil.copyfile(SAMPLE / "spreadsheet/325-44/1_325-44_input.xlsx", bare / "initial.xlsx")
    shutil.copyfile(SAMPLE / "spreadsheet/325-44/1_325-44_answer.xlsx", bare / "golden.xlsx")
    records += [dict(records[0], id="v-10452", spreadsheet_path="spreadsheet/v-10452"),
                dict(records[1], id="b-325-44", spreadsheet_path="spreadsheet/b-325-44")]
    (data / "dataset.json").write_text(json.dumps(records))
    return data


def test_the_real_sample_and_both_verified_namings_import(tmp_path):
    data = sample_with_verified_copies(tmp_path)
    manifest = write_manifest(tmp_path / "manifest", {"train": ["10452", "325-44"], "val": ["v-10452"],
                                                      "test": ["b-325-44"]})
    result = bench_import(data, tmp_path / "suite", manifest)
    assert result.code == 0, result.err
    suite = load_suite(tmp_path / "suite")
    train = {t.id: t for t in suite.tasks("train")}
    cell = train["10452"]  # an integer id upstream
    assert cell.input.startswith("# Instruction\nI need a method to perform a vertical lookup")
    assert "# Instruction type\nCell-Level Manipulation" in cell.input and "# Answer position\nE4:E12" in cell.input
    assert "## Sheet 'Sheet1' (15 rows x 7 columns)" in cell.input and "6 |  | PK01/P819760979" in cell.input
    assert cell.fields["files"] == {f"cases/{n}/input.xlsx": f"@spreadsheetbench/spreadsheet/10452/{n}_10452_input.xlsx"
                                    for n in (1, 2, 3)}
    assert [g["path"] for g in cell.expected["golden"]][0] == "@spreadsheetbench/spreadsheet/10452/1_10452_answer.xlsx"
    sheet = train["325-44"]
    assert sheet.expected["answer_sheet"] == "Output" and sheet.metadata["data_position"]
    assert "# Answer position\n'Output'!A1:G10" in sheet.input and "## Sheet 'Output'" in sheet.input
    verified = suite.tasks("val")[0]
    assert verified.expected["golden"][2]["path"].endswith("v-10452/3_v-10452_golden.xlsx")
    bare = suite.tasks("test")[0]
    assert bare.fields["files"] == {"cases/1/input.xlsx": "@spreadsheetbench/spreadsheet/b-325-44/initial.xlsx"}
    assert len(bare.fields["cases"]) == 1


def test_the_archive_itself_imports_with_its_workbooks_extracted_into_the_suite(tmp_path):
    data = sample_with_verified_copies(tmp_path)
    archive = tmp_path / "spreadsheetbench_verified_400.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(data, arcname="./spreadsheetbench_verified_400")  # as `tar czf x.tar.gz ./folder` names it
    manifest = write_manifest(tmp_path / "manifest", {"train": ["10452"], "val": ["v-10452"], "test": ["b-325-44"]})
    result = bench_import(archive, tmp_path / "suite", manifest)
    assert result.code == 0, result.err
    assert "workbooks extracted from the archive into the suite" in result.out
    assert not (tmp_path / "suite" / "assets.json").exists()
    assert (tmp_path / "suite" / "spreadsheet/b-325-44/golden.xlsx").read_bytes() == \
        (data / "spreadsheet/b-325-44/golden.xlsx").read_bytes()
    task = load_suite(tmp_path / "suite").tasks("test")[0]
    assert task.fields["files"] == {"cases/1/input.xlsx": "spreadsheet/b-325-44/initial.xlsx"}
    # the extracted folder (one level down) imports too
    extracted = tmp_path / "extracted"
    with tarfile.open(archive) as tar:
        tar.extractall(extracted)
    assert bench_import(extracted, tmp_path / "suite2", manifest).code == 0


def test_bad_data_is_exit_2_naming_the_file(tmp_path, monkeypatch):
    data = sample_with_verified_copies(tmp_path)
    manifest = write_manifest(tmp_path / "manifest", {"train": ["10452"], "val": ["v-10452"], "test": ["b-325-44"]})
    (data / "spreadsheet/b-325-44/golden.xlsx").unlink()
    no_case = bench_import(data, tmp_path / "s1", manifest)
    assert no_case.code == 2 and "task 'b-325-44' has no test case" in no_case.err
    assert "spreadsheet/b-325-44" in no_case.err
    (tmp_path / "empty").mkdir()
    nothing = bench_import(tmp_path / "empty", tmp_path / "s2", manifest)
    assert nothing.code == 2 and "no dataset.json in this folder" in nothing.err
    monkeypatch.setitem(sys.modules, "openpyxl", None)  # the benchmarks extra is not installed
    no_extra = bench_import(data, tmp_path / "s3", manifest)
    assert no_extra.code == 2 and 'pip install "skillopt-ci[benchmarks]"' in no_extra.err


def test_an_eval_through_the_openai_sdk_repairs_scores_and_replays_from_the_cache(tmp_path):
    manifest = write_small_manifest("spreadsheetbench", tmp_path / "manifest")
    source = fixture.write_fixture(tmp_path / "data", load_manifest("spreadsheetbench", manifest))
    project = tmp_path / "project"
    assert bench_import(source, project / "eval_suites" / "spreadsheetbench", manifest).code == 0
    with ScriptedModelServer(fixture.policy) as server:
        write_project(project, {"provider": "openai-compatible", "model": "sim-sheets", "base_url": server.openai_base_url})
        first = run_cli("eval", "sheets", "--split", "test", "--out", str(tmp_path / "run1"), "--quiet",
                        cwd=project, env=KEYS)
        assert first.code == 0, first.err
        calls = server.call_count
        assert calls == 4  # [sum] and [double]: one turn each; [upper]: a broken program, then the fix
        repair = next(c.request for c in server.calls if "AttributeError" in c.request.last_user)
        assert 'File "solution.py", line 5' in repair.last_user and str(tmp_path) not in json.dumps(repair.body)
        again = run_cli("eval", "sheets", "--split", "test", "--out", str(tmp_path / "run2"), "--quiet",
                        cwd=project, env=KEYS)
        assert again.code == 0, again.err
        assert server.call_count == calls  # every message was a pure function of the task: all cached
    for run in ("run1", "run2"):
        summary = json.loads((tmp_path / run / "summary.json").read_text())
        assert summary["mean"] == 2 / 3 and summary["n_errors"] == 0
    results = {r["task_id"]: r for r in map(json.loads, (tmp_path / "run1" / "results.jsonl").read_text().splitlines())}
    test_ids = [i.id for i in load_manifest("spreadsheetbench", manifest).splits["test"]]
    by_kind = {fixture.KINDS[place]: results[task_id] for place, task_id in enumerate(test_ids)}
    upper = by_kind["upper"]
    assert upper["passed"] and [s["kind"] for s in upper["trajectory"]].count("model") == 2
    assert any(s.get("is_error") and "AttributeError" in s["text"] for s in upper["trajectory"])
    assert by_kind["sum"]["feedback"] == "test cases passed: 2 of 2 (hard 1, soft 1.00)"
    assert not by_kind["double"]["passed"]
    assert "Data!C1 differs (the output has None)" in by_kind["double"]["feedback"]
