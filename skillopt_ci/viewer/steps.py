"""A result's trajectory as the viewer shows it: its steps numbered and cut to the report's text
limit, tool-call arguments pretty-printed, and the images the steps name embedded as data URLs.

Contract (everything read here came from a model, a task or a tool, so it is only ever data):

- Steps keep their order; each gets ``n`` (its number in the rollout, from 1). A trajectory longer
  than :data:`MAX_STEPS` keeps its first and last halves with one ``{"kind": "gap", "omitted"}``
  between them.
- ``arguments`` that parse as JSON are re-indented (``arguments_json: true``); anything else is
  kept as written (``arguments_json: false``), so the viewer can say it was not valid JSON.
- An image a step names (``images/<file>``, relative to the run directory; see
  ``envs.base.keep_image``) is looked up in the evaluation's directory and then in each parent up to
  the run's, and read only when it resolves inside the run directory. It is embedded only when
  its first bytes say PNG, JPEG, GIF or WebP (the file name and any claimed type are ignored, so
  an SVG — which can carry script — is never embedded), when it is at most :data:`IMAGE_BYTES`,
  and while the report's :data:`IMAGE_TOTAL_BYTES` last; otherwise the bundle carries a note
  saying why it is not shown. Embedded images are keyed by their path relative to the run
  directory, so an image shown at many steps is embedded once.
"""

from __future__ import annotations

import base64
import functools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillopt_ci.core.names import slug
from skillopt_ci.inputs.images import image_type as sniff_image

MAX_STEPS = 400  # per result in a bundle; results.jsonl keeps them all
MAX_FILES = 200  # kept-file names listed per result
IMAGE_BYTES = 1_000_000  # one image embedded at most this big
IMAGE_TOTAL_BYTES = 8_000_000  # all images of one bundle
_IMAGE_NAME = re.compile(r"images/[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}")
_TEXT_FIELDS = ("name", "call_id")


class ImageStore:
    """The images of one bundle: ``images`` maps a key (the path relative to the run directory, or
    the name as the step wrote it when it was not found) to ``{"name", "src", "media_type",
    "bytes"}`` or ``{"name", "note"}``."""

    def __init__(self, run: Path, *, per_image: int = IMAGE_BYTES, total: int = IMAGE_TOTAL_BYTES):
        self.run = run.resolve()
        self.per_image = per_image
        self.left = total
        self.total = total
        self.images: dict[str, dict[str, Any]] = {}

    def ref(self, eval_dir: Path, name: Any) -> str:
        """The key of the image ``name`` that a step of the evaluation in ``eval_dir`` shows."""
        name = str(name)
        path = self._find(eval_dir, name)
        key = path.relative_to(self.run).as_posix() if path else name
        if key not in self.images:
            self.images[key] = self._load(path, name)
        return key

    def _find(self, eval_dir: Path, name: str) -> Path | None:
        if not _IMAGE_NAME.fullmatch(name) or "/." in name:
            return None
        folder = eval_dir.resolve()
        while True:
            candidate = folder / name
            if candidate.is_file():
                real = candidate.resolve()  # a symlink out of the run directory is not followed
                return real if self.run in real.parents else None
            if folder == self.run or self.run not in folder.parents:
                return None
            folder = folder.parent

    def _load(self, path: Path | None, name: str) -> dict[str, Any]:
        if path is None:
            return {"name": name, "note": "not in the run directory"}
        try:
            stat = path.stat()
            if stat.st_size > self.per_image:
                return {"name": name, "note": f"not shown: {stat.st_size:,} bytes, more than the report's "
                                              f"{self.per_image:,} per image"}
            if stat.st_size > self.left:
                return {"name": name, "note": f"not shown: the report's {self.total:,} bytes of images are spent"}
            media_type, src, size = _encode(str(path), stat.st_size, stat.st_mtime_ns)
        except OSError as exc:
            return {"name": name, "note": f"cannot be read: {exc.strerror}"}
        if size > min(self.per_image, self.left):  # it grew since stat(): look again next time
            return {"name": name, "note": "not shown: it changed while the report was written"}
        if media_type is None:
            return {"name": name, "note": "not shown: not a PNG, JPEG, GIF or WebP image"}
        self.left -= size
        return {"name": name, "src": src, "media_type": media_type, "bytes": size}


@functools.lru_cache(maxsize=32)
def _encode(path: str, size: int, mtime_ns: int) -> tuple[str | None, str, int]:
    """An image file's type by its bytes, its data URL and its size. Cached by size and mtime: the
    live viewer rebuilds a run's bundle every second while the run goes on."""
    data = Path(path).read_bytes()
    media_type = sniff_image(data)
    if media_type is None:
        return None, "", len(data)
    return media_type, f"data:{media_type};base64," + base64.b64encode(data).decode("ascii"), len(data)


