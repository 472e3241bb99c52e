"""The ``tools`` environment: the model calls tools over many turns until it answers.

One rollout: a fresh sandbox workspace holding the task's ``files`` (and the skill's folder at
``skills/<name>/`` when the skill is a folder); a system message (the skill body, plus one line
naming the skill folder) and a user message (the prompt, with the task's ``images``); then turns.
Each assistant turn's tool calls run in order, each result goes back as a ``tool`` message.

It ends with the first reply that calls no tool (its text is the answer), with a
``submit_answer`` call (its ``answer``), or as an errored rollout with its steps kept: ``max_turns``
replies that all called tools (kind ``max_turns``), ``time_limit_s`` passed (kind
``time_limit``; the running command and its children are killed), or a provider failure (its
kind). Where commands cannot be isolated, a rollout offering ``python`` or ``shell`` raises
``IsolationRefused`` before its first model call, unless ``sandbox.policy`` allows it. With ``answer_tag`` set (``answer``), a final reply must contain ``<answer>`` to be an
answer: one without it, or ``max_turns`` replies that all called tools, end the rollout *scored*
with an empty output (finish reason ``no_answer``), as benchmarks that count them as failures do.
A tool that raises, times out, is unknown, or gets arguments that are not JSON or do not
fit its schema is an error result shown to the model, never a crash.

Every model call goes through the pool with ``tools`` = the tool specs and ``context`` = this
environment's identity (its options and the digest of each function tool's file), so cached
replies are only reused for the same tools. The workspace lives until ``Rollout.release``; the
files the rollout wrote are copied to ``request.keep_dir`` when they total at most
``keep_files_bytes``.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import InputError, ProviderError
from skillopt_ci.core.messages import Message, ToolCall
from skillopt_ci.core.trajectory import Rollout, Step
from skillopt_ci.envs.base import (
    BaseEnvironment,
    RolloutRequest,
    keep_image,
    task_images,
    task_workspace,
    workspace_rollout,
)
from skillopt_ci.envs.functions import file_digest
from skillopt_ci.envs.toolbox import BUILTINS, Tool, ToolContext, ToolResult, build_tools, cap
from skillopt_ci.models.base import Completion, ModelCaller, call_totals
from skillopt_ci.sandbox import SandboxLimits, Workspace
from skillopt_ci.sandbox.policy import IsolationRefused, require_isolation

COMMAND_TOOLS = ("python", "shell")  # the built-ins that run a process (in the sandbox)


@dataclass(frozen=True)
class ToolsOptions:
    tools: Any = tuple(BUILTINS)  # built-in names, "module:function", or {function, name?, description?, parameters?}
    max_turns: int = 10
    time_limit_s: float = 300.0
    tool_timeout_s: float = 30.0
    memory_mb: int = 1024
    tool_output_chars: int = 20_000
    keep_files_bytes: int = 262_144
    transcript_chars: int = 20_000
    answer_tag: str | None = None  # the final reply must contain <answer_tag>; else no answer (scored, empty)


@dataclass
class _Progress:
    """What a rollout has done so far; survives the cancellation at the time limit."""

    started: float
    steps: list[Step] = field(default_factory=list)
    completions: list[Completion] = field(default_factory=list)
    output: str = ""
    finish_reason: str | None = None
    error: dict[str, str] | None = None
    no_answer: str | None = None

    def add(self, kind: str, **fields: Any) -> None:
        self.steps.append(Step(kind, elapsed_s=time.monotonic() - self.started, **fields))

    def fail(self, kind: str, message: str) -> None:
        self.error = {"kind": kind, "message": message}
        self.add("error", text=f"{kind}: {message}", is_error=True)

    def give_up(self, message: str) -> None:
        """End without an answer: scored (empty output), not an errored rollout."""
        self.output, self.finish_reason, self.no_answer = "", "no_answer", message
        self.add("error", text=f"no_answer: {message}", is_error=True)


class ToolsEnvironment(BaseEnvironment):
    name = "tools"
    Options = ToolsOptions

    def setup(self) -> None:
        opts = self.options
        self.check_sizes(("max_turns", "time_limit_s", "tool_timeout_s", "memory_mb", "tool_output_chars",
                          "transcript_chars"))
        if opts.answer_tag is not None and not re.fullmatch(r"[A-Za-z_][\w-]*", opts.answer_tag):
            raise InputError(f"environment tools: answer_tag must be a tag name such as answer, got {opts.answer_tag!r}",
                             where=self.where)
        self.tools, self.tool_files = self._tools()
        self.specs = tuple(t.spec for t in self.tools.values())
        self._identity = super().identity()
        if self.tool_files:
            self._identity["tool_files"] = {name: file_digest(path) for name, path in sorted(self.tool_files.items())}

    def _tools(self) -> tuple[dict[str, Tool], dict[str, Path]]:
        return build_tools(self.options.tools, self.suite_dir, self.where)

    def identity(self) -> dict[str, Any]:
        return dict(self._identity)

    async def run(self, request: RolloutRequest, models: ModelCaller) -> Rollout:
        if any(self.tools.get(name) is BUILTINS[name] for name in COMMAND_TOOLS):
            # before any model call: without isolation the run is refused, not each tool call
            require_isolation("the tools environment's python and shell tools")
        progress = _Progress(time.monotonic())
        messages = self._messages(request, progress)
        workspace = task_workspace(request, lambda ws: self._install(request, ws))
        try:
            await asyncio.wait_for(self._turns(request, models, workspace, messages, progress), self.options.time_limit_s)
        except asyncio.TimeoutError:
            progress.fail("time_limit", f"the rollout did not finish within time_limit_s = {self.options.time_limit_s:g} s")
        except BaseException:  # Ctrl-C, a cancelled run, a bug: the workspace must not outlive it
            workspace.cleanup()
            raise
        return self._rollout(request, workspace, progress)

    def _messages(self, request: RolloutRequest, progress: _Progress) -> list[Message]:
        system = request.skill.body.strip()
        if self._skill_folder(request) is not None:
            line = f"The skill's files are in the folder skills/{request.skill.name}/ of your working directory."
            system = f"{system}\n\n{line}" if system else line
        images = task_images(request.task, request.suite_dir)
        user = Message("user", (request.prompt, *images) if images else request.prompt)
        if images:
            kept = tuple(keep_image(i, request.image_dir) for i in images)
            progress.add("observation", text=request.prompt, images=kept)
        return [Message("system", system), user] if system else [user]

    @staticmethod
    def _skill_folder(request: RolloutRequest) -> Path | None:
        return getattr(request.skill, "folder", None) or request.skill_dir

    def _install(self, request: RolloutRequest, workspace: Workspace) -> None:
        folder = self._skill_folder(request)
        if folder is not None:
            workspace.install_skill(Path(folder), f"skills/{request.skill.name}", request.skill.text)

    async def _turns(self, request: RolloutRequest, models: ModelCaller, workspace: Workspace,
                     messages: list[Message], progress: _Progress) -> None:
        deadline = progress.started + self.options.time_limit_s
        for _ in range(self.options.max_turns):
            try:
                completion = await models.complete("target", messages, sample_index=request.sample_index,
                                                   tools=self.specs, context=self._identity)
            except ProviderError as exc:
                progress.fail(exc.kind, exc.message)
                return
            progress.completions.append(completion)
            progress.finish_reason = completion.finish_reason
            progress.add("model", text=completion.text, usage=completion.usage)
            if not completion.tool_calls:
                self._final(completion.text, progress)
                return
            messages.append(Message("assistant", completion.text, tool_calls=completion.tool_calls))
            for call in completion.tool_calls:
                progress.add("tool_call", name=call.name, arguments=call.arguments, call_id=call.id)
                result = await self._call(call, request, workspace, deadline)
                progress.add("tool_result", name=call.name, call_id=call.id, text=result.text, is_error=result.is_error)
                messages.append(Message("tool", result.text, tool_call_id=call.id, name=call.name,
                                        is_error=result.is_error))
                if result.answer is not None:
                    progress.output = result.answer
                    progress.finish_reason = "submit_answer"
                    return
        message = f"no final answer after max_turns = {self.options.max_turns} model turns"
        if self.options.answer_tag is not None:
            progress.give_up(message)
        else:
            progress.fail("max_turns", message)

    def _final(self, text: str, progress: _Progress) -> None:
        tag = self.options.answer_tag
        if tag is not None and f"<{tag.lower()}>" not in text.lower():
            progress.give_up(f"the final reply called no tool and has no <{tag}> tag")
        else:
            progress.output = text

    async def _call(self, call: ToolCall, request: RolloutRequest, workspace: Workspace, deadline: float) -> ToolResult:
        tool: Tool | None = self.tools.get(call.name)
        if tool is None:
            return ToolResult(f"unknown tool {call.name!r}; the tools are: {', '.join(self.tools)}", True)
        try:
            arguments = call.parsed_arguments()
        except ValueError as exc:
            return ToolResult(f"{call.name}: {exc}", True)
        problem = tool.check(arguments)
        if problem is not None:
            return ToolResult(f"{call.name}: invalid arguments: {problem}", True)
        opts = self.options
        wall = max(min(opts.tool_timeout_s, deadline - time.monotonic()), 0.01)
        limits = SandboxLimits(wall_s=wall, cpu_s=wall, memory_mb=opts.memory_mb,
                               output_bytes=max(4 * opts.tool_output_chars, 4096))
        ctx = ToolContext(workspace, request.task, limits, opts.tool_output_chars)
        try:
            return await tool.run(arguments, ctx)
        except IsolationRefused:
            raise  # the host cannot run it safely: the run's failure, not the model's
        except Exception as exc:  # a tool's own bug is the model's error result, not the run's crash
            return ToolResult(cap(f"{call.name} failed: {type(exc).__name__}: {exc}", opts.tool_output_chars), True)

    def _rollout(self, request: RolloutRequest, workspace: Workspace, progress: _Progress) -> Rollout:
        if progress.no_answer is not None:
            ending = f"[no answer] {progress.no_answer}"
        else:
            ending = f"[final answer] {cap(progress.output, 4_000)}"
        return workspace_rollout(request, workspace, self.options, progress.steps, ending, error=progress.error,
                                 output=progress.output, **call_totals(progress.completions, latency=0.0),
                                 wall_s=time.monotonic() - progress.started, finish_reason=progress.finish_reason)
