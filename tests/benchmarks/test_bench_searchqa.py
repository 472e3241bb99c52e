"""SearchQA: the context cut at document boundaries, the import from the Hugging Face files (parquet
and JSON Lines) split by the published manifest, clear errors for missing and duplicated ids, and
an eval of the fixture through the real OpenAI SDK."""

from __future__ import annotations

import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers.bench_chat import evaluate, import_fixture, openai_target, validate, write_project
from helpers.cli import run_cli
from helpers.manifests import write_small_manifest
from skillopt_ci.benchmarks.packs.searchqa import fixture
from skillopt_ci.benchmarks.packs.searchqa.importer import CUT_MARK, truncate_context
from skillopt_ci.sim import ScriptedModelServer


def test_the_context_is_cut_at_the_last_document_boundary_that_fits():
    docs = ["[DOC] [TLE] a [PAR] " + "x" * 30, "[DOC] [TLE] b [PAR] " + "y" * 30, "[DOC] [TLE] c [PAR] " + "z" * 30]
    context = " ".join(docs)  # 3 documents of 50 characters, joined by spaces: 152 characters
    assert truncate_context(context, 200) == context
    assert truncate_context(context, 102) == docs[0] + " " + docs[1]  # the boundary at 102 fits exactly
    assert truncate_context(context, 101) == docs[0]
    assert truncate_context(context, 40) == context[:40] + CUT_MARK  # not even the first document fits
    assert truncate_context("no markup " * 10, 30) == ("no markup " * 10)[:30] + CUT_MARK


def test_the_published_split_sizes_from_a_fixture_covering_every_id(tmp_path):
    suite, _ = import_fixture("searchqa", fixture, tmp_path, full=True)
    sizes = {s: len((suite / f"{s}.jsonl").read_text().splitlines()) for s in ("train", "val", "test")}
    assert sizes == {"train": 400, "val": 200, "test": 1400}
    tasks = [json.loads(x) for x in (suite / "test.jsonl").read_text().splitlines()]
    assert max(len(t["context"]) for t in tasks) <= 6000
    assert any(t["metadata"]["truncated"] for t in tasks) and all(t["context"].startswith("[DOC]") for t in tasks)
    project = write_project(tmp_path / "project", "searchqa", {"provider": "openai-compatible", "model": "m",
                                                                "base_url": "http://127.0.0.1:9/v1"})
    result = validate(project)
    assert result.code == 0, result.err


def test_jsonl_rows_import_as_well(tmp_path):
    suite, _ = import_fixture("searchqa", fixture, tmp_path, full=False, fmt="jsonl")
    first = json.loads((suite / "train.jsonl").read_text().splitlines()[0])
    assert first["id"] == "221c83e6630f4e7983da48fa28da1882" and first["expected"] == ["Lyon"]


def test_json_arrays_and_json_lines_in_a_json_file_import_too(tmp_path):
    manifest = write_small_manifest("searchqa", tmp_path / "manifest")
    source = fixture.write_fixture(tmp_path / "data", fmt="jsonl")
    for path in sorted((source / "data").glob("*.jsonl")):
        if path.name.startswith("train"):  # JSON Lines under a .json name, as datasets' to_json writes them
            path.rename(path.with_suffix(".json"))
        else:
            rows = [json.loads(x) for x in path.read_text().splitlines()]
            path.with_suffix(".json").write_text(json.dumps(rows))
            path.unlink()
    result = run_cli("bench", "import", "searchqa", "--from", str(source), "--manifest", str(manifest),
                     "--out", str(tmp_path / "suite"))
    assert result.code == 0, result.err
    assert "9 of 11 rows used" in result.out


def _rows(path):
    return pq.read_table(path).to_pylist()


def test_a_missing_id_is_exit_2_naming_the_id_and_the_manifest_file(tmp_path):
    manifest = write_small_manifest("searchqa", tmp_path / "manifest")
    source = fixture.write_fixture(tmp_path / "data")
    data = source / "data" / "validation-00000-of-00001.parquet"
    rows = _rows(data)
    pq.write_table(pa.Table.from_pylist([r for r in rows if r["key"] != "52967b20d9564d5b94756bc0b3d113d6"]), data)
    result = run_cli("bench", "import", "searchqa", "--from", str(source), "--manifest", str(manifest),
                     "--out", str(tmp_path / "suite"))
    assert result.code == 2
    line = result.err.strip().splitlines()[0]
    assert "id '52967b20d9564d5b94756bc0b3d113d6' of the val split" in line
    assert "val/items.json[1]" in line and str(source) in line
    assert not (tmp_path / "suite").exists()


