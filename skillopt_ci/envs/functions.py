"""Suite-defined function tools: a Python function in the suite directory offered to the model.

``tools: ["lookup:find_city"]`` loads ``find_city`` from ``lookup.py`` in the suite directory
(``inputs.usercode``: imported by path, a broken file is an ``InputError`` naming it). Its JSON
Schema comes from the signature unless the suite declares ``parameters``:

- ``str`` ``int`` ``float`` ``bool`` → string, integer, number, boolean; ``list[X]`` → an array of
  X; ``dict`` / ``dict[str, X]`` → an object; ``Literal["a", "b"]`` → an enum; ``X | None`` → X or
  null; no annotation or ``Any`` → any value;
- a parameter with a default is not required (its default is shown when it is JSON);
- the docstring's first paragraph is the tool's description; an ``Args:`` section (``name: text``
  lines) describes the parameters;
- parameters named ``workspace`` (the rollout's workspace directory, a ``Path``) and ``task`` (the
  :class:`~skillopt_ci.core.task.Task`) are passed by the environment, not by the model.

A call runs in-process (suite code is trusted like a scorer): an ``async def`` is awaited and
cancelled at the tool time limit; a plain function runs in a daemon thread that is abandoned (not
killed) at the limit. What it returns is shown to the model: a string as it is, ``None`` as
"(no output)", anything else as JSON. An exception becomes an error result naming the file line.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import json
import re
import threading
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.messages import ToolSpec
from skillopt_ci.inputs.usercode import line_in, load_function, module_path

INJECTED = ("workspace", "task")  # parameters the environment fills in
_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean"}
_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_ARG_LINE = re.compile(r"^\s+(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


@dataclass(frozen=True)
class FunctionResult:
    text: str
    is_error: bool = False


class FunctionTool:
    """One suite function as a tool: its spec, and how to call it with checked arguments."""

    def __init__(self, fn: Callable[..., Any], spec: ToolSpec, path: Path):
        self.fn = fn
        self.spec = spec
        self.path = path
        params = inspect.signature(fn).parameters
        self.injected = tuple(n for n in INJECTED if n in params)

    async def call(self, arguments: dict[str, Any], *, timeout: float, workspace: Path, task: Any) -> FunctionResult:
        extra = {"workspace": workspace, "task": task}
        kwargs = {**arguments, **{n: extra[n] for n in self.injected}}
        try:
            if inspect.iscoroutinefunction(self.fn):
                value = await asyncio.wait_for(self.fn(**kwargs), timeout)
            else:
                value = await _in_thread(self.fn, kwargs, timeout)
        except asyncio.TimeoutError:
            return FunctionResult(f"{self.spec.name} did not finish within its time limit of {timeout:g} s", True)
        except Exception as exc:
            line = line_in(exc, self.path)
            at = f" at line {line} of {self.path.name}" if line else ""
            return FunctionResult(f"{self.spec.name} raised {type(exc).__name__}: {exc}{at}", True)
        return FunctionResult(_as_text(value))


async def _in_thread(fn: Callable[..., Any], kwargs: dict[str, Any], timeout: float) -> Any:
    """Run ``fn`` in a daemon thread: a function that never returns cannot hold up the exit
    (the loop's default executor would join it at shutdown)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not future.done():
            (future.set_result if ok else future.set_exception)(value)

    def work() -> None:
        try:
            outcome = (True, fn(**kwargs))
        except BaseException as exc:  # delivered to the awaiting coroutine
            outcome = (False, exc)
        with contextlib.suppress(RuntimeError):  # abandoned at its limit and the loop is gone
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=work, name=f"tool-{getattr(fn, '__name__', 'fn')}", daemon=True).start()
    return await asyncio.wait_for(future, timeout)


