"""A rollout's trajectory in the viewer's bundle and the HTML report: numbered steps, tool-call
arguments pretty-printed, images embedded only when they are raster images of a bounded size,
and every string from a model, a task or a tool carried as inert data.

``write_tools_run`` writes by hand the run directory of an eval on a tools environment (the
browser tests open its report too)."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import zlib
from pathlib import Path

import pytest

from skillopt_ci.core.records import TaskResult, Usage, summarize
from skillopt_ci.core.trajectory import Step
from skillopt_ci.viewer.bundle import TEXT_CHARS, build_bundle
from skillopt_ci.viewer.report import write_html_report
from skillopt_ci.viewer.steps import MAX_STEPS, ImageStore, sniff_image, view_trajectory

SCRIPT_RESULT = "<script>window.__pwned=1</script>mean = 4.5"
MARKUP_RESULT = '[click me](http://example.com) **bold** <img src=x onerror="window.__pwned=2"> @octocat #12'
SVG = b'<svg xmlns="http://www.w3.org/2000/svg" onload="window.__pwned=3"><circle r="5"/></svg>'
TOOL_ARGS = {"code": "import csv\nprint(sum(float(r['x']) for r in csv.DictReader(open('data.csv'))) / 2)"}
BAD_ARGS = '{"path": "data.csv", oops'
LONG_OUTPUT = "\n".join(f"row {i}: {'x' * 40}" for i in range(80))


def png(width: int, height: int, rgb: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A real PNG of one colour."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\0" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def keep(run: Path, data: bytes, ext: str) -> str:
    name = f"images/{hashlib.sha256(data).hexdigest()}{ext}"
    (run / name).parent.mkdir(parents=True, exist_ok=True)
    (run / name).write_bytes(data)
    return name


def tools_trajectory(run: Path) -> tuple[list[dict], dict[str, str]]:
    """The steps of a tools rollout that used python over a CSV, and the image names it kept."""
    names = {"png": keep(run, png(40, 30), ".png"), "svg": keep(run, SVG, ".svg"),
             "svg_as_png": keep(run, SVG + b" ", ".png"), "big": keep(run, png(1, 1) + b"\0" * 1_100_000, ".png")}
    steps = [
        Step("model", "I will compute the mean with python.", usage=Usage(120, 30), elapsed_s=0.8),
        Step("tool_call", name="python", arguments=json.dumps(TOOL_ARGS), call_id="call_1", elapsed_s=0.81),
        Step("tool_result", SCRIPT_RESULT, name="python", call_id="call_1", elapsed_s=1.2),
        Step("tool_call", name="read_file", arguments=BAD_ARGS, call_id="call_2", elapsed_s=1.5),
        Step("tool_result", "bad arguments: not valid JSON", name="read_file", call_id="call_2", is_error=True,
             elapsed_s=1.5),
        Step("tool_call", name="shell", arguments=json.dumps({"cmd": "cat data.csv"}), call_id="call_3", elapsed_s=2.0),
        Step("tool_result", LONG_OUTPUT, name="shell", call_id="call_3", elapsed_s=2.1),
        Step("observation", MARKUP_RESULT, reward=0.5, done=False, images=(names["png"], names["svg"]), elapsed_s=2.2),
        Step("observation", "more pictures", images=(names["svg_as_png"], names["big"], names["png"]), elapsed_s=2.3),
        Step("action", "submit 4.5", elapsed_s=2.4),
        Step("error", "time limit: the rollout ran 300 s", elapsed_s=300.0),
    ]
    return [s.to_dict() for s in steps], names


def write_tools_run(run: Path) -> dict[str, str]:
    """An eval run directory with one tools result (a trajectory, images, kept files) and one chat
    result (no trajectory). Returns the kept image names."""
    run.mkdir(parents=True)
    trajectory, names = tools_trajectory(run)
    results = [
        TaskResult("csv-mean", 0, "What is the mean of column x in data.csv?", "4.5", 0.0, False,
                   feedback="expected 4.25", usage=Usage(500, 80), latency_s=2.4, finish_reason="stop",
                   trajectory=trajectory, reward=0.5, transcript="[model] I will compute…\n[python] mean = 4.5",
                   files=["out.txt", "big.csv", "../../../run.json"]),
        TaskResult("chat-task", 0, "Say hi", "hi", 1.0, True, usage=Usage(10, 2), latency_s=0.1, finish_reason="stop"),
    ]
    (run / "run.json").write_text(json.dumps({"kind": "eval", "split": "val", "task_ids": ["csv-mean", "chat-task"],
                                              "repeats": 1}))
    (run / "skill.md").write_text("# csv skill\nUse python.\n")
    (run / "files/csv-mean/0").mkdir(parents=True)
    (run / "files/csv-mean/0/out.txt").write_text("4.5\n")  # big.csv was too big to keep
    (run / "results.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n" for r in results))
    summary = summarize(results, ["csv-mean", "chat-task"], skill={"name": "csv-skill", "hash": "0" * 64, "tokens": 9},
                        suite={"name": "csv", "hash": "1" * 64}, split="val",
                        model={"provider": "openai", "model": "sim"}, repeats=1, wall_time_s=3.0)
    (run / "summary.json").write_text(json.dumps(summary.to_dict()))
    return names


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
