"""Suite-defined function tools: a Python function in the suite directory offered to the model.

``tools: ["lookup:find_city"]`` loads ``find_city`` from ``lookup.py`` in the suite directory
(``inputs.usercode``: the path confined to the suite folder, the file loaded from its source, a
broken file an ``InputError`` naming it). The function must be *defined* in a file of the suite
folder: a builtin, or a function a suite file merely imports (``from os import system``), is
refused. Its JSON Schema comes from the signature unless the suite declares ``parameters``:

- ``str`` ``int`` ``float`` ``bool`` → string, integer, number, boolean; ``list[X]`` → an array of
  X; ``dict`` / ``dict[str, X]`` → an object; ``Literal["a", "b"]`` → an enum; ``X | None`` → X or
  null; no annotation or ``Any`` → any value;
- a parameter with a default is not required (its default is shown when it is JSON);
- the docstring's first paragraph is the tool's description; an ``Args:`` section (``name: text``
  lines) describes the parameters;
- parameters named ``workspace`` (the rollout's workspace directory, a ``Path``) and ``task`` (the
  :class:`~skillopt_ci.core.task.Task`) are passed by the environment, not by the model.

The schema is read here, at load; a **call runs in the sandbox**: a fresh interpreter
(``envs.function_runner``) in the rollout's workspace, with the clean environment and the call's
limits (``sandbox.run_in``), that executes the file's source text as read at load and calls the
function (an ``async def`` is run to completion). At the time limit the process is killed. What
the function returns is shown to the model: a string as it is, ``None`` as "(no output)",
anything else as JSON. An exception (``SystemExit`` included) becomes an error result naming the
file line; a process that dies without a result (``os._exit``, a signal, a limit) is an error
result of that call, never the end of the run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import inspect
import json
import re
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.messages import ToolSpec
from skillopt_ci.inputs.usercode import defined_inside, import_file, module_path, read_source
from skillopt_ci.sandbox import ProcessResult, SandboxError, SandboxLimits, run_in

INJECTED = ("workspace", "task")  # parameters the environment fills in
RUNNER = "skillopt_ci.envs.function_runner"
_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean"}
_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_ARG_LINE = re.compile(r"^\s+(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_STDERR_SHOWN = 600  # characters of a dead call's stderr shown with its error


@dataclass(frozen=True)
class ToolResult:
    """What the model is shown of a tool call; ``answer`` is set by ``submit_answer`` (the rollout ends)."""

    text: str
    is_error: bool = False
    answer: str | None = None


class FunctionTool:
    """One suite function as a tool: its spec, and how to call it (in a sandboxed child) with
    checked arguments. ``source`` is the file's text as read at load: every call runs that."""

    def __init__(self, fn: Callable[..., Any], spec: ToolSpec, path: Path, source: str, function: str):
        self.function = function
        self.spec = spec
        self.path = path
        self.source = source
        params = inspect.signature(fn).parameters
        self.injected = tuple(n for n in INJECTED if n in params)

    def request(self, arguments: dict[str, Any], workspace: Path, task: Any, max_bytes: int) -> str:
        """The JSON the runner reads on its stdin."""
        injects_task = "task" in self.injected and dataclasses.is_dataclass(task) and not isinstance(task, type)
        task_dict = dataclasses.asdict(task) if injects_task else None
        return json.dumps({
            "path": str(self.path), "source": self.source, "function": self.function,
            "arguments": arguments, "inject": list(self.injected), "workspace": str(workspace),
            "task": task_dict, "max_bytes": max_bytes,
        }, ensure_ascii=False, default=str)

    async def call(self, arguments: dict[str, Any], *, limits: SandboxLimits, workspace: Path,
                   task: Any) -> ToolResult:
        argv = [sys.executable, "-I", "-B", "-m", RUNNER]
        stdin = self.request(arguments, workspace, task, max(limits.output_bytes - 1, 1024))
        try:
            done = await run_in(workspace, argv, stdin=stdin, limits=limits)
        except SandboxError as exc:
            return ToolResult(f"{self.spec.name} could not start: {exc.message}", True)
        return self.result(done, limits.wall_s)

    def result(self, done: ProcessResult, wall_s: float) -> ToolResult:
        if done.timed_out:
            return ToolResult(f"{self.spec.name} did not finish within its time limit of {wall_s:g} s", True)
        try:
            found = json.loads(done.stdout) if done.exit_code == 0 else None
        except ValueError:
            found = None
        if isinstance(found, dict) and isinstance(found.get("text"), str):
            return ToolResult(found["text"], bool(found.get("is_error")))
        stderr = done.stderr.strip()
        tail = f"; stderr: {stderr[-_STDERR_SHOWN:]}" if stderr else ""
        return ToolResult(f"{self.spec.name}: its process ended ({done.status()}) without a result{tail}", True)


def load_function_tool(suite_dir: Path, entry: str | dict[str, Any], where: str,
                       key: str = "environment.tools") -> FunctionTool:
    """The tool an entry of the ``tools`` option names: ``"module:function"`` or a mapping
    ``{function, name?, description?, parameters?}``. ``key`` names the entry in messages."""
    decl: dict[str, Any] = {"function": entry} if isinstance(entry, str) else dict(entry)
    target = decl.get("function")
    module, _, name = str(target).partition(":")
    if not isinstance(target, str) or not module or not name:
        raise InputError(f'environment tools: a function tool must be "module:function", got {target!r}', where=where)
    path = module_path(suite_dir, module, where=where, key=key)
    source = read_source(path, "function tool")
    fn = _function_in(import_file(path, "function tool", source), name, path)
    if not defined_inside(fn, suite_dir):
        origin = getattr(getattr(fn, "__code__", None), "co_filename", None) or getattr(fn, "__module__", None)
        raise InputError(f'{key}: function tool "{target}" is not defined in the suite\'s own files '
                         f"(it comes from {origin or 'a builtin'})", where=where,
                         hint="define the function with def in a .py file of the suite folder")
    try:
        parameters = decl.get("parameters") or schema_from_signature(fn)
    except TypeError as exc:
        raise InputError(f'function tool "{target}": {exc}', where=str(path),
                         hint='declare its JSON Schema with "parameters"') from None
    description = decl.get("description") or first_paragraph(inspect.getdoc(fn) or "") or f"Calls {name}."
    spec = ToolSpec(str(decl.get("name") or name), str(description), parameters)
    # Decoded as the import system would (a coding cookie is honoured): the child compiles this text.
    return FunctionTool(fn, spec, path, importlib.util.decode_source(source), name)


def _function_in(module: types.ModuleType, name: str, path: Path) -> Callable[..., Any]:
    fn = getattr(module, name, None)
    if not callable(fn):
        found = sorted(k for k, v in vars(module).items() if inspect.isfunction(v) and not k.startswith("_"))
        raise InputError(f'function tool has no function "{name}" (functions found: {", ".join(found) or "none"})',
                         where=str(path))
    return fn


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