def _as_text(value: Any) -> str:
    if value is None:
        return "(no output)"
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def load_function_tool(suite_dir: Path, entry: str | dict[str, Any], where: str) -> FunctionTool:
    """The tool an entry of the ``tools`` option names: ``"module:function"`` or a mapping
    ``{function, name?, description?, parameters?}``."""
    decl = {"function": entry} if isinstance(entry, str) else dict(entry)
    target = decl.get("function")
    module, _, name = str(target).partition(":")
    if not isinstance(target, str) or not module or not name:
        raise InputError(f'environment tools: a function tool must be "module:function", got {target!r}', where=where)
    path = module_path(suite_dir, module)
    fn = load_function(path, name, what="function tool", accepts=None)
    try:
        parameters = decl.get("parameters") or schema_from_signature(fn)
    except TypeError as exc:
        raise InputError(f'function tool "{target}": {exc}', where=str(path),
                         hint='declare its JSON Schema with "parameters"') from None
    description = decl.get("description") or first_paragraph(inspect.getdoc(fn) or "") or f"Calls {name}."
    spec = ToolSpec(str(decl.get("name") or name), str(description), parameters)
    return FunctionTool(fn, spec, path)


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def first_paragraph(doc: str) -> str:
    lines = []
    for line in doc.strip().splitlines():
        if not line.strip() or _ARGS_HEADER.match(line):
            break
        lines.append(line.strip())
    return " ".join(lines)


def _arg_docs(doc: str) -> dict[str, str]:
    found: dict[str, str] = {}
    inside = False
    for line in doc.splitlines():
        if _ARGS_HEADER.match(line):
            inside = True
        elif inside and (m := _ARG_LINE.match(line)):
            found[m.group(1).lstrip("*")] = m.group(2).strip()
        elif inside and line.strip() and not line.startswith((" ", "\t")):
            inside = False
    return found


def schema_from_signature(fn: Callable[..., Any]) -> dict[str, Any]:
    """A JSON Schema (type ``object``) of ``fn``'s parameters; ``TypeError`` for a type hint
    it cannot express."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:  # a forward reference that does not resolve, a bad annotation
        raise TypeError(f"cannot read its type hints ({type(exc).__name__}: {exc})") from None
    docs = _arg_docs(inspect.getdoc(fn) or "")
    properties: dict[str, Any] = {}
    required = []
    for pname, param in inspect.signature(fn).parameters.items():
        if pname in INJECTED or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        try:
            prop = json_type(hints.get(pname, Any))
        except TypeError as exc:
            raise TypeError(f'parameter "{pname}": {exc}') from None
        if pname in docs:
            prop = {**prop, "description": docs[pname]}
        if param.default is param.empty:
            required.append(pname)
        elif _is_json(param.default):
            prop = {**prop, "default": param.default}
        properties[pname] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def json_type(hint: Any) -> dict[str, Any]:
    """The JSON Schema of one type hint."""
    if hint is Any or hint is inspect.Parameter.empty:
        return {}
    if hint in _SIMPLE:
        return {"type": _SIMPLE[hint]}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is list or origin is list:
        return {"type": "array", "items": json_type(args[0])} if args else {"type": "array"}
    if hint is dict or origin is dict:
        if len(args) == 2 and args[1] is not Any:
            return {"type": "object", "additionalProperties": json_type(args[1])}
        return {"type": "object"}
    if origin is Literal:
        kinds = {_SIMPLE.get(type(a)) for a in args}
        return {"type": kinds.pop(), "enum": list(args)} if len(kinds) == 1 and None not in kinds else {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        arms = [a for a in args if a is not type(None)]
        inner = json_type(arms[0]) if len(arms) == 1 else {"anyOf": [json_type(a) for a in arms]}
        if len(arms) == len(args):
            return inner
        if set(inner) == {"type"} and isinstance(inner["type"], str):
            return {"type": [inner["type"], "null"]}
        return {"anyOf": [inner, {"type": "null"}]}
    raise TypeError(f"type {getattr(hint, '__name__', hint)!r} has no JSON Schema here")


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
