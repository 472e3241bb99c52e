"""The ``spreadsheet`` scorer against hand-computed results of the official SpreadsheetBench
evaluator: synthetic workbooks for each rule, the reference system's variant where it disagrees,
and the real sample tasks scored against their own answer files."""

from __future__ import annotations

import asyncio
import datetime
import shutil
from pathlib import Path

import openpyxl
import pytest

from helpers.paths import DATA
from skillopt_ci.benchmarks.packs.spreadsheetbench.compare import same_value, transform
from skillopt_ci.core.errors import InputError, ScoringError
from skillopt_ci.core.task import Task
from skillopt_ci.core.trajectory import Rollout
from skillopt_ci.scorers import build_scorer

SAMPLE = DATA / "benchmarks" / "spreadsheetbench"


def book(path: Path, sheets: dict[str, dict[str, object]]) -> Path:
    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    for title, cells in sheets.items():
        ws = wb.create_sheet(title)
        for cell, value in cells.items():
            ws[cell] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    wb.save(path)
    return path


def case_task(task_id: str, position: str, goldens: list[str], answer_sheet: str | None = None) -> Task:
    expected = {"answer_position": position, "golden": [{"path": g} for g in goldens]}
    if answer_sheet:
        expected["answer_sheet"] = answer_sheet
    cases = [{"input": f"cases/{i}/input.xlsx", "output": f"cases/{i}/output.xlsx"} for i in range(1, len(goldens) + 1)]
    return Task(task_id, "instruction", expected=expected, fields={"id": task_id, "cases": cases, "expected": expected})


def score(suite: Path, workspace: Path, task: Task, **options):
    scorer = build_scorer({"type": "spreadsheet", **options}, suite)
    return asyncio.run(scorer.ascore_rollout(Rollout(output="", workspace=workspace), task))


def compare(tmp_path: Path, gold: dict, pred: dict, position: str, answer_sheet: str | None = None, **options):
    """Score one case: golden workbook ``gold``, output workbook ``pred`` (sheet -> cells)."""
    suite, workspace = tmp_path / "suite", tmp_path / "ws"
    book(suite / "gold.xlsx", gold)
    if pred is not None:
        book(workspace / "cases/1/output.xlsx", pred)
    else:
        workspace.mkdir(parents=True, exist_ok=True)
    return score(suite, workspace, case_task("t", position, ["gold.xlsx"], answer_sheet), **options)


# --- the value rules, as the official transform computes them -----------------------------------

def test_numbers_and_numeric_strings_compare_after_rounding_to_two_decimals():
    assert transform(3.14159) == 3.14 and transform("3.14159") == 3.14 and transform(7) == 7.0
    assert same_value(2.675, 2.67)  # float rounding, as upstream: 2.675 is stored just below
    assert same_value(1.004, 1.0) and same_value("10", 10) and same_value(True, 1)
    assert not same_value(1.006, 1.0)
    assert not same_value("abc", "ABC")


def test_a_datetime_is_its_excel_serial_day_and_a_time_its_string_without_seconds():
    assert transform(datetime.datetime(2024, 1, 15, 9, 0)) == 45306.0
    assert transform(datetime.datetime(2024, 1, 15, 18, 0)) == 45307.0  # 45306.75 rounds up
    assert same_value(datetime.datetime(2024, 1, 15), 45306)  # a date and its serial number agree
    assert transform(datetime.time(9, 30, 15)) == "09:30"
    assert same_value(datetime.time(9, 30, 15), datetime.time(9, 30, 59))
    assert not same_value(datetime.time(9, 30), "09:30:00")


def test_empty_string_and_none_are_equal_but_zero_is_not_empty():
    assert same_value("", None) and same_value(None, "") and same_value(None, None)
    assert not same_value(0, None) and not same_value(0, "")


def test_the_rounding_rule_through_real_workbooks(tmp_path):
    result = compare(tmp_path, {"S": {"A1": 10.001, "A2": "x"}}, {"S": {"A1": "10.004", "A2": "x"}}, "A1:A2")
    assert result.value == 1.0 and result.passed
    wrong = compare(tmp_path / "b", {"S": {"A1": 10.001}}, {"S": {"A1": 10.01}}, "A1")
    assert wrong.value == 0.0 and "S!A1 differs" in wrong.feedback and "10.01" in wrong.feedback


