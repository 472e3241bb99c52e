"""DocVQA: import from the lmms-lab parquet files and from the per-split CSV layout, page images
written into the suite, the published split sizes, missing and duplicated ids, and an eval whose
page image reaches the scripted server through the real OpenAI and Anthropic SDKs."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from helpers.bench_chat import (
    anthropic_target,
    evaluate,
    import_fixture,
    openai_target,
    validate,
    write_project,
)
from helpers.cli import run_cli
from helpers.manifests import write_small_manifest
from skillopt_ci.benchmarks.packs.docvqa import fixture
from skillopt_ci.benchmarks.packs.docvqa.importer import image_suffix, parse_answers
from skillopt_ci.core.errors import InputError
from skillopt_ci.sim import ScriptedModelServer


def _tasks(suite, split):
    return [json.loads(x) for x in (suite / f"{split}.jsonl").read_text().splitlines()]


def test_answers_as_lists_literals_or_strings():
    assert parse_answers(["1/8/93", "Jan 8"], "f") == ["1/8/93", "Jan 8"]
    assert parse_answers("['1/8/93', \"it's\"]", "f") == ["1/8/93", "it's"]
    assert parse_answers("ITC Limited", "f") == ["ITC Limited"]
    with pytest.raises(InputError, match="not a Python list literal"):
        parse_answers("['unclosed", "f")
    with pytest.raises(InputError, match="non-empty list"):
        parse_answers([], "f")
    assert image_suffix(b"\xff\xd8\xff\xe0rest") == ".jpg" and image_suffix(b"RIFF1234WEBPVP8 ") == ".webp"
    assert image_suffix(b"%PDF-1.4") is None


def test_the_published_split_sizes_with_the_page_images_in_the_suite(tmp_path):
    suite, _ = import_fixture("docvqa", fixture, tmp_path, full=True)
    sizes = {s: len(_tasks(suite, s)) for s in ("train", "val", "test")}
    assert sizes == {"train": 107, "val": 53, "test": 374}
    first = _tasks(suite, "train")[0]
    assert first["id"] == "50877" and first["images"] == ["images/q50877_d14724.png"]
    assert (suite / "images/q50877_d14724.png").read_bytes().startswith(b"\x89PNG")
    assert len(list((suite / "images").iterdir())) == 534
    project = write_project(tmp_path / "project", "docvqa",
                            {"provider": "openai-compatible", "model": "m", "base_url": "http://127.0.0.1:9/v1"})
    result = validate(project)
    assert result.code == 0, result.err


def test_the_csv_per_split_layout_imports_with_its_images(tmp_path):
    suite, _ = import_fixture("docvqa", fixture, tmp_path, full=False, fmt="csv")
    parquet_suite, _ = import_fixture("docvqa", fixture, tmp_path / "p", full=False)
    for split in ("train", "val", "test"):
        assert [(t["id"], t["expected"], t["input"]) for t in _tasks(suite, split)] == \
            [(t["id"], t["expected"], t["input"]) for t in _tasks(parquet_suite, split)]
    name = _tasks(suite, "val")[0]["images"][0]
    assert (suite / name).read_bytes() == (parquet_suite / name).read_bytes()


def test_a_document_path_marker_in_the_question_gives_the_image_and_answers_may_be_named_answers(tmp_path):
    manifest = write_small_manifest("docvqa", tmp_path / "manifest")
    source = fixture.write_fixture(tmp_path / "data", fmt="csv")
    table = source / "train" / "docvqa_train.csv"
    rows = list(csv.DictReader(table.open()))
    rows[0]["question"] += " document_path: " + rows[0]["image_path"]
    rows[0]["image_path"] = ""
    rows = [{("answers" if k == "answer" else k): v for k, v in r.items()} for r in rows]  # either column name
    with table.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    result = run_cli("bench", "import", "docvqa", "--from", str(source), "--manifest", str(manifest),
                     "--out", str(tmp_path / "suite"))
    assert result.code == 0, result.err
    first = _tasks(tmp_path / "suite", "train")[0]
    assert first["input"] == "What is the date of the letter?" and first["images"] == ["images/q50877_d14724.png"]
    assert isinstance(first["expected"], list) and first["expected"][0].count("/") == 2


def _import(tmp_path, source, manifest):
    return run_cli("bench", "import", "docvqa", "--from", str(source), "--manifest", str(manifest),
                   "--out", str(tmp_path / "suite"))


def test_a_missing_id_is_exit_2_naming_it_and_the_files(tmp_path):
    manifest = write_small_manifest("docvqa", tmp_path / "manifest")
    source = fixture.write_fixture(tmp_path / "data", fmt="csv")
    table = source / "test" / "docvqa_test.csv"
    lines = table.read_text().splitlines(keepends=True)
    table.write_text("".join(lines[:2] + lines[3:]))  # drop the second test question, 53705
    result = _import(tmp_path, source, manifest)
    assert result.code == 2
    line = result.err.strip().splitlines()[0]
    assert "id '53705' of the test split" in line and "test/items.json[1]" in line and str(source) in line


def test_a_duplicated_id_is_exit_2_naming_both_rows(tmp_path):
    manifest = write_small_manifest("docvqa", tmp_path / "manifest")
    source = fixture.write_fixture(tmp_path / "data")
    data = source / "DocVQA" / "validation-00000-of-00001.parquet"
    shutil.copy(data, source / "DocVQA" / "validation-00001-of-00001.parquet")
    result = _import(tmp_path, source, manifest)
    assert result.code == 2
    line = result.err.strip().splitlines()[0]
    assert "id '50877' appears twice" in line
    assert "validation-00000-of-00001.parquet row 0" in line and "validation-00001-of-00001.parquet row 0" in line


def test_a_question_on_another_document_than_the_manifest_says_is_refused(tmp_path):
    manifest = write_small_manifest("docvqa", tmp_path / "manifest")
    items = json.loads((manifest / "val" / "items.json").read_text())
    items[0]["docId"] = "1"
    (manifest / "val" / "items.json").write_text(json.dumps(items))
    result = _import(tmp_path, fixture.write_fixture(tmp_path / "data"), manifest)
    assert result.code == 2
    assert "question 62409: docId 8554 in the data but 1 in the manifest" in result.err


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_an_eval_sends_the_page_image_through_the_real_sdks(tmp_path, protocol):
    suite, _ = import_fixture("docvqa", fixture, tmp_path, full=False)
    with ScriptedModelServer(fixture.policy) as server:
        target = (openai_target if protocol == "openai" else anthropic_target)(server)
        project = write_project(tmp_path / "project", "docvqa", target)
        summary, results = evaluate(project, "val", tmp_path / "run")
        calls = server.calls
    assert len(calls) == 3 and {c.request.protocol for c in calls} == {protocol}
    tasks = _tasks(suite, "val")
    sent = {c.request.last_user.split("Question: ")[1].splitlines()[0]: c.request.images for c in calls}
    for task in tasks:
        images = sent[task["input"]]
        assert len(images) == 1 and images[0]["media_type"] == "image/png"
        if task["input"].startswith("What is the date"):
            assert images[0]["bytes"] == (suite / task["images"][0]).read_bytes()
    ordered = [results[t["id"]] for t in tasks]
    # date: exact (1); total "$14.5" for "$14.50": ANLS 5/6, hard 0; addressee: "unknown" (0)
    assert [r["score"] for r in ordered] == [1.0, 0.0, 0.0]
    assert "soft 0.83" in ordered[1]["feedback"] and "soft 0.00" in ordered[2]["feedback"]
    assert summary["mean"] == pytest.approx(1 / 3)
