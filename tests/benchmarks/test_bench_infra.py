"""The benchmark import infrastructure: published manifests, id matching, the atomic suite writer
and suite assets (files referenced where they lie, checked by size at load and sha256 at use)."""

from __future__ import annotations

import json

import pytest
import yaml

from helpers import bench_toy
from helpers.cli import run_cli
from skillopt_ci import benchmarks
from skillopt_ci.benchmarks.manifest import load_manifest, pick
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.task import Task
from skillopt_ci.inputs.assets import suite_file
from skillopt_ci.inputs.suite import check_suite, load_suite

PUBLISHED = {
    "searchqa": (400, 200, 1400),
    "docvqa": (107, 53, 374),
    "alfworld": (39, 18, 134),
    "livemathematicianbench": (35, 17, 125),
    "spreadsheetbench": (80, 40, 280),
    "officeqa": (50, 24, 172),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_the_published_manifests_ship_with_their_split_sizes(name):
    manifest = load_manifest(name)
    assert tuple(manifest.counts().values()) == PUBLISHED[name]
    assert list(manifest.splits) == ["train", "val", "test"]
    assert len(manifest.ids()) == sum(PUBLISHED[name])  # disjoint, no duplicates


def test_the_alfworld_manifest_keeps_its_game_paths():
    first = load_manifest("alfworld").splits["test"][0]
    assert first.id == "test:0000"
    assert first.fields["gamefile"].startswith("json_2.1.1/valid_unseen/")


def _manifest(tmp_path, splits):
    return load_manifest("toy", bench_toy.write_manifest(tmp_path / "manifest", splits))


def test_pick_keeps_manifest_order_and_skips_rows_it_does_not_name(tmp_path):
    manifest = _manifest(tmp_path, {"train": ["b", "a"], "val": ["c"], "test": ["d"]})
    rows = [(i, i.upper(), f"row {n}") for n, i in enumerate(["a", "x", "b", "c", "d"])]
    assert pick(manifest, rows, "data.json") == {"train": ["B", "A"], "val": ["C"], "test": ["D"]}


def test_pick_names_a_missing_id_its_split_and_how_many_more(tmp_path):
    manifest = _manifest(tmp_path, {"train": ["a", "b"], "val": ["c"], "test": ["d"]})
    with pytest.raises(InputError) as err:
        pick(manifest, [("a", 1, "row 0")], "data.json")
    assert "id 'b' of the train split" in err.value.message
    assert "and 2 more of the manifest's 4 ids" in err.value.message
    assert err.value.where == "data.json"


def test_pick_names_a_duplicated_id_and_both_rows(tmp_path):
    manifest = _manifest(tmp_path, {"train": ["a"], "val": ["c"], "test": ["d"]})
    with pytest.raises(InputError) as err:
        pick(manifest, [("a", 1, "f.json row 0"), ("a", 2, "f.json row 7")], "f.json")
    assert "id 'a' appears twice" in err.value.message and "f.json row 0" in err.value.message
    assert err.value.where == "f.json row 7"


def test_a_manifest_listing_an_id_in_two_splits_is_refused(tmp_path):
    with pytest.raises(InputError, match="listed twice"):
        _manifest(tmp_path, {"train": ["a"], "val": ["a"], "test": ["d"]})


@pytest.fixture
def toy(monkeypatch, tmp_path):
    monkeypatch.setitem(benchmarks.BENCHMARKS, "toy", "helpers.bench_toy")
    manifest = bench_toy.write_manifest(tmp_path / "manifest", {"train": ["t1", "t2"], "val": ["v1"], "test": ["e1"]})
    data = bench_toy.write_data(tmp_path / "data", ["t1", "t2", "v1", "e1", "unused"])
    return tmp_path, data, manifest


def _import(tmp_path, data, manifest, *extra):
    return run_cli("bench", "import", "toy", "--from", str(data), "--manifest", str(manifest),
                   "--out", str(tmp_path / "suite"), *extra)


def test_bench_import_writes_a_suite_that_validates_with_the_manifest_sizes(toy):
    tmp_path, data, manifest = toy
    result = _import(tmp_path, data, manifest)
    assert result.code == 0, result.err
    assert "imported Toy into" in result.out and "2 train / 1 val / 1 test" in result.out
    assert "4 of 5 rows used" in result.out
    suite = load_suite(tmp_path / "suite")
    assert [t.id for t in suite.tasks("train")] == ["t1", "t2"]
    doc = yaml.safe_load((tmp_path / "suite" / "suite.yaml").read_text())
    assert doc["benchmark"]["name"] == "toy" and len(doc["benchmark"]["manifest_sha256"]) == 64
    index = json.loads((tmp_path / "suite" / "assets.json").read_text())
    assert set(index["files"]) == {"@docs/t1.txt", "@docs/t2.txt", "@docs/v1.txt", "@docs/e1.txt"}
    assert not (tmp_path / "suite" / "docs").exists()  # referenced where they lie, not copied


def test_bench_import_refuses_a_non_empty_out_unless_forced(toy):
    tmp_path, data, manifest = toy
    assert _import(tmp_path, data, manifest).code == 0
    again = _import(tmp_path, data, manifest)
    assert again.code == 2 and "exists and is not empty" in again.err and "--force" in again.err
    assert _import(tmp_path, data, manifest, "--force").code == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".suite")]  # no leftovers