def pretty_arguments(raw: Any) -> tuple[str, bool]:
    """Tool-call arguments for reading: indented when they are JSON, else as written."""
    if not isinstance(raw, str):
        return json.dumps(raw, ensure_ascii=False, indent=2), True
    try:
        value = json.loads(raw)
    except ValueError:
        return raw, False
    return json.dumps(value, ensure_ascii=False, indent=2), True


def view_step(step: Any, n: int, cut: Callable[[Any], Any], images: ImageStore, eval_dir: Path) -> dict[str, Any]:
    """One step of ``results.jsonl`` as the bundle carries it (see the module docstring)."""
    if not isinstance(step, dict):
        return {"n": n, "kind": "error", "text": cut(f"(not a step: {json.dumps(step, ensure_ascii=False)})")}
    out: dict[str, Any] = {"n": n, "kind": str(step.get("kind") or "step")}
    if step.get("text"):
        out["text"] = cut(str(step["text"]))
    for key in _TEXT_FIELDS:
        if step.get(key) is not None:
            out[key] = str(step[key])
    if step.get("arguments") is not None:
        text, valid = pretty_arguments(step["arguments"])
        out["arguments"], out["arguments_json"] = cut(text), valid
    for key in ("reward", "elapsed_s"):
        if isinstance(step.get(key), (int, float)) and not isinstance(step.get(key), bool):
            out[key] = step[key]
    if isinstance(step.get("done"), bool):
        out["done"] = step["done"]
    if step.get("is_error"):
        out["is_error"] = True
    if isinstance(step.get("usage"), dict):
        out["usage"] = step["usage"]
    if isinstance(step.get("images"), list) and step["images"]:
        out["images"] = [images.ref(eval_dir, name) for name in step["images"]]
    return out


def view_trajectory(steps: Any, cut: Callable[[Any], Any], images: ImageStore, eval_dir: Path) -> list[dict[str, Any]]:
    """A result's ``trajectory`` for the bundle: numbered, cut, at most :data:`MAX_STEPS` steps."""
    if not isinstance(steps, list):
        return []
    numbered = list(enumerate(steps, 1))
    omitted = len(numbered) - MAX_STEPS
    if omitted > 0:
        half = MAX_STEPS // 2
        head = [view_step(s, n, cut, images, eval_dir) for n, s in numbered[:half]]
        tail = [view_step(s, n, cut, images, eval_dir) for n, s in numbered[-half:]]
        return [*head, {"kind": "gap", "n": half + 1, "omitted": omitted}, *tail]
    return [view_step(s, n, cut, images, eval_dir) for n, s in numbered]


def result_extras(r: dict[str, Any], cut: Callable[[Any], Any], images: ImageStore, eval_dir: Path) -> dict[str, Any]:
    """What a result of an environment beyond ``chat`` adds to its bundle entry (nothing for a
    chat result, so its entry reads as before): trajectory, reward, transcript, and the files the
    rollout wrote (each with its size when the run directory kept a copy)."""
    out: dict[str, Any] = {}
    if isinstance(r.get("trajectory"), list):
        out["trajectory"] = view_trajectory(r["trajectory"], cut, images, eval_dir)
    if isinstance(r.get("reward"), (int, float)) and not isinstance(r.get("reward"), bool):
        out["reward"] = r["reward"]
    if r.get("transcript"):
        out["transcript"] = cut(str(r["transcript"]))
    if isinstance(r.get("files"), list) and r["files"]:
        kept = eval_dir / "files" / slug(str(r.get("task_id"))) / str(r.get("repeat"))
        out["files"] = [kept_file(kept, str(f)) for f in r["files"][:MAX_FILES]]
        if len(r["files"]) > MAX_FILES:
            out["files_omitted"] = len(r["files"]) - MAX_FILES
    return out


def kept_file(kept: Path, relative: str) -> dict[str, Any]:
    """A file the rollout wrote: ``{"path", "bytes"}`` when its copy is in the run directory
    (under ``files/<task>/<repeat>/``), ``bytes`` ``None`` when it was not kept (too big)."""
    try:
        path = (kept / relative).resolve()
        inside = kept.resolve() in path.parents
        size = path.stat().st_size if inside and path.is_file() else None
    except (OSError, ValueError):
        size = None
    return {"path": relative, "bytes": size}