def test_a_duplicated_id_is_exit_2_naming_both_rows(tmp_path):
    manifest = write_small_manifest("searchqa", tmp_path / "manifest")
    source = fixture.write_fixture(tmp_path / "data", fmt="jsonl")
    train = source / "data" / "train-00000-of-00001.jsonl"
    first = (source / "data" / "validation-00000-of-00001.jsonl").read_text().splitlines()[0]
    train.write_text(train.read_text() + first + "\n")
    result = run_cli("bench", "import", "searchqa", "--from", str(source), "--manifest", str(manifest),
                     "--out", str(tmp_path / "suite"))
    assert result.code == 2
    line = result.err.strip().splitlines()[0]
    assert "id '221c83e6630f4e7983da48fa28da1882' appears twice" in line
    assert "train-00000-of-00001.jsonl:3" in line and "validation-00000-of-00001.jsonl:1" in line


def test_a_file_without_the_answers_column_is_named(tmp_path):
    manifest = write_small_manifest("searchqa", tmp_path / "manifest")
    (tmp_path / "rows.jsonl").write_text(json.dumps({"key": "k", "question": "q", "context": "c"}) + "\n")
    result = run_cli("bench", "import", "searchqa", "--from", str(tmp_path / "rows.jsonl"), "--manifest",
                     str(manifest), "--out", str(tmp_path / "suite"))
    assert result.code == 2 and "rows.jsonl:1: no answers field" in result.err


def test_a_row_without_golds_is_named_with_its_line(tmp_path):
    manifest = write_small_manifest("searchqa", tmp_path / "manifest")
    source = fixture.write_fixture(tmp_path / "data", fmt="jsonl")
    path = source / "data" / "validation-00000-of-00001.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    rows[4]["answers"] = []
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = run_cli("bench", "import", "searchqa", "--from", str(source), "--manifest", str(manifest),
                     "--out", str(tmp_path / "suite"))
    assert result.code == 2
    assert "validation-00000-of-00001.jsonl:5: row '52967b20d9564d5b94756bc0b3d113d6': answers must be a non-empty list" \
        in result.err


def test_parquet_without_pyarrow_is_one_line_naming_the_extra(tmp_path, monkeypatch):
    source = fixture.write_fixture(tmp_path / "data")
    manifest = write_small_manifest("searchqa", tmp_path / "manifest")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    result = run_cli("bench", "import", "searchqa", "--from", str(source), "--manifest", str(manifest),
                     "--out", str(tmp_path / "suite"))
    assert result.code == 2
    assert result.err.strip() == ('error: the searchqa benchmark needs pyarrow, which is not installed '
                                  '(pip install "skillopt-ci[benchmarks]")')


def test_an_eval_of_the_fixture_through_the_openai_sdk(tmp_path):
    suite, _ = import_fixture("searchqa", fixture, tmp_path, full=False)
    with ScriptedModelServer(fixture.policy) as server:
        project = write_project(tmp_path / "project", "searchqa", openai_target(server))
        summary, results = evaluate(project, "val", tmp_path / "run")
        calls = server.calls
    assert len(calls) == 3 and {c.request.protocol for c in calls} == {"openai"}
    first = calls[0].request
    assert first.system.strip() == "Read carefully, then answer."  # the skill is the system message
    assert first.last_user.startswith("## Context\n[DOC]") and "\n## Question\nIn which" in first.last_user
    assert "<answer></answer>" in first.last_user
    # Place 0: found (1); place 1: the fact was cut from the context (0); place 2: "the town of X" (F1 0.5).
    ordered = [results[json.loads(x)["id"]] for x in (suite / "val.jsonl").read_text().splitlines()]
    assert [r["score"] for r in ordered] == [1.0, 0.0, 0.0]
    assert "soft 0.00" in ordered[1]["feedback"] and "soft 0.50" in ordered[2]["feedback"]
    assert summary["mean"] == pytest.approx(1 / 3)