def test_a_missing_id_is_exit_2_and_writes_nothing(toy):
    tmp_path, _, manifest = toy
    data = bench_toy.write_data(tmp_path / "short", ["t1", "t2", "v1"])
    result = _import(tmp_path, data, manifest)
    assert result.code == 2
    assert "id 'e1' of the test split" in result.err and "rows.json" in result.err
    assert not (tmp_path / "suite").exists()
    assert not [p for p in tmp_path.iterdir() if ".partial" in p.name]


def test_an_unknown_benchmark_and_a_missing_data_path_are_exit_2(toy):
    tmp_path, data, manifest = toy
    unknown = run_cli("bench", "import", "nope", "--from", str(data))
    assert unknown.code == 2 and "unknown benchmark 'nope'" in unknown.err and "searchqa" in unknown.err
    missing = _import(tmp_path, tmp_path / "absent", manifest)
    assert missing.code == 2 and "does not exist" in missing.err and "rows.json" in missing.err


def test_a_changed_asset_is_caught_by_size_at_load_and_by_hash_at_use(toy):
    tmp_path, data, manifest = toy
    assert _import(tmp_path, data, manifest).code == 0
    suite_dir = tmp_path / "suite"
    task = Task("t1", "q", fields={"files": ["@docs/t1.txt"]})
    assert suite_file(suite_dir, "@docs/t1.txt").read_text() == "document of t1\n"
    (data / "docs" / "t1.txt").write_text("document of T1\n")  # same size, other bytes
    with pytest.raises(InputError, match="sha256 differs"):
        suite_file(suite_dir, "@docs/t1.txt", task.source)
    (data / "docs" / "t2.txt").write_text("a longer document than before\n")
    _, problems = check_suite(suite_dir)
    assert any("'@docs/t2.txt'" in p.message and "changed since the import" in p.message for p in problems)


def test_an_asset_root_from_an_unset_variable_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("TOY_DATA", raising=False)
    suite = tmp_path / "s"
    suite.mkdir()
    (suite / "suite.yaml").write_text("scorer: exact\nassets:\n  docs: ${TOY_DATA}/docs\n")
    (suite / "test.jsonl").write_text('{"id": "a", "input": "q", "expected": "x", "files": ["@docs/a.txt"]}\n')
    _, problems = check_suite(suite)
    assert any("TOY_DATA is not set" in p.message for p in problems)
