"""`bench import officeqa` on the fixture in the upstream layout: the published split sizes, the CSV
cells split on line breaks, the source documents as assets, and one clear line for bad data."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from helpers.cli import run_cli
from skillopt_ci.benchmarks.manifest import load_manifest
from skillopt_ci.benchmarks.packs.officeqa.fixture import DOCS, small_manifest, write_fixture
from skillopt_ci.inputs.suite import load_suite


def bench_import(data: Path, out: Path, *extra: str, env: dict[str, str] | None = None):
    return run_cli("bench", "import", "officeqa", "--from", str(data), "--out", str(out), *extra, env=env)


def rows(data: Path) -> list[dict[str, str]]:
    with (data / "officeqa_full.csv").open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def write_rows(data: Path, records: list[dict[str, str]]) -> None:
    with (data / "officeqa_full.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)


def test_a_fixture_covering_the_published_manifest_imports_and_validates_with_50_24_172(tmp_path):
    data = write_fixture(tmp_path / "data", load_manifest("officeqa"))
    out = tmp_path / "suite"
    result = bench_import(data, out)
    assert result.code == 0, result.err
    assert "imported OfficeQA into" in result.out and "50 train / 24 val / 172 test" in result.out
    suite = load_suite(out)
    assert [len(suite.tasks(s)) for s in ("train", "val", "test")] == [50, 24, 172]
    assert [t.id for t in suite.tasks("train")[:3]] == ["UID0002", "UID0007", "UID0014"]  # manifest order
    (tmp_path / "skills/oqa").mkdir(parents=True)
    (tmp_path / "skills/oqa/SKILL.md").write_text("---\nname: oqa\ndescription: d\n---\nGrep first.\n")
    (tmp_path / "skillopt.yml").write_text(yaml.safe_dump({
        "version": 1, "models": {"target": {"provider": "openai-compatible", "model": "m", "base_url": "http://127.0.0.1:9"}},
        "skills": [{"path": "skills/oqa/SKILL.md", "suite": "suite"}]}))
    assert run_cli("validate", cwd=tmp_path, env={"OPENAI_API_KEY": "sk-test-0000"}).code == 0


def test_the_imported_task_carries_its_files_as_assets_prompt_parts_and_the_suite_its_settings(tmp_path):
    data = write_fixture(tmp_path / "data")
    out = tmp_path / "suite"
    assert bench_import(data, out, "--manifest", str(small_manifest(tmp_path / "m"))).code == 0
    doc = yaml.safe_load((out / "suite.yaml").read_text())
    assert doc["environment"] == {"type": "tools", "tools": ["documents"], "max_turns": 24, "answer_tag": "answer",
                                  "time_limit_s": 1800}
    assert doc["scorer"] == {"type": "officeqa", "variant": "official", "tolerance": 0.0}
    assert doc["assets"] == {"docs": str((data / DOCS).resolve())}
    multi = next(t for t in load_suite(out).tasks("train") if t.id == "UID0014")
    # the \r\n cell is split into two files and two hints
    assert multi.fields["files"] == ["@docs/treasury_bulletin_1982_08.txt", "@docs/treasury_bulletin_1944_01.txt"]
    assert multi.fields["candidate_files"] == "- treasury_bulletin_1982_08.txt\n- treasury_bulletin_1944_01.txt"
    assert multi.fields["source_hints"].count("\n- https://fraser") == 1
    assert multi.metadata == {"difficulty": "hard", "source_files": ["treasury_bulletin_1982_08.txt",
                                                                     "treasury_bulletin_1944_01.txt"],
                              "source_docs": multi.fields["source_hints"].replace("- ", "").split("\n")}
    prompt = load_suite(out).render_prompt(multi)
    assert prompt.startswith("## Question\nAccording to the Treasury Bulletin")
    assert "## Candidate Files\n- treasury_bulletin_1982_08.txt\n- treasury_bulletin_1944_01.txt\n\n## Source Hints" in prompt
    index = json.loads((out / "assets.json").read_text())
    assert set(index["files"]) == {f"@docs/{n}" for n in ("treasury_bulletin_1944_01.txt", "treasury_bulletin_1950_02.txt",
                                                          "treasury_bulletin_1982_08.txt")}


def test_the_csv_can_be_given_itself_and_the_corpus_by_officeqa_docs_dir(tmp_path):
    data = write_fixture(tmp_path / "data")
    corpus = tmp_path / "corpus"
    (data / DOCS).rename(corpus)
    manifest = str(small_manifest(tmp_path / "m"))
    missing = bench_import(data / "officeqa_full.csv", tmp_path / "s1", "--manifest", manifest)
    assert missing.code == 2 and "no parsed corpus (treasury_bulletin_YYYY_MM.txt files) found" in missing.err
    result = bench_import(data / "officeqa_full.csv", tmp_path / "s2", "--manifest", manifest,
                          env={"OFFICEQA_DOCS_DIR": str(corpus)})
    assert result.code == 0, result.err
    assert yaml.safe_load((tmp_path / "s2/suite.yaml").read_text())["assets"] == {"docs": "${OFFICEQA_DOCS_DIR}"}


def test_a_relative_officeqa_docs_dir_is_refused_at_import(tmp_path, monkeypatch):
    """The suite names the variable and reads it again when it runs, from its own folder: a relative
    value that worked at import would name another folder then."""
    data = write_fixture(tmp_path / "data")
    (data / DOCS).rename(tmp_path / "corpus")
    monkeypatch.chdir(tmp_path)
    result = bench_import(data / "officeqa_full.csv", tmp_path / "s", "--manifest", str(small_manifest(tmp_path / "m")),
                          env={"OFFICEQA_DOCS_DIR": "corpus"})
    assert result.code == 2 and "OFFICEQA_DOCS_DIR must be an absolute path, got 'corpus'" in result.err
    assert not (tmp_path / "s").exists()


def test_a_missing_id_is_exit_2_naming_it_and_the_csv(tmp_path):
    data = write_fixture(tmp_path / "data")
    write_rows(data, [r for r in rows(data) if r["uid"] != "UID0007"])
    result = bench_import(data, tmp_path / "suite", "--manifest", str(small_manifest(tmp_path / "m")))
    assert result.code == 2
    assert "id 'UID0007' of the train split" in result.err and "officeqa_full.csv" in result.err
    assert not (tmp_path / "suite").exists()


def test_a_duplicated_id_is_exit_2_naming_both_lines(tmp_path):
    data = write_fixture(tmp_path / "data")
    records = rows(data)
    write_rows(data, [*records, records[1]])
    result = bench_import(data, tmp_path / "suite", "--manifest", str(small_manifest(tmp_path / "m")))
    assert result.code == 2
    assert "id 'UID0007' appears twice" in result.err and "officeqa_full.csv line 3" in result.err


@pytest.mark.parametrize("change, message", [
    (lambda r: r.update(source_files="treasury_bulletin_1901_01.txt"), "source file treasury_bulletin_1901_01.txt not found"),
    (lambda r: r.update(source_files="../secret.txt"), "source file '../secret.txt' is not a bare file name"),
    (lambda r: r.update(answer=" "), "the question or the answer is empty"),
    (lambda r: r.update(source_files=""), "source_files is empty"),
])
def test_a_bad_row_is_exit_2_naming_the_line_and_uid(tmp_path, change, message):
    data = write_fixture(tmp_path / "data")
    records = rows(data)
    change(records[0])
    write_rows(data, records)
    result = bench_import(data, tmp_path / "suite", "--manifest", str(small_manifest(tmp_path / "m")))
    assert result.code == 2 and message in result.err
    assert "officeqa_full.csv line 2 (uid UID0002)" in result.err


def test_a_csv_without_the_columns_or_a_folder_without_the_csv_is_exit_2(tmp_path):
    data = write_fixture(tmp_path / "data")
    (data / "officeqa_full.csv").write_text("id,q\n1,2\n")
    result = bench_import(data, tmp_path / "suite")
    assert result.code == 2 and "no column uid" in result.err
    empty = tmp_path / "empty"
    empty.mkdir()
    result = bench_import(empty, tmp_path / "suite")
    assert result.code == 2 and "no officeqa_full.csv in this folder" in result.err
