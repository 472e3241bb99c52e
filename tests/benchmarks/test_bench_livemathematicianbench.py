"""LiveMathematicianBench: the correct option put back and the options shuffled per item (so
answering "A" everywhere no longer scores 100 %), on five real items and on the fixture; the
published split sizes; missing and duplicated ids; an eval through the real OpenAI SDK."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from helpers import bench_toy
from helpers.bench_chat import evaluate, import_fixture, openai_target, validate, write_project
from helpers.cli import run_cli
from helpers.paths import DATA
from skillopt_ci.benchmarks.packs.livemathematicianbench import fixture
from skillopt_ci.benchmarks.packs.livemathematicianbench.importer import item_seed
from skillopt_ci.sim import ScriptedModelServer

REAL = DATA / "benchmarks" / "livemathematicianbench"
REAL_SPLITS = {"train": ["202602:22", "202512:8", "202511:16"], "val": ["202601:44"], "test": ["202511:14"]}


def _import_real(tmp_path, source=REAL):
    manifest = bench_toy.write_manifest(tmp_path / "manifest", REAL_SPLITS)
    suite = tmp_path / "project" / "eval_suites" / "livemathematicianbench"
    result = run_cli("bench", "import", "livemathematicianbench", "--from", str(source), "--manifest", str(manifest),
                     "--out", str(suite))
    return result, suite


def _tasks(suite):
    return [json.loads(x) for s in ("train", "val", "test") for x in (suite / f"{s}.jsonl").read_text().splitlines()]


def _raw_items():
    return {f"{i['month']}:{i['no']}": i for f in sorted(REAL.rglob("qa_*_final.json")) for i in json.loads(f.read_text())}


def test_the_item_seed_is_the_first_16_hex_digits_of_sha256():
    assert item_seed(42, "202511:14") == int(hashlib.sha256(b"42:202511:14").hexdigest()[:16], 16)


def test_real_items_get_their_correct_option_back_and_shuffled(tmp_path):
    result, suite = _import_real(tmp_path)
    assert result.code == 0, result.err
    raw = _raw_items()
    tasks = _tasks(suite)
    assert [t["id"] for t in tasks] == [i for ids in REAL_SPLITS.values() for i in ids]
    for task in tasks:
        item = raw[task["id"]]["mcq"]
        assert item["correct_choice"]["label"] == "A" and "A" not in {c["label"] for c in item["choices"]}
        assert [c["label"] for c in task["choices"]] == list("ABCDE")
        texts = sorted(c["text"] for c in task["choices"])
        assert texts == sorted([item["correct_choice"]["text"], *(c["text"] for c in item["choices"])])
        landed = next(c for c in task["choices"] if c["label"] == task["expected"])
        assert landed["text"] == item["correct_choice"]["text"]
        assert task["options"].splitlines()[0].startswith("A. ")
    # Pinned: seed 42 puts the correct options at these labels (a change here changes every score).
    assert [t["expected"] for t in tasks] == ["A", "D", "C", "A", "D"]


def _answer_a(request):
    return "<answer>A</answer>"


def test_answering_a_everywhere_no_longer_scores_100_percent(tmp_path):
    result, suite = _import_real(tmp_path)
    assert result.code == 0, result.err
    with ScriptedModelServer(_answer_a) as server:
        project = write_project(tmp_path / "project", "livemathematicianbench", openai_target(server))
        summary, _ = evaluate(project, "train", tmp_path / "run")
    assert summary["mean"] == pytest.approx(1 / 3)  # A is right on 202602:22 only
    # Over the 177 fixture items, "A" is right about one time in five.
    full, _ = import_fixture("livemathematicianbench", fixture, tmp_path / "full", full=True)
    expected = [t["expected"] for t in _tasks(full)]
    assert len(expected) == 177 and 0.1 < expected.count("A") / 177 < 0.3
    assert set(expected) == set("ABCDE")


def test_the_import_is_deterministic(tmp_path):
    _, first = _import_real(tmp_path / "a")
    _, second = _import_real(tmp_path / "b")
    assert (first / "test.jsonl").read_bytes() == (second / "test.jsonl").read_bytes()


def test_the_published_split_sizes_and_validate(tmp_path):
    suite, _ = import_fixture("livemathematicianbench", fixture, tmp_path, full=True)
    sizes = {s: len((suite / f"{s}.jsonl").read_text().splitlines()) for s in ("train", "val", "test")}
    assert sizes == {"train": 35, "val": 17, "test": 125}
    project = write_project(tmp_path / "project", "livemathematicianbench",
                            {"provider": "openai-compatible", "model": "m", "base_url": "http://127.0.0.1:9/v1"})
    result = validate(project)
    assert result.code == 0, result.err


def test_a_missing_id_is_exit_2_naming_it_and_the_files(tmp_path):
    source = tmp_path / "raw"
    shutil.copytree(REAL, source)
    (source / "data/202601/qa_202601_final.json").write_text("[]")
    result, suite = _import_real(tmp_path, source)
    assert result.code == 2
    line = result.err.strip().splitlines()[0]
    assert "id '202601:44' of the val split" in line and "val/items.json[0]" in line and str(source) in line
    assert not suite.exists()


def test_a_duplicated_id_is_exit_2_naming_both_places(tmp_path):
    source = tmp_path / "raw"
    shutil.copytree(REAL, source)
    shutil.copy(source / "data/202512/qa_202512_final.json", source / "data/202512/qa_202512_final.copy.json")
    result, _ = _import_real(tmp_path, source)
    assert result.code == 2
    line = result.err.strip().splitlines()[0]
    assert "id '202512:8' appears twice" in line
    assert "qa_202512_final.json[0]" in line and "qa_202512_final.copy.json[0]" in line


def test_an_item_listing_its_correct_label_among_the_choices_is_refused(tmp_path):
    source = tmp_path / "raw"
    shutil.copytree(REAL, source)
    path = source / "data/202601/qa_202601_final.json"
    items = json.loads(path.read_text())
    items[0]["mcq"]["choices"][0]["label"] = "A"
    path.write_text(json.dumps(items))
    result, _ = _import_real(tmp_path, source)
    assert result.code == 2 and "item '202601:44': option labels repeat (A, A, C, D, E)" in result.err


def test_an_eval_of_the_fixture_through_the_openai_sdk(tmp_path):
    suite, _ = import_fixture("livemathematicianbench", fixture, tmp_path, full=False)
    with ScriptedModelServer(fixture.policy) as server:
        project = write_project(tmp_path / "project", "livemathematicianbench", openai_target(server))
        summary, results = evaluate(project, "test", tmp_path / "run")
        prompts = [c.request.last_user for c in server.calls]
    assert len(prompts) == 3 and all("## Question\n" in p and "\n## Choices\nA. " in p for p in prompts)
    assert 0 < summary["mean"] < 1
    ordered = [results[json.loads(x)["id"]] for x in (suite / "test.jsonl").read_text().splitlines()]
    # 16 + 12 = 28 (even): worked out; 17 + 8 = 25: the solver slips to 26; 18 + 4 = 22: worked out.
    assert [r["score"] for r in ordered] == [1.0, 0.0, 1.0]
    assert "answered" in ordered[1]["feedback"] and summary["mean"] == pytest.approx(2 / 3)