def test_dates_times_and_empty_cells_through_real_workbooks(tmp_path):
    gold = {"S": {"A1": datetime.datetime(2024, 3, 1, 8, 0), "A2": datetime.time(14, 5, 7), "A3": ""}}
    pred = {"S": {"A1": datetime.datetime(2024, 3, 1, 11, 0), "A2": datetime.time(14, 5, 50)}}
    assert compare(tmp_path, gold, pred, "A1:A3").passed


def test_a_formula_the_model_wrote_reads_as_its_cached_value_none(tmp_path):
    gold = {"S": {"A1": 2, "A2": 3, "B1": 5}}
    pred = {"S": {"A1": 2, "A2": 3, "B1": "=A1+A2"}}  # saved by openpyxl: no cached value
    result = compare(tmp_path, gold, pred, "B1")
    assert not result.passed and "S!B1 differs (the output has None)" in result.feedback


def test_multi_range_positions_and_quoted_sheet_names(tmp_path):
    gold = {"First": {"A1": 1}, "My Sheet": {"B2": "ok", "C3": 3}}
    pred = {"First": {"A1": 1}, "My Sheet": {"B2": "ok", "C3": 3}}
    assert compare(tmp_path, gold, pred, "A1,'My Sheet'!B2:C3").passed
    pred["My Sheet"]["C3"] = 4
    result = compare(tmp_path / "b", gold, pred, "A1,'My Sheet'!B2:C3")
    assert not result.passed and "My Sheet!C3 differs" in result.feedback


def test_a_position_without_a_sheet_is_read_on_the_goldens_first_sheet(tmp_path):
    gold = {"Main": {"A1": 1}, "Other": {"A1": 2}}
    pred = {"Other": {"A1": 2}, "Main": {"A1": 1}}  # other order: still the golden's first sheet
    assert compare(tmp_path, gold, pred, "A1").passed


def test_a_sheet_missing_from_the_output_fails_the_case(tmp_path):
    result = compare(tmp_path, {"Data": {"A1": 1}, "Output": {"A1": 5}}, {"Data": {"A1": 1}}, "'Output'!A1")
    assert not result.passed and "worksheet 'Output' not found in the output" in result.feedback


def test_a_missing_output_file_fails_and_a_rollout_without_workspace_cannot_be_scored(tmp_path):
    result = compare(tmp_path, {"S": {"A1": 1}}, None, "A1")
    assert not result.passed and "no output file cases/1/output.xlsx" in result.feedback
    scorer = build_scorer({"type": "spreadsheet"}, tmp_path)
    with pytest.raises(ScoringError, match="codegen"):
        asyncio.run(scorer.ascore_rollout(Rollout(output="x"), case_task("t", "A1", ["gold.xlsx"])))


def test_a_piece_with_two_sheet_marks_fails_the_official_case(tmp_path):
    result = compare(tmp_path, {"S": {"A1": 1}}, {"S": {"A1": 1}}, "S!S!A1")
    assert not result.passed and "cannot read" in result.feedback


# --- the reference system's variant --------------------------------------------------------------

def test_reference_variant_compares_no_cell_when_the_position_already_names_the_sheet(tmp_path):
    """answer_sheet Output + position 'Output'!A1:B2: the reference port reads the range as
    Output'!A1:B2, which holds no cell, so an unchanged input passes; the official one fails it."""
    gold = {"Input": {"A1": "x"}, "Output": {"A1": "name", "B2": 42}}
    unchanged_input = {"Input": {"A1": "x"}, "Output": {}}
    official = compare(tmp_path / "o", gold, unchanged_input, "'Output'!A1:B2", answer_sheet="Output")
    reference = compare(tmp_path / "r", gold, unchanged_input, "'Output'!A1:B2", answer_sheet="Output",
                        variant="reference")
    assert not official.passed and "Output!A1 differs" in official.feedback
    assert reference.passed and reference.value == 1.0
    # Without the sheet in the output the reference variant fails too.
    gone = compare(tmp_path / "g", gold, {"Input": {"A1": "x"}}, "'Output'!A1:B2", answer_sheet="Output",
                   variant="reference")
    assert not gone.passed


