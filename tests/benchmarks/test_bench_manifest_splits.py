"""A custom benchmark manifest with an empty or missing train or val split (issue 21): the import
writes the splits it has, ``bench run`` and ``eval`` on the test split work, and only ``train``
refuses (exit 2, saying it needs train and val). A manifest that names no id is refused."""

from __future__ import annotations

import json

import pytest
import yaml

from helpers import bench_fake
from helpers.cli import run_cli
from helpers.project import write_project
from skillopt_ci.sim import ScriptedModelServer

TEST_IDS = [f"e{i}" for i in range(1, 5)]  # e2, e4 are answered right: 2 of 4


def custom_manifest(folder, splits: dict[str, list[str]]):
    folder.mkdir(parents=True)
    (folder / "split_manifest.json").write_text(json.dumps({"benchmark": "fakeqa"}))
    for split, ids in splits.items():
        (folder / split).mkdir()
        (folder / split / "items.json").write_text(json.dumps([{"id": i} for i in ids]))
    return folder


@pytest.fixture
def fake(tmp_path, monkeypatch):
    published = tmp_path / "published"
    bench_fake.register(monkeypatch, published)
    # the data holds every id; the custom manifests below name some of them
    bench_fake.write_manifest(published, "fakeqa", {"train": ["t1"], "val": ["v1"], "test": TEST_IDS})
    data = bench_fake.write_fixture(tmp_path / "data")
    with ScriptedModelServer(bench_fake.policy) as server:
        root = write_project(tmp_path / "proj", server.openai_base_url)
        yield root, data, server


def bench_import(root, data, manifest):
    return run_cli("bench", "import", "fakeqa", "--from", str(data), "--manifest", str(manifest),
                   "--out", str(root / "eval_suites" / "fakeqa"))


@pytest.mark.parametrize("splits", [
    {"test": TEST_IDS},  # no train/ or val/ folder at all
    {"train": [], "val": [], "test": TEST_IDS},  # both present and empty
    {"train": ["t1"], "val": [], "test": TEST_IDS},  # an empty val only
], ids=["test-only", "empty-train-and-val", "empty-val"])
def test_a_manifest_without_train_or_val_makes_a_suite_for_eval_and_bench_run(fake, tmp_path, splits):
    root, data, server = fake
    imported = bench_import(root, data, custom_manifest(tmp_path / "manifest", splits))
    assert imported.code == 0, imported.err  # the old code: exit 2, "manifest has no train, val split"
    sizes = " / ".join(f"{len(splits.get(s, []))} {s}" for s in ("train", "val", "test"))
    assert f"imported Fake QA into {root / 'eval_suites' / 'fakeqa'}: {sizes}" in imported.out
    assert "the suite serves eval and bench run; train needs both splits" in imported.out
    suite = root / "eval_suites" / "fakeqa"
    assert sorted(p.name for p in suite.glob("*.jsonl")) == sorted(f"{s}.jsonl" for s, ids in splits.items() if ids)

    (root / "skill.md").write_text("# Answer\n\nAnswer the question.\n")
    ran = run_cli("bench", "run", "--skill", "skill.md", "--out", "out", "--quiet", cwd=root)
    assert ran.code == 0, ran.err
    row = next(line for line in ran.out.splitlines() if line.startswith("Fake QA"))
    assert "0.500" in row and "n 4 ·" in row and "0 errors" in row
    assert server.call_count == 4

    config = yaml.safe_load((root / "skillopt.yml").read_text())
    config["skills"] = [{"path": "skills/ticket-triage/SKILL.md", "suite": "eval_suites/fakeqa"}]
    config["models"]["optimizer"] = dict(config["models"]["target"])
    (root / "skillopt.yml").write_text(yaml.safe_dump(config))
    evaluated = run_cli("eval", "ticket-triage", "--split", "test", "--quiet", "--out", str(tmp_path / "ev"), cwd=root)
    assert evaluated.code == 0, evaluated.err
    assert json.loads((tmp_path / "ev" / "summary.json").read_text())["n_tasks"] == 4

    calls = server.call_count
    trained = run_cli("train", "--skill", "ticket-triage", "--out", str(tmp_path / "run"), "--quiet", cwd=root)
    missing = "train" if not splits.get("train") else "val"
    assert trained.code == 2, trained.err
    assert f"the {missing!r} split has no tasks; training needs both train and val" in trained.err
    assert server.call_count == calls and not (tmp_path / "run").exists()


def test_a_manifest_that_names_no_id_is_refused(fake, tmp_path):
    root, data, _ = fake
    imported = bench_import(root, data, custom_manifest(tmp_path / "manifest", {"train": [], "val": [], "test": []}))
    assert imported.code == 2
    assert "the manifest names no ids" in imported.err and str(tmp_path / "manifest") in imported.err
    assert not (root / "eval_suites" / "fakeqa").exists()
