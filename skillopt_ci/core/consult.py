"""Whether an agent consulted the skill under test, read from a rollout's steps.

In the agent CLIs a skill's body is not in the context until the agent decides to read it: Claude
Code lists installed skills for its ``Skill`` tool, Codex lists ``name: description (file: …)``
and the model must open ``SKILL.md``. A rollout *consulted* the skill when, at some step, the
agent

- called Claude Code's ``Skill`` tool naming it (``how = "skill tool"``), or
- read its ``SKILL.md`` with a file tool (``Read``, ``Grep``, ``cat`` through a command, …):
  ``how = "read SKILL.md"``; through a shell command, ``"command reads SKILL.md"``.

A path counts only when its components run through the folder the skill was installed at
(``.claude/skills/<name>/``, ``.agents/skills/<name>/``) to ``SKILL.md``: a file whose name merely
contains the skill's name (``notes-<name>.md``, ``<name>-old/SKILL.md``) is not a consult, and
neither is writing or editing the file. The same walk notes whether the agent read any other file
of the skill folder (``references``) and whether it ran one of its files as a program
(``scripts``: the first word of a command, or the first argument of an interpreter such as
``python`` or ``bash``). ``step`` is the index, in the rollout's steps, of the first consult.

A command that reaches the file by a path this cannot see (``cd`` into the folder first, a shell
variable, a glob) is not counted: the rate is a lower bound for agents that do that.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator, Sequence
from typing import Any

from skillopt_ci.core.records import Consult
from skillopt_ci.core.trajectory import Step

SKILL_FILE = "SKILL.md"
WRITE_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit", "apply_patch"})
COMMAND_TOOLS = frozenset({"Bash", "exec_command", "shell", "local_shell"})
INTERPRETERS = frozenset({"python", "python3", "bash", "sh", "zsh", "node", "deno", "ruby", "perl"})
SKILL_TOOL = "Skill"
_SEPARATORS = re.compile(r"\s*(?:&&|\|\||[;|&\n])\s*")


def find_consult(steps: Sequence[Step], install_dir: str, skill_name: str) -> Consult:
    """The :class:`Consult` of ``steps`` for the skill ``skill_name`` installed at ``install_dir``
    (relative to the workspace, e.g. ``.claude/skills/<name>``)."""
    folder = tuple(p for p in install_dir.replace("\\", "/").split("/") if p not in ("", "."))
    first: tuple[int, str] | None = None
    references = scripts = False
    for index, step in enumerate(steps):
        if step.kind != "tool_call" or not step.name:
            continue
        args = _arguments(step.arguments)
        if step.name == SKILL_TOOL and _names_skill(args, skill_name):
            first = first or (index, "skill tool")
            continue
        if step.name in WRITE_TOOLS:
            continue
        command = step.name in COMMAND_TOOLS
        for rest, ran in (_command_paths(args, folder) if command else _argument_paths(args, folder)):
            if rest == (SKILL_FILE,) and not ran:
                first = first or (index, "command reads SKILL.md" if command else "read SKILL.md")
            elif ran and rest:
                scripts = True
            elif rest:
                references = True
    if first is None:
        return Consult(False, references=references, scripts=scripts)
    return Consult(True, step=first[0], how=first[1], references=references, scripts=scripts)


def _arguments(text: str | None) -> Any:
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return text or ""


def _names_skill(args: Any, skill_name: str) -> bool:
    if isinstance(args, dict):
        named = args.get("skill", args.get("name", args.get("command")))
        return isinstance(named, str) and named.strip().split(":")[-1] == skill_name
    return False


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _inside(path: str, folder: tuple[str, ...]) -> tuple[str, ...] | None:
    """The components of ``path`` after ``folder`` when the path runs through it, else ``None``."""
    parts = [p for p in path.strip().strip("'\"").replace("\\", "/").split("/") if p not in ("", ".")]
    n = len(folder)
    for i in range(len(parts) - n + 1):
        if tuple(parts[i:i + n]) == folder:
            return tuple(parts[i + n:])
    return None


def _argument_paths(args: Any, folder: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], bool]]:
    for text in _strings(args):
        rest = _inside(text, folder)
        if rest is not None:
            yield rest, False


def _command_paths(args: Any, folder: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], bool]]:
    command = args.get("command", args.get("cmd", "")) if isinstance(args, dict) else args
    if isinstance(command, list):
        command = " ".join(str(c) for c in command)
    whole = _words(str(command))
    if len(whole) >= 3 and _program(whole) in ("bash", "sh", "zsh") and whole[1] in ("-c", "-lc"):
        yield from _command_paths({"command": whole[2]}, folder)  # Codex runs commands as bash -lc '…'
        return
    for segment in _SEPARATORS.split(str(command)):
        words = _words(segment)
        program = _program(words)
        runs = 0  # the word that names the program run: the first, or an interpreter's first non-flag
        if program in INTERPRETERS:
            runs = next((i for i, w in enumerate(words) if i and not w.startswith("-")), -1)
        for position, word in enumerate(words):
            rest = _inside(word, folder)
            if rest is not None:
                yield rest, position == runs


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:  # an unbalanced quote: words as the shell would not, but still words
        return command.split()


def _program(words: Sequence[str]) -> str:
    return words[0].rsplit("/", 1)[-1] if words else ""
