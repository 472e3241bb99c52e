"""The ``codegen`` environment: the model writes one Python program; the sandbox runs it on the
task's input files, the model repairs it from the error, and the final program runs on every case.

The task lists its test cases: ``cases: [{"input": "cases/1/input.xlsx", "output":
"cases/1/output.xlsx"}, ...]`` (workspace paths; the inputs come in through the task's ``files``).
One rollout:

1. a fresh workspace holding the task's ``files``; the messages: the skill body as the system
   message, the prompt plus the rules (one fenced Python block reading ``INPUT_PATH``, writing
   ``OUTPUT_PATH``) as the user message. Nothing in them depends on the machine or the workspace
   path, so the response cache replays a whole rollout;
2. each reply's program (the last ```` ```python ```` block, else the last fenced block) is
   written to ``solution.py`` and run on the first case with ``python -I`` under the sandbox
   limits (``timeout_s``, ``memory_mb``), in the workspace, with ``INPUT_PATH`` and
   ``OUTPUT_PATH`` both as globals of the program and as environment variables; the environment
   is the sandbox's clean one (no API key). A non-zero exit, the time limit or no output file is
   an execution error: the model gets it (the traceback names ``solution.py``; the workspace path
   is shown as ``.``) and writes a new version, up to ``max_turns`` replies. A reply without a
   code block is told so and counts as a turn;
3. the final program (the last one written) then runs on every other case (case i: input_i →
   output_i); the first case's output is the one the loop produced.

The rollout ends without error when the turns run out (its outputs are scored as they are: a
measured failure, not missing data); a provider failure is an errored rollout with its steps.
``Rollout.output`` is the final program; the scorer (``spreadsheet``) reads the workspace.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from skillopt_ci.core.errors import InputError, ProviderError
from skillopt_ci.core.messages import Message
from skillopt_ci.core.task import Task
from skillopt_ci.core.trajectory import Rollout, Step
from skillopt_ci.envs.base import BaseEnvironment, RolloutRequest, task_workspace, workspace_rollout
from skillopt_ci.envs.chat import chat_messages
from skillopt_ci.envs.toolbox import cap
from skillopt_ci.models.base import Completion, ModelCaller, call_totals
from skillopt_ci.sandbox import SandboxError, SandboxLimits, Workspace

SOLUTION = "solution.py"
RULES = (
    "Reply with one complete Python program in a single ```python fenced block. It reads the "
    "input workbook at the path in the variable INPUT_PATH and saves the resulting workbook to "
    "the path in OUTPUT_PATH (both are defined before your program runs, and are also "
    "environment variables). Use only the Python standard library, openpyxl and pandas."
)
# Runs solution.py with INPUT_PATH/OUTPUT_PATH as globals; a traceback starts at the program's
# own frame, so what the model sees names solution.py and its lines, nothing of this runner.
RUNNER = """import os, sys, traceback
os.environ["INPUT_PATH"], os.environ["OUTPUT_PATH"] = sys.argv[1], sys.argv[2]
source = open("solution.py", encoding="utf-8").read()
names = {"__name__": "__main__", "__file__": "solution.py", "INPUT_PATH": sys.argv[1], "OUTPUT_PATH": sys.argv[2]}
try:
    exec(compile(source, "solution.py", "exec"), names)
except SystemExit:
    raise
except BaseException as exc:
    traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
    sys.exit(1)
