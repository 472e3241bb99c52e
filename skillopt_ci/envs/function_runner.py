"""The child process of one function-tool call: ``python -I -B -m skillopt_ci.envs.function_runner``.

Contract: stdin is one JSON object ``{path, source, function, arguments, inject, workspace, task,
max_bytes}``. The runner executes ``source`` (the suite file's text, read by the parent) as the
module ``path`` names (:func:`~skillopt_ci.inputs.usercode.import_file`: from source, never from
bytecode), checks that ``function`` is defined in that file, calls it with ``arguments`` plus the
injected ``workspace`` (a ``Path``) and ``task`` (a :class:`~skillopt_ci.core.task.Task` rebuilt
from its dict) when it asks for them (an ``async def`` is run to completion), and writes one JSON
object ``{"text": str, "is_error": bool}`` to its stdout, at most ``max_bytes`` long (a longer
text keeps its start and end). What the function prints goes to stderr, so it cannot corrupt the
result. Every exception of the user's code, ``SystemExit`` and ``KeyboardInterrupt`` included,
is an error result naming the file line; exit code 0 whenever a result was written.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from pathlib import Path
from typing import Any

from skillopt_ci.core.task import Task
from skillopt_ci.inputs.usercode import UserExit, import_file, line_in, user_code


def as_text(value: Any) -> str:
    """What the model is shown: a string as it is, ``None`` as "(no output)", else JSON."""
    if value is None:
        return "(no output)"
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def encode(text: str, is_error: bool, max_bytes: int) -> bytes:
    """The result line, its text cut in the middle until the line fits ``max_bytes``."""
    keep = len(text)
    while True:
        shown = text if keep >= len(text) else (
            f"{text[: keep * 3 // 4]}\n… [{len(text) - keep} characters cut] …\n{text[len(text) - keep // 4:]}")
        line = json.dumps({"text": shown, "is_error": is_error}, ensure_ascii=False).encode("utf-8", "replace")
        if len(line) <= max_bytes or keep == 0:
            return line
        keep = max(0, min(keep - 1, int(keep * max_bytes / len(line)) - 80))


def _error(name: str, exc: BaseException, path: Path) -> str:
    original = exc.original if isinstance(exc, UserExit) else exc
    line = line_in(exc, path)
    at = f" at line {line} of {path.name}" if line else ""
    return f"{name} raised {type(original).__name__}: {original}{at}"


def run(request: dict[str, Any]) -> tuple[str, bool]:
    """Load, call, render: the (text, is_error) of one call."""
    path = Path(request["path"])
    name = request["function"]
    try:
        module = import_file(path, "function tool", request["source"])
    except Exception as exc:  # the parent loaded the same text; a second load may still differ
        return f"{name}: {getattr(exc, 'message', exc)}", True
    fn = getattr(module, name, None)
    if not callable(fn):
        return f"{name}: {path.name} has no function {name!r}", True
    kwargs = dict(request["arguments"])
    inject = request.get("inject") or []
    if "workspace" in inject:
        kwargs["workspace"] = Path(request["workspace"])
    if "task" in inject and request.get("task") is not None:
        kwargs["task"] = Task(**request["task"])
    try:
        with user_code():
            value = _run_async(fn, kwargs) if inspect.iscoroutinefunction(fn) else fn(**kwargs)
    except Exception as exc:
        return _error(name, exc, path), True
    return as_text(value), False


def _run_async(fn: Any, kwargs: dict[str, Any]) -> Any:
    import asyncio  # ~90 ms of start-up that a plain function does not pay

    return asyncio.run(fn(**kwargs))


def main() -> int:
    request = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    result = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # the function's prints (and a C library's) go to stderr, not into the result
    sys.stdout = sys.stderr
    text, is_error = run(request)
    result.write(encode(text, is_error, int(request.get("max_bytes") or 1_000_000)))
    result.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
