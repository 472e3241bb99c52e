"""An eval run directory holding a tools trajectory (images, tool calls, kept files) and a chat
result, as the viewer reads it."""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from pathlib import Path

from skillopt_ci.core.records import TaskResult, Usage, summarize
from skillopt_ci.core.trajectory import Step

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
