"""The tools a ``tools`` rollout offers: the built-ins and the suite's function tools.

Built-ins (every one works inside the rollout's :class:`~skillopt_ci.sandbox.Workspace`):

- ``python`` (``code``): a fresh ``python -I`` in the workspace, under the sandbox limits;
- ``shell`` (``command``): ``/bin/sh -c`` in the workspace, under the same limits;
- ``read_file`` (``path``), ``write_file`` (``path``, ``content``), ``list_files`` (``path``,
  ``pattern``), ``grep`` (``pattern``, ``path``): confined to the workspace (``..``, absolute
  paths and symlinks that leave it are refused);
- ``submit_answer`` (``answer``): ends the rollout with that answer.

Toolsets (``TOOLSETS``) are names that offer several tools at once: ``documents`` is ``glob``,
``read`` and ``grep`` over the task's own files only (``envs.doc_tools``).

Every tool's arguments are checked against its JSON Schema before it runs. A tool never raises
out of :meth:`Tool.run`: what went wrong is a :class:`ToolResult` with ``is_error`` set, shown
to the model. Results are cut to the environment's ``tool_output_chars`` (start and end kept).
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.messages import ToolSpec
from skillopt_ci.core.task import Task
from skillopt_ci.envs.functions import FunctionTool, ToolResult, load_function_tool
from skillopt_ci.sandbox import ProcessResult, SandboxError, SandboxLimits, Workspace

NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what every provider accepts as a tool name
ARGV_CODE_BYTES = 100_000  # longer code goes through stdin: one argv string is capped at 128 KiB


@dataclass(frozen=True)
class ToolContext:
    """What a tool call may use: the workspace, the task, the limits of this call."""

    workspace: Workspace
    task: Task
    limits: SandboxLimits
    output_chars: int


Handler = Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult]]


@dataclass
class Tool:
    spec: ToolSpec
    handler: Handler
    _validator: Any = field(default=None, repr=False)

    def check(self, arguments: dict[str, Any]) -> str | None:
        """Why ``arguments`` do not fit the tool's schema, or ``None``."""
        if self._validator is None:
            self._validator = Draft202012Validator(self.spec.parameters)
        error = best_match(self._validator.iter_errors(arguments))
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path)
        return f"{where}: {error.message}" if where else error.message

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        result = await self.handler(arguments, ctx)
        return ToolResult(cap(result.text, ctx.output_chars), result.is_error, result.answer)


