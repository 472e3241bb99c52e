"""A task's image is sent as what its bytes are (issue 21): a JPEG named ``.png`` goes as
``image/jpeg``, and a file that is no PNG, JPEG, GIF or WebP is refused (exit 2) at its task's
line, before any model call — never sent as ``data:image/png``."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from PIL import Image

from helpers.cli import run_cli
from helpers.project import write_project
from helpers.wire import tiny_png
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.task import Task
from skillopt_ci.envs.base import task_images
from skillopt_ci.inputs.images import image_type
from skillopt_ci.sim import ScriptedModelServer

SUITE = "eval_suites/ticket-triage"


def tiny(kind: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (2, 2), (200, 30, 10)).save(out, format=kind)
    return out.getvalue()


def with_image(project: Path, name: str, data: bytes, line: int = 3) -> None:
    """Give the task on ``line`` of the val split the image ``img/name`` holding ``data``."""
    (project / SUITE / "img").mkdir(exist_ok=True)
    (project / SUITE / "img" / name).write_bytes(data)
    val = project / SUITE / "val.jsonl"
    lines = val.read_text().splitlines()
    lines[line - 1] = json.dumps({**json.loads(lines[line - 1]), "images": [f"img/{name}"]})
    val.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(("kind", "media"), [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("GIF", "image/gif"),
                                             ("WEBP", "image/webp")])
def test_each_kind_is_known_by_its_bytes(kind, media):
    assert image_type(tiny(kind)[:12]) == media


@pytest.mark.parametrize("data", [b"", b"not an image at all", b"<svg xmlns='http://www.w3.org/2000/svg'/>",
                                  b"BM\x1e\x00\x00\x00", b"RIFF\x00\x00\x00\x00WAVEfmt "])
def test_what_is_no_image_a_model_api_takes_is_known_as_none(data):
    assert image_type(data[:12]) is None


def test_a_jpeg_named_png_is_sent_as_a_jpeg(tmp_path):
    jpeg = tiny("JPEG")
    seen: list[list[str]] = []

    def look(request):
        seen.append([image["media_type"] for image in request.images])
        return "billing/P3"

    with ScriptedModelServer(look) as server:
        project = write_project(tmp_path / "p", server.openai_base_url)
        with_image(project, "screen.png", jpeg)
        res = run_cli("eval", "ticket-triage", "--quiet", "--out", str(tmp_path / "run"), cwd=project)
    assert res.code == 0, res.err
    assert ["image/jpeg"] in seen and ["image/png"] not in seen  # the old code sent image/png
    assert all(images in ([], ["image/jpeg"]) for images in seen)


def test_a_text_file_named_png_is_refused_at_its_task_line_before_any_call(tmp_path):
    with ScriptedModelServer(lambda request: "billing/P3") as server:
        project = write_project(tmp_path / "p", server.openai_base_url)
        with_image(project, "chart.png", b"chart: sales went up in March\n")
        expected = (f"{SUITE}/val.jsonl:3: task 'val-03': images 'img/chart.png' is not a PNG, JPEG, GIF or "
                    "WebP image (it starts with text)")
        ev = run_cli("eval", "ticket-triage", "--quiet", "--out", str(tmp_path / "run"), cwd=project)
        assert ev.code == 2 and expected in ev.err, ev.err
        val = run_cli("validate", cwd=project)
        assert val.code == 2 and expected in val.err, val.err
        assert server.calls == [] and not (tmp_path / "run").exists()


def test_an_image_read_when_the_rollout_runs_is_checked_too(tmp_path):
    """A benchmark's page images are assets, checked against their index at load and read only
    when the rollout runs: a file that is no image is refused there, naming the task and file."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "page.png").write_bytes(b"\x00\x01\x02\x03garbage")
    (suite / "ok.gif").write_bytes(tiny("GIF"))
    task = Task(id="q1", input="What is the date?", fields={"images": ["ok.gif", "page.png"]},
                source="eval_suites/docs/test.jsonl:7")
    with pytest.raises(InputError) as caught:
        task_images(task, suite)
    error = caught.value
    assert error.exit_code == 2 and error.where == "eval_suites/docs/test.jsonl:7"
    assert "task 'q1': image 'page.png'" in error.message and str(suite / "page.png") in error.message
    assert "is not a PNG, JPEG, GIF or WebP image (its first bytes are 00 01 02 03" in error.message
    ok = Task(id="q2", input="?", fields={"images": ["ok.gif"]}, source="x.jsonl:1")
    assert [image.media_type for image in task_images(ok, suite)] == ["image/gif"]
    (suite / "real.png").write_bytes(tiny_png())
    assert task_images(Task(id="q3", input="?", fields={"images": "real.png"}), suite)[0].media_type == "image/png"
