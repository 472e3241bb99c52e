"""A rollout's trajectory in the viewer's bundle and the HTML report: numbered steps, tool-call
arguments pretty-printed, images embedded only when they are raster images of a bounded size,
and every string from a model, a task or a tool carried as inert data.

``write_tools_run`` writes by hand the run directory of an eval on a tools environment (the
browser tests open its report too)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers.viewer_run import (
    BAD_ARGS,
    SCRIPT_RESULT,
    SVG,
    TOOL_ARGS,
    png,
    write_tools_run,
)
from skillopt_ci.core.trajectory import Step
from skillopt_ci.viewer.bundle import TEXT_CHARS, build_bundle
from skillopt_ci.viewer.report import write_html_report
from skillopt_ci.viewer.steps import MAX_STEPS, ImageStore, sniff_image, view_trajectory


@pytest.fixture
def tools_run(tmp_path) -> tuple[Path, dict[str, str]]:
    run = tmp_path / "runs" / "tools"
    return run, write_tools_run(run)


def results_of(bundle: dict) -> dict[str, dict]:
    return {r["task_id"]: r for r in bundle["evaluations"][0]["results"]}


def test_steps_are_numbered_and_tool_arguments_pretty_printed(tools_run):
    run, _ = tools_run
    results = results_of(build_bundle(run))
    steps = results["csv-mean"]["trajectory"]
    assert [s["n"] for s in steps] == list(range(1, 12))
    assert [s["kind"] for s in steps] == ["model", "tool_call", "tool_result", "tool_call", "tool_result", "tool_call",
                                          "tool_result", "observation", "observation", "action", "error"]
    assert steps[1]["arguments"] == json.dumps(TOOL_ARGS, indent=2) and steps[1]["arguments_json"] is True
    assert steps[3]["arguments"] == BAD_ARGS and steps[3]["arguments_json"] is False  # shown raw, flagged
    assert steps[4]["is_error"] is True and steps[2]["text"] == SCRIPT_RESULT
    assert steps[7]["reward"] == 0.5 and steps[7]["done"] is False and steps[0]["usage"]["input_tokens"] == 120
    assert results["csv-mean"]["reward"] == 0.5
    # Files the rollout wrote, with a size when the run directory kept a copy (and only inside it).
    assert results["csv-mean"]["files"] == [{"path": "out.txt", "bytes": 4}, {"path": "big.csv", "bytes": None},
                                            {"path": "../../../run.json", "bytes": None}]
    # A chat result reads exactly as before: none of the new keys.
    assert not {"trajectory", "reward", "transcript", "files"} & set(results["chat-task"])


def test_only_raster_images_of_a_bounded_size_are_embedded(tools_run):
    run, names = tools_run
    bundle = build_bundle(run)
    images = bundle["images"]
    steps = results_of(bundle)["csv-mean"]["trajectory"]
    assert steps[7]["images"] == [names["png"], names["svg"]] and steps[8]["images"][2] == names["png"]
    shown = images[names["png"]]
    assert shown["src"].startswith("data:image/png;base64,") and shown["media_type"] == "image/png"
    for key in ("svg", "svg_as_png"):  # by their first bytes, whatever the name says
        assert "src" not in images[names[key]]
        assert images[names[key]]["note"] == "not shown: not a PNG, JPEG, GIF or WebP image"
    assert "more than the report's 1,000,000 per image" in images[names["big"]]["note"]
    assert len(images) == 4  # the PNG shown twice is embedded once


def test_images_outside_the_run_directory_are_not_read(tmp_path):
    run = tmp_path / "run"
    (run / "versions/v000/val/images").mkdir(parents=True)
    outside = tmp_path / "secret.png"
    outside.write_bytes(png(2, 2))
    os.symlink(outside, run / "versions/v000/val/images/link.png")
    (run / "images").mkdir()
    (run / "images/top.png").write_bytes(png(3, 3))
    store = ImageStore(run)
    val = run / "versions/v000/val"
    assert store.ref(val, "images/top.png") == "images/top.png"  # found in a parent, up to the run
    assert "src" in store.images["images/top.png"]
    for name in ("images/link.png", "images/../../../secret.png", "/etc/passwd", "../secret.png", "images/.hidden"):
        key = store.ref(val, name)
        assert store.images[key] == {"name": name, "note": "not in the run directory"}, name


def test_the_report_stops_embedding_images_at_its_total(tmp_path):
    run = tmp_path / "run"
    (run / "images").mkdir(parents=True)
    for i in range(3):
        (run / f"images/{i}.png").write_bytes(png(10, 10, (i, 0, 0)))
    size = len(png(10, 10))
    store = ImageStore(run, total=2 * size)
    keys = [store.ref(run, f"images/{i}.png") for i in range(3)]
    assert ["src" in store.images[k] for k in keys] == [True, True, False]
    assert store.images[keys[2]]["note"] == f"not shown: the report's {2 * size:,} bytes of images are spent"


@pytest.mark.parametrize(("data", "media_type"), [
    (png(1, 1), "image/png"), (b"\xff\xd8\xff\xe0JFIF", "image/jpeg"), (b"GIF89a....", "image/gif"),
    (b"RIFF\0\0\0\0WEBPVP8 ", "image/webp"), (SVG, None), (b"<?xml version='1.0'?><svg/>", None),
    (b"<html><script>", None), (b"RIFF\0\0\0\0WAVE", None), (b"", None),
])
def test_image_types_are_told_by_their_first_bytes(data, media_type):
    assert sniff_image(data) == media_type


def test_the_html_report_carries_the_trajectory_as_inert_data(tools_run, tmp_path):
    run, names = tools_run
    html_file = tmp_path / "report.html"
    write_html_report(run, html_file)
    text = html_file.read_text(encoding="utf-8")
    # Nothing from the tool results or the SVG became markup: two script elements (data and app).
    assert text.count("<script") == 2 and "<img" not in text and "<svg" not in text
    assert "window.__pwned=1" in text and "<script>window.__pwned" not in text
    assert "onload" not in text  # the SVG file is not embedded at all
    assert "\\u003cscript>window.__pwned=1\\u003c/script>mean = 4.5" in text
    assert "data:image/png;base64," in text  # the thumbnail
    assert "img-src data:;" in text


def test_long_step_texts_are_cut_in_the_report_and_counted(tmp_path):
    run = tmp_path / "run"
    write_tools_run(run)
    lines = (run / "results.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["trajectory"][0]["text"] = "y" * (TEXT_CHARS + 100)
    (run / "results.jsonl").write_text(json.dumps(first) + "\n" + lines[1] + "\n")
    bundle = build_bundle(run)
    step = results_of(bundle)["csv-mean"]["trajectory"][0]
    assert step["text"].startswith("y" * TEXT_CHARS) and "truncated in this report" in step["text"]
    assert bundle["limits"]["truncated"] >= 1


def test_a_very_long_trajectory_keeps_its_start_and_end_with_a_gap_between(tmp_path):
    steps = [Step("model", f"turn {i}").to_dict() for i in range(MAX_STEPS + 50)]
    shown = view_trajectory(steps, lambda v: v, ImageStore(tmp_path), tmp_path)
    half = MAX_STEPS // 2
    assert len(shown) == MAX_STEPS + 1
    assert shown[half] == {"kind": "gap", "n": half + 1, "omitted": 50}
    assert [s["n"] for s in shown[:half]] == list(range(1, half + 1))
    assert shown[-1]["n"] == MAX_STEPS + 50 and shown[-1]["text"] == f"turn {MAX_STEPS + 49}"


def test_a_malformed_step_is_shown_as_an_error_not_a_crash(tmp_path):
    shown = view_trajectory(["oops", {"kind": "tool_call", "arguments": {"a": 1}, "images": "x"}],
                            lambda v: v, ImageStore(tmp_path), tmp_path)
    assert shown[0] == {"n": 1, "kind": "error", "text": '(not a step: "oops")'}
    assert shown[1] == {"n": 2, "kind": "tool_call", "arguments": '{\n  "a": 1\n}', "arguments_json": True}