def test_reference_variant_agrees_when_the_position_has_no_sheet(tmp_path):
    gold = {"S": {"A1": 1, "A2": 2}}
    for variant in ("official", "reference"):
        assert compare(tmp_path / variant, gold, {"S": {"A1": 1, "A2": 2}}, "A1:A2", variant=variant).passed
        assert not compare(tmp_path / f"{variant}2", gold, {"S": {"A1": 1}}, "A1:A2", variant=variant).passed


def test_unknown_variant_or_report_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="variant must be one of official, reference"):
        build_scorer({"type": "spreadsheet", "variant": "skillopt"}, tmp_path)
    with pytest.raises(InputError, match="report must be one of hard, soft"):
        build_scorer({"type": "spreadsheet", "report": "mean"}, tmp_path)


# --- several cases: hard and soft ----------------------------------------------------------------

def test_hard_needs_every_case_and_report_soft_gives_the_fraction(tmp_path):
    suite, workspace = tmp_path / "suite", tmp_path / "ws"
    goldens = []
    for i, value in enumerate((1, 2, 3), 1):
        goldens.append(str(book(suite / f"g{i}.xlsx", {"S": {"A1": value}}).relative_to(suite)))
        book(workspace / f"cases/{i}/output.xlsx", {"S": {"A1": value if i != 2 else 99}})
    task = case_task("t", "A1", goldens)
    hard = score(suite, workspace, task)
    assert hard.value == 0.0 and not hard.passed
    assert hard.feedback.startswith("test cases passed: 2 of 3 (hard 0, soft 0.67); case 2: S!A1 differs")
    soft = score(suite, workspace, task, report="soft")
    assert soft.value == pytest.approx(2 / 3) and not soft.passed


def test_a_golden_changed_since_the_import_is_an_input_error(tmp_path):
    suite, workspace = tmp_path / "suite", tmp_path / "ws"
    book(suite / "g.xlsx", {"S": {"A1": 1}})
    book(workspace / "cases/1/output.xlsx", {"S": {"A1": 1}})
    task = case_task("t", "A1", ["g.xlsx"])
    task.expected["golden"][0]["sha256"] = "0" * 64
    with pytest.raises(InputError, match="changed since the import"):
        score(suite, workspace, task)


# --- the real sample tasks, against their own answer files ---------------------------------------

@pytest.mark.parametrize(("task_id", "position"), [("10452", "E4:E12"), ("325-44", "'Output'!A1:G10")])
def test_the_real_sample_answer_passes_against_itself_and_the_input_fails(tmp_path, task_id, position):
    folder = SAMPLE / "spreadsheet" / task_id
    goldens = [f"spreadsheet/{task_id}/{n}_{task_id}_answer.xlsx" for n in (1, 2, 3)]
    task = case_task(task_id, position, goldens, answer_sheet="Output" if task_id == "325-44" else None)
    for kind, expect in (("answer", True), ("input", False)):
        workspace = tmp_path / kind
        for n in (1, 2, 3):
            target = workspace / f"cases/{n}/output.xlsx"
            target.parent.mkdir(parents=True)
            shutil.copyfile(folder / f"{n}_{task_id}_{kind}.xlsx", target)
        result = score(SAMPLE, workspace, task)
        assert result.passed is expect, result.feedback
        assert result.value == (1.0 if expect else 0.0)


def test_the_real_sheet_level_sample_shows_the_reference_variant_passing_an_unchanged_input(tmp_path):
    task_id = "325-44"
    goldens = [f"spreadsheet/{task_id}/{n}_{task_id}_answer.xlsx" for n in (1, 2, 3)]
    task = case_task(task_id, "'Output'!A1:G10", goldens, answer_sheet="Output")
    workspace = tmp_path / "ws"
    for n in (1, 2, 3):
        target = workspace / f"cases/{n}/output.xlsx"
        target.parent.mkdir(parents=True)
        shutil.copyfile(SAMPLE / "spreadsheet" / task_id / f"{n}_{task_id}_input.xlsx", target)
    assert not score(SAMPLE, workspace, task).passed
    assert score(SAMPLE, workspace, task, variant="reference").passed