def cap(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, its start and end kept, the cut said."""
    if len(text) <= limit:
        return text
    tail = limit // 4
    head = limit - tail
    return f"{text[:head]}\n… [{len(text) - head - tail} characters cut] …\n{text[len(text) - tail:]}"


def _schema(required: Mapping[str, str], optional: Mapping[str, str] = {}) -> dict[str, Any]:
    props = {k: {"type": "string", "description": v} for k, v in {**required, **optional}.items()}
    return {"type": "object", "properties": props, "required": list(required), "additionalProperties": False}


def _process(result: ProcessResult, ctx: ToolContext) -> ToolResult:
    return ToolResult(result.render(ctx.output_chars), result.timed_out or result.exit_code != 0)


async def _python(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    code = args["code"]
    if len(code.encode("utf-8", "surrogatepass")) < ARGV_CODE_BYTES:
        result = await ctx.workspace.run([sys.executable, "-I", "-c", code], limits=ctx.limits)
    else:
        result = await ctx.workspace.run([sys.executable, "-I", "-"], stdin=code, limits=ctx.limits)
    return _process(result, ctx)


async def _shell(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return _process(await ctx.workspace.run(["/bin/sh", "-c", args["command"]], limits=ctx.limits), ctx)


def _file_tool(action: Callable[[Workspace, dict[str, Any], int], str]) -> Handler:
    """A workspace file operation as a handler: a path outside the workspace, a missing file or
    a bad pattern is an error result."""

    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            return ToolResult(action(ctx.workspace, args, ctx.output_chars))
        except SandboxError as exc:
            return ToolResult(exc.message, True)
        except (OSError, ValueError, re.error) as exc:
            return ToolResult(f"{type(exc).__name__}: {exc}", True)

    return handler


def _read(ws: Workspace, args: dict[str, Any], limit: int) -> str:
    return ws.read_text(args["path"], max_chars=limit) or "(empty file)"


def _write(ws: Workspace, args: dict[str, Any], limit: int) -> str:
    return f"wrote {ws.write_text(args['path'], args['content'])} bytes to {args['path']}"


def _list(ws: Workspace, args: dict[str, Any], limit: int) -> str:
    pattern = args.get("pattern")
    names = ws.glob(pattern) if pattern else ws.list_files(args.get("path") or ".")
    return "\n".join(names) or "(no files)"


def _grep(ws: Workspace, args: dict[str, Any], limit: int) -> str:
    return "\n".join(ws.grep(args["pattern"], args.get("path") or ".")) or "(no matches)"


async def _submit(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return ToolResult("answer submitted", answer=args["answer"])


BUILTINS: dict[str, Tool] = {t.spec.name: t for t in (
    Tool(ToolSpec("python", "Run Python code in a fresh interpreter; the working directory is the "
                  "workspace. Shows the exit code, stdout and stderr.",
                  _schema({"code": "the Python program to run"})), _python),
    Tool(ToolSpec("shell", "Run a shell command (/bin/sh -c) in the workspace. Shows the exit code, "
                  "stdout and stderr.", _schema({"command": "the command line"})), _shell),
    Tool(ToolSpec("read_file", "Read a text file of the workspace.",
                  _schema({"path": "path relative to the workspace"})), _file_tool(_read)),
    Tool(ToolSpec("write_file", "Write a text file in the workspace (created or replaced).",
                  _schema({"path": "path relative to the workspace", "content": "the whole file text"})),
         _file_tool(_write)),
    Tool(ToolSpec("list_files", "List the files of a workspace folder, or the files matching a glob "
                  "pattern such as **/*.csv.",
                  _schema({}, {"path": "folder relative to the workspace (default .)",
                               "pattern": "glob pattern (instead of path)"})), _file_tool(_list)),
    Tool(ToolSpec("grep", "Search workspace files for a regular expression; shows path:line: text.",
                  _schema({"pattern": "a Python regular expression"},
                          {"path": "file or folder relative to the workspace (default .)"})),
         _file_tool(_grep)),
    Tool(ToolSpec("submit_answer", "Submit your final answer; this ends the task.",
                  _schema({"answer": "the final answer"})), _submit),
)}


def _function_handler(tool: FunctionTool) -> Handler:
    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await tool.call(args, limits=ctx.limits, workspace=ctx.workspace.path, task=ctx.task)

    return handler


#: Names that offer several tools at once: {name: "module:attribute"} of a tuple of Tools.
TOOLSETS: dict[str, str] = {"documents": "skillopt_ci.envs.doc_tools:TOOLS"}


def toolset(name: str) -> tuple[Tool, ...]:
    module, _, attr = TOOLSETS[name].partition(":")
    return tuple(getattr(importlib.import_module(module), attr))


def build_tools(entries: Any, suite_dir: Path, where: str) -> tuple[dict[str, Tool], dict[str, Path]]:
    """The tools the ``tools`` option declares, by name, and the files of the function tools
    (their content is part of the environment's identity). ``InputError`` for a bad entry."""
    known = f"built-in tools: {', '.join(BUILTINS)}; toolsets: {', '.join(TOOLSETS)}"
    if not isinstance(entries, (list, tuple)) or not entries:
        raise InputError("environment tools: option \"tools\" must be a non-empty list", where=where,
                         hint=f"{known}; or \"module:function\"")
    tools: dict[str, Tool] = {}
    files: dict[str, Path] = {}
    for index, entry in enumerate(entries):
        at = f"environment tools: tools[{index}]"
        if isinstance(entry, str) and entry in TOOLSETS:
            for tool in toolset(entry):
                _add(tools, tool, at, where)
            continue
        if isinstance(entry, str) and ":" not in entry:
            if entry not in BUILTINS:
                raise InputError(f"{at}: unknown built-in tool {entry!r}", where=where,
                                 hint=f"{known}; a suite function is \"module:function\"")
            tool = BUILTINS[entry]
        elif isinstance(entry, (str, dict)):
            function = _function(entry, suite_dir, at, where)
            files[_relative(function.path, suite_dir)] = function.path
            tool = Tool(function.spec, _function_handler(function))
        else:
            raise InputError(f"{at}: expected a tool name, \"module:function\" or a mapping, got {entry!r:.60}",
                             where=where)
        _add(tools, tool, at, where)
    return tools, files


def _add(tools: dict[str, Tool], tool: Tool, at: str, where: str) -> None:
    if tool.spec.name in tools:
        raise InputError(f"{at}: two tools are named {tool.spec.name!r}", where=where,
                         hint='give one a different "name", or leave out the built-in a toolset also offers')
    tools[tool.spec.name] = tool


def _relative(path: Path, base: Path) -> str:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.name


def _function(entry: str | dict[str, Any], suite_dir: Path, at: str, where: str) -> FunctionTool:
    if isinstance(entry, dict):
        unknown = set(entry) - {"function", "name", "description", "parameters"}
        if unknown:
            raise InputError(f"{at}: unknown key {sorted(unknown)[0]!r}; allowed: function, name, "
                             "description, parameters", where=where)
        declared = entry.get("parameters")
        if declared is not None:
            try:
                Draft202012Validator.check_schema(declared)
            except SchemaError as exc:
                raise InputError(f"{at}: parameters is not a JSON Schema: {exc.message}", where=where) from None
            if not isinstance(declared, dict) or declared.get("type") != "object":
                raise InputError(f'{at}: parameters must be a JSON Schema of "type": "object"', where=where)
    tool = load_function_tool(suite_dir, entry, where, at)
    if not NAME_RE.match(tool.spec.name):
        raise InputError(f"{at}: tool name {tool.spec.name!r} must be 1-64 letters, digits, _ or -", where=where)
    return tool