"""
_FENCE = re.compile(r"```([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.S)


@dataclass(frozen=True)
class CodegenOptions:
    max_turns: int = 30
    timeout_s: float = 600.0  # wall clock (and CPU) of one run of the program
    memory_mb: int = 2048
    error_chars: int = 4000  # what the model is shown of a failed run (start and end kept)
    keep_files_bytes: int = 262_144
    transcript_chars: int = 20_000


@dataclass(frozen=True)
class Case:
    input: str
    output: str


@dataclass
class _Run:
    """What a rollout has done so far."""

    started: float = field(default_factory=time.monotonic)
    steps: list[Step] = field(default_factory=list)
    completions: list[Completion] = field(default_factory=list)
    code: str = ""
    first_ok: bool = False
    finish: str = "max_turns"
    error: dict[str, str] | None = None

    def add(self, kind: str, text: str, **extra: Any) -> None:
        self.steps.append(Step(kind, text, elapsed_s=time.monotonic() - self.started, **extra))


def extract_code(text: str) -> str | None:
    """The program in a reply: the last ```python (or ```py) block, else the last fenced block."""
    blocks = _FENCE.findall(text)
    if not blocks:
        return None
    tagged = [body for lang, body in blocks if lang.lower() in ("python", "py", "python3")]
    code = (tagged or [body for _, body in blocks])[-1]
    return code if code.strip() else None


def task_cases(task: Task) -> list[Case]:
    raw: Any = task.fields.get("cases")
    ok = isinstance(raw, list) and raw and all(
        isinstance(c, dict) and isinstance(c.get("input"), str) and isinstance(c.get("output"), str) for c in raw)
    if not ok:
        raise InputError(f'task "{task.id}": environment codegen needs "cases": a non-empty list of '
                         '{"input", "output"} workspace paths', where=task.source or None)
    return [Case(c["input"], c["output"]) for c in raw]


class CodegenEnvironment(BaseEnvironment):
    name = "codegen"
    Options = CodegenOptions

    def setup(self) -> None:
        self.check_sizes(("max_turns", "timeout_s", "memory_mb", "error_chars", "transcript_chars"))
        self.limits = SandboxLimits(wall_s=self.options.timeout_s, cpu_s=self.options.timeout_s,
                                    memory_mb=self.options.memory_mb,
                                    output_bytes=max(4 * self.options.error_chars, 4096))

    def messages(self, request: RolloutRequest) -> list[Message]:
        """The first turn: a pure function of the skill and the prompt."""
        return chat_messages(request.skill, f"{request.prompt.rstrip()}\n\n{RULES}")

    async def run(self, request: RolloutRequest, models: ModelCaller) -> Rollout:
        cases = task_cases(request.task)
        run = _Run()
        workspace = task_workspace(request, lambda ws: None)
        try:
            await self._turns(request, models, workspace, cases[0], run)
            if run.code:
                await self._final(workspace, cases, run)
            return self._rollout(request, workspace, run)
        except BaseException:
            workspace.cleanup()
            raise

    async def _turns(self, request: RolloutRequest, models: ModelCaller, workspace: Workspace, first: Case,
                     run: _Run) -> None:
        messages = self.messages(request)
        for _ in range(self.options.max_turns):
            try:
                completion = await models.complete("target", messages, sample_index=request.sample_index,
                                                   context=self.identity())
            except ProviderError as exc:
                run.error = {"kind": exc.kind, "message": exc.message}
                run.add("error", f"{exc.kind}: {exc.message}", is_error=True)
                return
            run.completions.append(completion)
            run.add("model", completion.text, usage=completion.usage)
            messages.append(Message("assistant", completion.text))
            code = extract_code(completion.text)
            if code is None:
                feedback = "Your reply has no fenced Python code block. " + RULES
                run.add("observation", feedback)
                messages.append(Message("user", feedback))
                continue
            run.code = code
            run.add("action", code)
            ok, report = await self.execute(workspace, code, first)
            run.add("observation", report, is_error=not ok)
            if ok:
                run.first_ok, run.finish = True, "ok"
                return
            messages.append(Message("user", f"{report}\n\nFix the program and reply with the whole corrected "
                                            "program in one ```python block."))

    async def execute(self, workspace: Workspace, code: str, case: Case) -> tuple[bool, str]:
        """Run ``code`` on one case: (it wrote the output, what the model is told)."""
        try:
            workspace.write_text(SOLUTION, code)
            output = workspace.resolve(case.output)
            if output.is_file():
                output.unlink()  # an output left by an earlier version must not count for this one
            output.parent.mkdir(parents=True, exist_ok=True)
            result = await workspace.run([sys.executable, "-I", "-c", RUNNER, case.input, case.output],
                                         limits=self.limits)
        except (SandboxError, OSError) as exc:
            return False, f"Your program could not be run: {exc}"
        shown = cap(result.render(self.options.error_chars).replace(str(workspace.path), "."),
                    self.options.error_chars)
        if result.timed_out or result.exit_code != 0:
            return False, f"Your program failed on the input workbook.\n{shown}"
        if not output.is_file():
            return False, ("Your program ran (exit code 0) but wrote no file at OUTPUT_PATH; save the "
                           f"workbook with wb.save(OUTPUT_PATH).\n{shown}")
        return True, f"The program ran and wrote the output workbook.\n{shown}"

    async def _final(self, workspace: Workspace, cases: list[Case], run: _Run) -> None:
        total = len(cases)
        for number, case in enumerate(cases, 1):
            if number == 1 and run.first_ok:
                continue
            ok, report = await self.execute(workspace, run.code, case)
            head = f"case {number} of {total}: " + ("output written" if ok else "failed")
            run.add("observation", head if ok else f"{head}\n{report}", is_error=not ok)

    def _rollout(self, request: RolloutRequest, workspace: Workspace, run: _Run) -> Rollout:
        return workspace_rollout(request, workspace, self.options, run.steps,
                                 f"[final program: {run.finish}, {len(run.completions)} turn(s)]", error=run.error,
                                 output=run.code, **call_totals(run.completions), wall_s=time.monotonic() - run.started,
                                 finish_reason=None if run.error else run.finish)
