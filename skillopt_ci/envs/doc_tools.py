"""The ``documents`` toolset: ``glob``, ``read`` and ``grep`` over the task's own source files.

A ``tools`` suite offers it with ``tools: [documents]``. The three tools are read-only and see
only the files the task lists under ``files`` (their workspace paths; a folder stands for the
files below it): any other path, an absolute path, ``..``, the skill's folder, a file the model
did not get, is an error result naming the source files. A path may be given as the workspace
path or, when that is unambiguous, as the file's bare name.

- ``glob(pattern)``: the source files whose path or name matches the shell pattern, at most 50;
- ``read(path, start=1, limit=80)``: ``limit`` lines from line ``start``, at most 4,000
  characters (a cut says which ``start`` continues);
- ``grep(pattern, path)``: the lines of one source file containing ``pattern`` as a literal,
  ignoring case, at most 20 (``line: text``).

These limits are the OfficeQA benchmark's; the toolset serves any suite whose tasks hand the
model a few long text documents.
"""

from __future__ import annotations

import fnmatch
import os
from typing import Any

from skillopt_ci.core.messages import ToolSpec
from skillopt_ci.core.task import task_paths
from skillopt_ci.envs.toolbox import Tool, ToolContext, ToolResult
from skillopt_ci.sandbox import SandboxError

GLOB_MATCHES = 50
READ_CHARS = 4_000
READ_LINES = 80
GREP_LINES = 20
GREP_LINE_CHARS = 400
MAX_DOCUMENT_CHARS = 50_000_000


def source_files(ctx: ToolContext) -> list[str]:
    """The workspace paths of the task's files (a folder's files listed), sorted."""
    found: set[str] = set()
    for dest in task_paths(ctx.task, "files"):
        try:
            found.update(p for p in ctx.workspace.list_files(dest, max_entries=10_000) if not p.startswith("[cut"))
        except SandboxError:
            continue
    return sorted(found)


def _normal(path: str) -> str:
    text = path.strip().replace("\\", "/")
    while text.startswith("./"):
        text = text[2:]
    return os.path.normpath(text) if text else ""


def _resolve(path: str, ctx: ToolContext) -> str:
    """The source file ``path`` names; ``SandboxError`` (shown to the model) when it names none."""
    allowed = source_files(ctx)
    wanted = _normal(path)
    if wanted in allowed:
        return wanted
    by_name = [p for p in allowed if os.path.basename(p) == wanted]
    if len(by_name) == 1:
        return by_name[0]
    listing = ", ".join(allowed[:GLOB_MATCHES]) or "(none)"
    raise SandboxError(f"{path}: not one of this task's source files; they are: {listing}")


def _lines(path: str, ctx: ToolContext) -> list[str]:
    return ctx.workspace.read_text(path, max_chars=MAX_DOCUMENT_CHARS).splitlines()


def _glob(args: dict[str, Any], ctx: ToolContext) -> str:
    pattern = args["pattern"].strip()
    bare = pattern[3:] if pattern.startswith("**/") else pattern
    allowed = source_files(ctx)
    found = [p for p in allowed if fnmatch.fnmatchcase(p, pattern) or fnmatch.fnmatchcase(p, bare)
             or fnmatch.fnmatchcase(os.path.basename(p), bare)]
    if not found:
        return f"(no source file matches {pattern!r}; the source files are: {', '.join(allowed) or 'none'})"
    shown = found[:GLOB_MATCHES]
    if len(found) > GLOB_MATCHES:
        shown.append(f"[cut: showed {GLOB_MATCHES} of {len(found)} matches]")
    return "\n".join(shown)


def _read(args: dict[str, Any], ctx: ToolContext) -> str:
    path = _resolve(args["path"], ctx)
    start, limit = args.get("start", 1), args.get("limit", READ_LINES)
    lines = _lines(path, ctx)
    if start > len(lines):
        return f"{path} has {len(lines)} lines; start={start} is past its end"
    window = lines[start - 1:start - 1 + limit]
    text, shown = "", 0
    for line in window:
        if len(text) + len(line) + 1 > READ_CHARS:
            break
        text += line + "\n"
        shown += 1
    if shown == 0:  # one very long line: show its start rather than nothing
        return f"{path} line {start} (cut at {READ_CHARS} characters):\n{window[0][:READ_CHARS]}"
    last = start + shown - 1
    head = f"{path} lines {start}-{last} of {len(lines)}:\n"
    if shown < len(window):
        return f"{head}{text}[cut at {READ_CHARS} characters: continue with start={last + 1}]"
    return head + text.rstrip("\n")


def _grep(args: dict[str, Any], ctx: ToolContext) -> str:
    needle = args["pattern"].lower()
    if not needle.strip():
        raise SandboxError("grep: the pattern is empty")
    path = _resolve(args["path"], ctx)
    hits = [(n, line) for n, line in enumerate(_lines(path, ctx), start=1) if needle in line.lower()]
    if not hits:
        return f"(no line of {path} contains {args['pattern']!r})"
    shown = [f"{n}: {line[:GREP_LINE_CHARS]}" for n, line in hits[:GREP_LINES]]
    if len(hits) > GREP_LINES:
        shown.append(f"[cut: showed {GREP_LINES} of {len(hits)} matching lines]")
    return "\n".join(shown)


def _handler(action: Any) -> Any:
    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            return ToolResult(action(args, ctx))
        except SandboxError as exc:
            return ToolResult(exc.message, True)
        except OSError as exc:
            return ToolResult(f"{type(exc).__name__}: {exc}", True)

    return handler


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


_TEXT = {"type": "string"}
TOOLS: tuple[Tool, ...] = (
    Tool(ToolSpec("glob", f"Find this task's source documents whose path or file name matches a glob pattern "
                  f"(at most {GLOB_MATCHES}).",
                  _schema({"pattern": {**_TEXT, "description": "a pattern such as *.txt or *1944*"}}, ["pattern"])),
         _handler(_glob)),
    Tool(ToolSpec("read", f"Read lines of a source document: `limit` lines from line `start` "
                  f"(at most {READ_CHARS} characters).",
                  _schema({"path": {**_TEXT, "description": "the document's path, as glob lists it"},
                           "start": {"type": "integer", "minimum": 1, "description": "first line (default 1)"},
                           "limit": {"type": "integer", "minimum": 1,
                                     "description": f"number of lines (default {READ_LINES})"}},
                          ["path"])),
         _handler(_read)),
    Tool(ToolSpec("grep", f"Find the lines of a source document that contain a literal text, ignoring case "
                  f"(at most {GREP_LINES} lines, each with its line number).",
                  _schema({"pattern": {**_TEXT, "description": "the literal text to look for"},
                           "path": {**_TEXT, "description": "the document's path"}}, ["pattern", "path"])),
         _handler(_grep)),
)
